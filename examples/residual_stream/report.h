#pragma once
// residual_stream: what the run measured, the sentences it prints and its pictures.
#include "experiment.h"

namespace residual_stream {

// ---------------------------------------------------------------- what the run measured

/// Everything the example prints, measured on the evaluation windows.
struct Results {
  double model_loss = 0;      // the model's own forward
  double recompose_diff = 0;  // max |logits of the parts' sum - the model's logits|
  Counted counted;
  std::vector<std::string> names;  // the stream's parts
  std::vector<double> lens;        // loss after the first k parts, k = 1 ... parts
  double agreement = 0;            // direct path's best next character = the bigram's
  double token_paths = 0;          // loss of e + mlp_0(ln_2(e)): the current character alone, through the first MLP
  std::vector<double> terms;       // per part, then the constant: its term in (right logit - mean logit)
  double term_total = 0;           // the model's own right-minus-mean logit
  std::vector<FirstToken> heads;
  double uniform_key0 = 0;  // mean over queries t >= 1 of 1 / (t + 1): key 0's weight if a head spread evenly
  struct Removal {
    size_t layer;
    int64_t head;
    double loss_without_key0, loss_without_head;
  };
  std::vector<Removal> removals;  // for each first-token head
};

/// Measure everything on the evaluation windows x (B, T) with next characters y, from the run s of m on x.
inline Results analyse(models::GPT& m, const Data& d, const Config& c, const Stream& s, const Tensor& x,
                       const Tensor& y) {
  Results r;
  {
    NoGradGuard no_grad;
    const Tensor logits = m(x).data();
    r.model_loss = loss_of(logits, y);
    r.recompose_diff = (s.logits - logits).abs().max().item();
  }
  r.counted = counted_losses(d, x, y);
  r.names = s.names;
  r.lens = logit_lens(m, s, y);
  r.agreement = agreement_with_bigram(m, s, x, r.counted);
  r.token_paths = token_paths_loss(m, s, y);
  r.terms = logit_terms(m, s, y);
  {
    NoGradGuard no_grad;
    const Tensor targets = y.unsqueeze(-1);
    r.term_total = (s.logits.gather(-1, targets).squeeze(-1) - s.logits.mean({-1})).mean().item();
  }
  r.heads = first_token_heads(m, s);
  const int64_t T = x.size(1);
  for (int64_t t = 1; t < T; ++t) r.uniform_key0 += 1.0 / static_cast<double>(t + 1) / static_cast<double>(T - 1);
  for (const FirstToken& f : r.heads)
    if (f.weight >= c.sink)
      r.removals.push_back({f.layer, f.head, loss_of(run_stream(m, x, without_key0(m, f.layer, f.head)).logits, y),
                            loss_of(run_stream(m, x, without_head(m, f.layer, f.head)).logits, y)});
  return r;
}

/// What section 2 concludes from the losses: how the direct path compares with the unigram and
/// the bigram, and how much of the gap to the bigram the first MLP closes on the same character.
inline std::string direct_path_verdict(const Results& r) {
  const double direct = r.lens.front(), uni = r.counted.unigram, bi = r.counted.bigram;
  // of the way from the unigram to the bigram (a text where the bigram is no better has no such way)
  const double way = uni > bi + 1e-9 ? (uni - direct) / (uni - bi) : (direct < uni ? 1.0 : 0.0);
  std::string v;
  if (direct <= bi + 0.05)
    v = fmt::format("The direct path alone does as well as the bigram ({:.4f} against {:.4f}).", direct, bi);
  else if (way >= 0.5)
    v = fmt::format(
        "The direct path alone ({:.4f}) is more than halfway from the unigram ({:.4f}) to the bigram ({:.4f}).", direct,
        uni, bi);
  else if (way > 0)
    v = fmt::format(
        "The direct path alone ({:.4f}) is only {:.0f}% of the way from the unigram ({:.4f}) to the bigram "
        "({:.4f}), though it sees the current character: only the sum is trained, and no path has to be "
        "useful on its own.",
        direct, 100 * way, uni, bi);
  else
    v = fmt::format(
        "The direct path alone ({:.4f}) does worse than the unigram ({:.4f}), though it sees the current character: "
        "only the sum is trained, and no path has to be useful on its own.",
        direct, uni);
  if (direct > bi + 0.05)
    v += fmt::format(
        "\n   MLP 0 applied to the embedding alone (no attention) gives {:.4f}: {:.0f}% of the way from the direct "
        "path to the bigram.",
        r.token_paths, 100 * (direct - r.token_paths) / (direct - bi));
  return v;
}

/// Section 3's conclusion: how the right-minus-mean logit divides between the embedding, the
/// attention layers, the MLPs and the constant term.
inline std::string terms_verdict(const Results& r) {
  double attn = 0, mlp = 0;
  for (size_t k = 1; k < r.names.size(); ++k) (r.names[k].ends_with(".attn") ? attn : mlp) += r.terms[k];
  return fmt::format(
      "   Of {:+.3f}: the embedding {:+.3f}, the attention layers {:+.3f}, the MLPs {:+.3f}, the biases {:+.3f}.",
      r.term_total, r.terms.front(), attn, mlp, r.terms.back());
}

/// Section 4's conclusion: which heads (if any) are first-token heads.
inline std::string first_token_verdict(const Results& r, double sink) {
  const FirstToken* most = &r.heads.front();
  for (const FirstToken& f : r.heads)
    if (f.weight > most->weight) most = &f;
  if (r.removals.empty())
    return fmt::format(
        "   No head is a first-token head (mean weight on key 0 >= {:.2f}): the most any head gives key 0 is {:.3f} "
        "(head {}.{}), {} the {:.3f} of spreading evenly.",
        sink, most->weight, most->layer, most->head, most->weight < r.uniform_key0 ? "less than" : "more than",
        r.uniform_key0);
  std::string v = fmt::format(
      "   {} first-token head(s) (mean weight on key 0 >= {:.2f}). Loss {:.4f}; for each, the loss with that head's key "
      "0 taken away and with the head removed:\n",
      r.removals.size(), sink, r.model_loss);
  for (const auto& rm : r.removals)
    v += fmt::format("   {}.{}: key 0 taken away {:.4f}, head removed {:.4f}\n", rm.layer, rm.head,
                     rm.loss_without_key0, rm.loss_without_head);
  return v;
}

/// The printed report: every number measured, every conclusion computed from them.
inline std::string report(const Results& r, const Config& c) {
  const size_t layers = (r.names.size() - 1) / 2;
  std::string o =
      fmt::format("1. The stream is a sum: the embedding + {} attention outputs + {} MLP outputs.\n", layers, layers);
  // (a difference of float32 rounding is given as a bound, not as its digits, which depend on the
  // order of the sums: it is no measurement)
  o += fmt::format("   The logits of the sum {} the model's ({}); validation loss {:.4f}.\n\n",
                   r.recompose_diff < 1e-3 ? "are" : "are NOT",
                   r.recompose_diff < 1e-4 ? std::string("to float32 rounding: max difference under 1e-4")
                                           : fmt::format("max difference {:.1e}", r.recompose_diff),
                   r.model_loss);
  o += "2. The stream read part way (ln_f and the head on the sum of the first parts):\n";
  o += fmt::format("   {:<22} {:>8}\n", "stream after", "loss");
  for (size_t k = 0; k < r.lens.size(); ++k) o += fmt::format("   {:<22} {:>8.4f}\n", r.names[k], r.lens[k]);
  o += fmt::format("   Counted from the training text: uniform {:.4f}, unigram {:.4f}, bigram {:.4f}.\n",
                   r.counted.uniform, r.counted.unigram, r.counted.bigram);
  o += fmt::format("   The direct path's most likely next character is the bigram's at {:.1f}% of positions.\n",
                   100 * r.agreement);
  o += "   " + direct_path_verdict(r) + "\n\n";
  o += "3. Each part's term in (right character's logit - mean logit), ln_f's sigma held fixed:\n";
  for (size_t k = 0; k < r.names.size(); ++k) o += fmt::format("   {:<22} {:>+8.3f}\n", r.names[k], r.terms[k]);
  o += fmt::format("   {:<22} {:>+8.3f}\n", "ln_f bias, head bias", r.terms.back());
  double sum = 0;
  for (double v : r.terms) sum += v;
  o += fmt::format("   {:<22} {:>+8.3f}   (the model's own: {:+.3f})\n", "sum", sum, r.term_total);
  o += terms_verdict(r) + "\n\n";
  o += fmt::format("4. Weight on key 0 (queries t >= 1; spread evenly it would be {:.3f}):\n", r.uniform_key0);
  o += fmt::format("   {:<6} {:>4} {:>8} {:>12} {:>12} {:>14}\n", "layer", "head", "weight", "|W_O v_0|", "|W_O v_j|",
                   "norm share");
  for (const FirstToken& f : r.heads)
    o += fmt::format("   {:<6} {:>4} {:>8.3f} {:>12.3f} {:>12.3f} {:>14.3f}\n", f.layer, f.head, f.weight, f.write_norm,
                     f.other_norm, f.norm_share);
  o += first_token_verdict(r, c.sink);
  return o;
}

/// OUT/lens.svg: the loss read after each part, with the unigram and bigram as guides.
inline std::string draw(const Results& r, const Config& c) {
  std::vector<double> k(r.lens.size());
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<double>(i);
  const std::vector<double> ends = {0, static_cast<double>(k.size() - 1)};
  std::vector<viz::Series> series = {
      {"stream after k parts", k, r.lens},
      {fmt::format("embedding + MLP 0 alone {:.2f}", r.token_paths), ends, {r.token_paths, r.token_paths}, true},
      {fmt::format("unigram {:.2f}", r.counted.unigram), ends, {r.counted.unigram, r.counted.unigram}, true},
      {fmt::format("bigram {:.2f}", r.counted.bigram), ends, {r.counted.bigram, r.counted.bigram}, true}};
  std::filesystem::create_directories(c.out);
  const std::string path = c.out + "/lens.svg";
  viz::write_file(
      path, viz::line_chart_svg(
                series, {.title = "Loss of the residual stream read part way",
                         .x_label = "parts added to the embedding (k: 2l+1 = attention of layer l, 2l+2 = its MLP)",
                         .y_label = "validation loss (nats/char)"}));
  return path;
}

}  // namespace residual_stream
