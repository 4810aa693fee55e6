// pretrained_heads: the heads of a real trained transformer. "Why do different heads learn
// different things?" -- asked of a model trained at scale, not of a toy.
//
// all-MiniLM-L6-v2 (sentence-transformers; a 6-layer, 12-head, 384-wide BERT encoder, 22.7 M
// parameters, trained on a billion sentence pairs) is loaded from its published weights
// (scripts/fetch-minilm) into models::BertModel, whose every layer is nn's TransformerEncoderLayer
// with the same MultiheadAttention and the same w_q, w_k, w_v, w_o as the toy models of the other
// examples: trained W_Q, W_K, W_V are ordinary parameters, read where a student already knows.
//
// 1. Every head is labelled by where its attention goes, measured on real sentences, with the
//    scores of Clark et al. (2019), "What Does BERT Look At?": to [CLS], to [SEP], to the previous
//    and next token, to itself, to the other pieces of its own word, to punctuation, and how broad
//    it is (the entropy of its attention row over the entropy of a uniform row), beside the
//    previous-token, first-token and induction scores of the other examples (inspect/head_scores.h).
// 2. Heads are removed (head_mask) one at a time, a layer at a time and a label at a time, and the
//    sentence embeddings are measured again: how similar paraphrases stay, how similar unrelated
//    sentences become, and whether each sentence's nearest neighbour is still its paraphrase.
// 3. What the heads that park on [CLS] write from it (its value through W_O, against the other
//    tokens'), and what taking [CLS] away from them does, against removing them: an attention sink.
// 4. runs/pretrained_heads/explorer.html: every head's pattern on a real sentence, in the browser.
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "report.h"

int main(int argc, char** argv) {
  using namespace pretrained_heads;
  Config c;
  c.model_dir = default_model_dir();
  CLI::App app{"pretrained_heads: label, remove and look at the heads of all-MiniLM-L6-v2"};
  example::add_run_options(app, c.seed, &c.out, {.seed_help = "the random spans of the induction score"});
  app.add_option("--model", c.model_dir, "the all-MiniLM-L6-v2 folder (scripts/fetch-minilm)");
  app.add_option("--threshold", c.threshold, "the least score that earns a label");
  app.add_option("--broad", c.broad, "entropy / log(T) from which a head with no label is \"broad\"");
  CLI11_PARSE(app, argc, argv);
  std::optional<Pretrained> loaded;
  try {
    loaded.emplace(load(c.model_dir));
  } catch (const mg::FileError& e) {  // not fetched (or unreadable): say how to get it
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  } catch (const mg::Error& e) {  // a folder that is not this model's
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
  Pretrained& m = *loaded;
  fmt::print("all-MiniLM-L6-v2: {} layers x {} heads, {} parameters, from {}\n", m.bert->config.num_hidden_layers,
             m.bert->config.num_attention_heads, m.bert->num_parameters(), c.model_dir);
  const Result r = run(m, c);

  fmt::print("\n1. Where each head looks, on {} sentences (mean weight per query; * = the other examples' scores)\n\n",
             corpus().size());
  fmt::print("{}", head_table(r.heads));
  std::map<std::string, std::vector<int64_t>> per_layer;  // label -> count in each layer
  for (const HeadProfile& h : r.heads) {
    auto& v = per_layer[h.label];
    v.resize(static_cast<size_t>(m.bert->config.num_hidden_layers));
    ++v[static_cast<size_t>(h.layer)];
  }
  fmt::print("\nlabels per layer (layer 0 ... {}):\n", m.bert->config.num_hidden_layers - 1);
  for (const auto& [label, v] : per_layer) fmt::print("  {:<15} {}\n", label, fmt::join(v, " "));

  fmt::print("\n2. Removing heads (head_mask = 0), sentence embeddings of {} paraphrase pairs\n\n",
             kParaphrases.size());
  fmt::print("{}", similarity_line("every head", 0, r.base, r.base));
  for (const Ablation& a : r.layers) fmt::print("{}", similarity_line(a.what, a.heads, a.after, r.base));
  for (const Ablation& a : r.by_label) fmt::print("{}", similarity_line("all " + a.what, a.heads, a.after, r.base));
  std::vector<Ablation> sorted = r.single;
  std::sort(sorted.begin(), sorted.end(),
            [](const Ablation& a, const Ablation& b) { return a.after.gap() < b.after.gap(); });
  fmt::print("\n  one head at a time: the 5 whose removal narrows the gap most, and the 5 that widen it most\n");
  for (size_t i = 0; i < 5; ++i)
    fmt::print("{}", similarity_line("head " + sorted[i].what, 1, sorted[i].after, r.base));
  for (size_t i = sorted.size() - 5; i < sorted.size(); ++i)
    fmt::print("{}", similarity_line("head " + sorted[i].what, 1, sorted[i].after, r.base));
  const Summary sum = summarize(r, m.bert->config);
  fmt::print("\nWhat the numbers say:\n");
  fmt::print(
      "  {} of {} heads put the largest share of their attention on [CLS] (mean weight >= {}), {} on [SEP] "
      "(no head gives [SEP] more than {:.2f}).\n",
      sum.cls_heads, r.heads.size(), c.threshold, sum.sep_heads, sum.max_sep);
  fmt::print(
      "  removing one head moves the paraphrase/unrelated gap by {:.4f} on average, {:.4f} at most (head {}): "
      "{}.\n",
      sum.mean_single, sum.max_single, sum.max_single_head,
      sum.max_single < 0.1 * r.base.gap() ? "no single head is essential, the model spreads the job over its heads"
                                          : "that head carries a large part of the job");
  fmt::print("  {} heads widen the gap when removed, by at most {:.4f}.\n", sum.widening, sum.max_widening);
  fmt::print("  per head removed, by label: {}\n", sum.cost_per_label);
  fmt::print(
      "  the costliest layer to remove is {}: gap {:.3f} -> {:.3f}; the nearest neighbour stays the paraphrase for "
      "{} of {} sentences.\n",
      sum.worst_layer, r.base.gap(), sum.worst_layer_gap, sum.worst_layer_nearest, 2 * kParaphrases.size());

  const ClsUse& u = r.cls_use;
  const Ablation* cls_removed = nullptr;
  for (const Ablation& a : r.by_label)
    if (a.what == "[CLS]") cls_removed = &a;
  if (u.heads > 0 && cls_removed) {
    fmt::print("\n3. The {} [CLS] heads, averaged over heads and sentences:\n", u.heads);
    fmt::print(
        "  weight on [CLS] {:.3f}; what [CLS]'s value writes, |v W_O^h^T|, {:.3f} against {:.3f} for the other tokens; "
        "[CLS]'s share of the weighted value norms {:.3f}\n",
        u.weight, u.cls_norm, u.other_norm, u.norm_share);
    fmt::print("{}", similarity_line("every [CLS] head", u.heads, cls_removed->after, r.base));
    fmt::print("{}", similarity_line("[CLS] taken from them", u.heads, u.without_cls, r.base));
    fmt::print("  {}\n", cls_verdict(u, cls_removed->after, r.base));
  }

  std::filesystem::create_directories(c.out);
  const std::string page =
      viz::write_explorer(c.out + "/explorer.html", "pretrained_heads: all-MiniLM-L6-v2", r.telemetry_json);
  fmt::print("\n4. every head's pattern on \"{}\" ({} tokens: {}): {}\n", kMoreSentences[2], r.probe_pieces.size(),
             fmt::join(r.probe_pieces, " "), page);
  return 0;
}
