#pragma once
// pretrained_heads: the whole run, its summary and the tables it prints.
#include "experiment.h"

namespace pretrained_heads {

struct Result {
  std::vector<HeadProfile> heads;
  Similarity base;
  std::vector<Ablation> single;    // one head at a time, in model order
  std::vector<Ablation> layers;    // one whole layer at a time
  std::vector<Ablation> by_label;  // every head of one label at once
  ClsUse cls_use;                  // what the [CLS] heads write, and taking [CLS] away from them
  std::string telemetry_json;      // the explorer page's data
  std::vector<std::string> probe_pieces;
};

inline Result run(Pretrained& m, const Config& c) {
  Result r;
  const models::BertConfig& bc = m.bert->config;
  r.heads = profile_heads(m, corpus(), c);
  r.base = similarity(m);
  for (const HeadProfile& h : r.heads)
    r.single.push_back(
        {fmt::format("{}.{}", h.layer, h.head), 1,
         similarity(m, mask_without(bc, [&](int64_t l, int64_t k) { return l == h.layer && k == h.head; }))});
  for (int64_t l = 0; l < bc.num_hidden_layers; ++l)
    r.layers.push_back({fmt::format("layer {}", l), bc.num_attention_heads,
                        similarity(m, mask_without(bc, [&](int64_t ll, int64_t) { return ll == l; }))});
  std::map<std::string, std::vector<int64_t>> groups;
  for (const HeadProfile& h : r.heads) groups[h.label].push_back(h.layer * bc.num_attention_heads + h.head);
  for (const auto& group : groups) {
    const std::string& label = group.first;
    const std::vector<int64_t>& members = group.second;  // (a name, not a binding: lambdas capture it)
    int64_t n = 0;
    const Tensor mask = mask_without(
        bc,
        [&](int64_t l, int64_t k) {
          return std::count(members.begin(), members.end(), l * bc.num_attention_heads + k) > 0;
        },
        &n);
    r.by_label.push_back({label, n, similarity(m, mask)});
  }
  r.cls_use = measure_cls_use(m, r.heads);
  // The explorer page: every head's pattern on one real sentence.
  const Tokens probe = tokenize(m.tokenizer, kMoreSentences[2]);
  r.probe_pieces = probe.pieces;
  const int64_t T = static_cast<int64_t>(probe.ids.size());
  inspect::Telemetry tel(*m.bert, [&](const Tensor& ids) { (*m.bert)(ids); },
                         {.vocab = bc.vocab_size,
                          .probe = from_vector<int64_t>(probe.ids, {1, T}),
                          .tokens = probe.pieces,
                          .pattern_length = T,
                          .scores = {.induction_length = T / 2, .threshold = c.threshold, .seed = c.seed}});
  tel.record(0);
  r.telemetry_json = tel.json({{"example", "pretrained_heads"}, {"model", "all-MiniLM-L6-v2"}});
  return r;
}

/// The conclusions, computed from a Result.
struct Summary {
  int64_t cls_heads = 0, sep_heads = 0;    // heads labelled [CLS], [SEP]
  double mean_single = 0, max_single = 0;  // |gap change| of removing one head: mean, largest
  std::string max_single_head;
  int64_t widening = 0;     // heads whose removal widens the gap
  double max_widening = 0;  // by at most this much
  double max_sep = 0;       // the largest [SEP] score of any head
  std::string worst_layer;  // the layer whose removal narrows the gap most
  double worst_layer_gap = 0;
  int64_t worst_layer_nearest = 0;
  std::string cost_per_label;  // "label: gap change / heads" for each label
};

inline Summary summarize(const Result& r, const models::BertConfig&) {
  Summary s;
  for (const HeadProfile& h : r.heads) {
    s.cls_heads += h.label == "[CLS]";
    s.sep_heads += h.label == "[SEP]";
  }
  for (const HeadProfile& h : r.heads) s.max_sep = std::max(s.max_sep, h.sep);
  for (const Ablation& a : r.single) {
    s.widening += a.after.gap() > r.base.gap();
    s.max_widening = std::max(s.max_widening, a.after.gap() - r.base.gap());
    const double d = std::abs(a.after.gap() - r.base.gap());
    s.mean_single += d / static_cast<double>(r.single.size());
    if (d > s.max_single) {
      s.max_single = d;
      s.max_single_head = a.what;
    }
  }
  const auto worst = std::min_element(r.layers.begin(), r.layers.end(), [](const Ablation& a, const Ablation& b) {
    return a.after.gap() < b.after.gap();
  });
  s.worst_layer = worst->what;
  s.worst_layer_gap = worst->after.gap();
  s.worst_layer_nearest = worst->after.nearest_ok;
  std::vector<std::string> parts;
  for (const Ablation& a : r.by_label)
    parts.push_back(fmt::format("{} {:+.4f}", a.what, (a.after.gap() - r.base.gap()) / static_cast<double>(a.heads)));
  s.cost_per_label = fmt::format("{}", fmt::join(parts, ", "));
  return s;
}

// ---------------------------------------------------------------- printing

inline std::string head_table(const std::vector<HeadProfile>& heads) {
  std::string s = fmt::format("{:>5}  {:<15} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7}   {:>6} {:>6} {:>6}\n",
                              "head", "label", "[CLS]", "[SEP]", "prev", "next", "self", "word", "punct", "breadth",
                              "prev*", "first*", "induc*");
  for (const HeadProfile& h : heads)
    s += fmt::format(
        "{:>3}.{:<2} {:<15} {:6.2f} {:6.2f} {:6.2f} {:6.2f} {:6.2f} {:6.2f} {:6.2f} {:7.2f}   {:6.2f} {:6.2f} {:6.2f}\n",
        h.layer, h.head, h.label, h.cls, h.sep, h.previous, h.next, h.self, h.same_word, h.punctuation, h.breadth,
        h.previous_token, h.first_token, h.induction);
  return s;
}

inline std::string similarity_line(const std::string& what, int64_t heads, const Similarity& s,
                                   const Similarity& base) {
  return fmt::format(
      "  {:<22} {:>3} heads   paraphrase {:.3f} ({:+.3f})   unrelated {:.3f} ({:+.3f})   gap {:.3f} ({:+.3f})   "
      "nearest = paraphrase {:>2}/{}\n",
      what, heads, s.paraphrase, s.paraphrase - base.paraphrase, s.unrelated, s.unrelated - base.unrelated, s.gap(),
      s.gap() - base.gap(), s.nearest_ok, 2 * kParaphrases.size());
}

/// Section 3's conclusion, computed: how much less [CLS] writes than it receives, and whether taking
/// it away from the heads hurts the embeddings more than removing the heads.
inline std::string cls_verdict(const ClsUse& u, const Similarity& removed, const Similarity& base) {
  std::string v = fmt::format(
      "[CLS] gets {:.0f}% of these heads' weight but holds {:.0f}% of their weighted value norms: its value "
      "vector, through W_O, is {:.2f}x as long as the other tokens'.",
      100 * u.weight, 100 * u.norm_share, u.cls_norm / u.other_norm);
  const double lost_removed = base.gap() - removed.gap(), lost_taken = base.gap() - u.without_cls.gap();
  if (lost_taken > lost_removed && lost_removed > 0)
    v += fmt::format(
        " Taking [CLS] away narrows the gap by {:.3f}, {:.1f}x the {:.3f} of removing the heads: the weight parked "
        "on [CLS] is not free to move.",
        lost_taken, lost_taken / lost_removed, lost_removed);
  else if (lost_taken > lost_removed)
    v += fmt::format(" Taking [CLS] away narrows the gap by {:.3f}; removing the heads does not narrow it ({:+.3f}).",
                     lost_taken, -lost_removed);
  else
    v += fmt::format(" Taking [CLS] away narrows the gap by {:.3f}, no more than removing the heads ({:.3f}).",
                     lost_taken, lost_removed);
  return v;
}

}  // namespace pretrained_heads
