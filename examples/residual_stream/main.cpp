// residual_stream: "What does each layer add, and where does a head look when it has nothing to do?"
//
// A GPT's blocks never replace their input: each adds to it (x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))).
// So the vector the head reads at the end is a sum: the embedding, plus what every attention layer
// wrote, plus what every MLP wrote. This example trains char_gpt's model (the same flags, seeds
// and batches, so the same weights) and takes that sum apart:
//
// 1. The sum, checked: the parts add up to the stream the model computes, logits included.
// 2. The direct path: the embedding straight to the head, skipping every block. It sees only the
//    current character and its position, so the best it could do is a bigram table; we compare
//    its loss with the bigram counted from the training text, and read the stream after each
//    block through the same final LayerNorm and head ("logit lens").
// 3. Each part's term in the right character's logit. The final LayerNorm divides by the whole
//    stream's standard deviation; with that number held fixed, it is linear, and the logit splits
//    exactly into one term per part.
// 4. First-token heads: heads that put most of their weight on position 0 whatever the query.
//    We measure what that weight brings (the norm of what key 0's value writes, against the other
//    keys'), and what happens when key 0 is taken away from the head and its weight must go elsewhere.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>

#include <CLI/CLI.hpp>

#include "../char_gpt/text_data.h"  // the text, its split and batches, shared with char_gpt
#include "../common/gemm.h"         // add_gemm_option: --gemm portable|blas
#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace residual_stream {
using namespace mg;

struct Config {
  std::string data;      // text file; empty: the fortunes corpus
  int64_t context = 64;  // the model and its training: char_gpt's defaults
  int64_t dim = 128;
  int64_t heads = 4;
  int64_t layers = 4;
  int64_t batch = 32;
  int steps = 600;
  double lr = 3e-3;
  uint64_t seed = 0;
  double sink = 0.3;  // a head is a first-token head when its mean weight on key 0 reaches this
  std::string out = "runs/residual_stream";
};

using char_text::Data;

/// The text and its split, as char_gpt reads them.
inline Data load_data(const Config& c) { return char_text::load_data(c.data, c.context, "residual_stream"); }

/// char_gpt's training, step for step: AdamW, warm-up then cosine, clipping at 1, the batch of
/// each step drawn from (seed, step). The same flags give char_gpt's weights. (A module stays
/// where it is made, so the trained model comes back owned by a unique_ptr.)
inline std::unique_ptr<models::GPT> train(const Data& d, const Config& c) {
  Generator g(c.seed);
  auto model = std::make_unique<models::GPT>(
      d.vocab.size(), c.context, models::GPTOptions{.d_model = c.dim, .nhead = c.heads, .num_layers = c.layers}, g);
  models::GPT& m = *model;
  optim::AdamW opt(m.parameters(), {.lr = c.lr});
  optim::WarmupCosineLR sched(opt, std::max(1, c.steps / 20), c.steps, 0.1);
  viz::ProgressBar bar(c.steps, "train");
  for (int64_t step = 1; step <= c.steps; ++step) {
    const auto [x, y] = char_text::train_batch(d, c.batch, c.context, c.seed, step);
    Variable loss = cross_entropy(reshape(m(x), {-1, m.head.out_features}), y.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(m.parameters(), 1.0);
    opt.step();
    sched.step();
    bar.update(step, loss.item(), -1, c.batch * c.context);
  }
  bar.finish();
  return model;
}

/// Index i of dimension dim, that dimension dropped (torch's select).
inline Tensor pick(const Tensor& t, int64_t dim, int64_t i) { return t.narrow(dim, i, 1).squeeze(dim); }

// ---------------------------------------------------------------- 1. the stream as a sum

/// Changes one attention layer's output: (layer, its input ln_1(x) (B, T, d), its output (B, T, d),
/// its weights (B, H, T, T), its scores (B, H, T, T), masked entries -inf) -> the output to add to
/// the stream instead.
using AttentionEdit = std::function<Tensor(size_t, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>;

/// What the forward wrote into the residual stream, part by part.
struct Stream {
  std::vector<std::string> names;  // "embedding", "0.attn", "0.mlp", "1.attn", ...
  std::vector<Tensor> parts;       // each (B, T, d); their sum, in order, is the final stream
  std::vector<Tensor> attn_in;     // per layer: ln_1(x), what the attention read (B, T, d)
  std::vector<Tensor> weights;     // per layer: the attention weights (B, H, T, T)
  Tensor final_stream;             // (B, T, d): what ln_f reads
  Tensor logits;                   // (B, T, vocab)
};

/// GPT::forward written out block by block (models/gpt.cpp), keeping every part it adds:
///   x_0 = tok(ids) + pos(t);  x += attn_l(ln_1(x));  x += proj(gelu(fc(ln_2(x))));  logits = head(ln_f(x)).
/// `edit`, when set, replaces what each attention layer adds.
inline Stream run_stream(models::GPT& m, const Tensor& ids, const AttentionEdit& edit = {}) {
  NoGradGuard no_grad;
  inspect::AttentionCapture capture(m);  // the weights of every layer
  Stream s;
  Variable x = m.tok(ids) + m.pos(arange(0, ids.size(1)));
  s.names.push_back("embedding"), s.parts.push_back(x.data());
  for (size_t l = 0; l < m.blocks.size(); ++l) {
    const auto& b = m.blocks.at<models::GPTBlock>(l);
    const Variable in = b.ln_1(x);
    Tensor a = b.attn(in, nn::AttentionForwardOptions{.is_causal = true}).output.data();
    const inspect::AttentionCapture::Record& rec = capture.at(fmt::format("blocks.{}.attn", l));
    const Tensor w = rec.weights;
    if (edit) a = edit(l, in.data(), a, w, rec.scores);
    x = x + Variable(a);
    const Tensor mlp = b.proj(gelu(b.fc(b.ln_2(x)), b.gelu_approximate)).data();
    x = x + Variable(mlp);
    s.attn_in.push_back(in.data()), s.weights.push_back(w);
    s.names.push_back(fmt::format("{}.attn", l)), s.parts.push_back(a);
    s.names.push_back(fmt::format("{}.mlp", l)), s.parts.push_back(mlp);
  }
  s.final_stream = x.data();
  s.logits = m.head(m.ln_f(x)).data();
  return s;
}

/// Mean cross-entropy (nats per character) of logits (B, T, V) against targets (B, T).
inline double loss_of(const Tensor& logits, const Tensor& targets) {
  NoGradGuard no_grad;
  return cross_entropy(Variable(logits.reshape({-1, logits.size(2)})), targets.reshape({-1})).item();
}

/// The validation windows every measurement reads: char_gpt's 8 batches, as one (8B, T) batch. Every
/// layer's (8B, H, T, T) weights are kept at once: a ValueError when they would pass 2 GB in all.
inline std::pair<Tensor, Tensor> eval_set(const Data& d, const Config& c) {
  const double bytes = 8.0 * static_cast<double>(c.batch) * static_cast<double>(c.heads) *
                       static_cast<double>(c.context) * static_cast<double>(c.context) * 4.0 * 2.0 *
                       static_cast<double>(c.layers);  // weights and scores
  MG_CHECK(bytes <= 2e9, ValueError,
           "residual_stream: measuring {} windows of {} characters keeps {:.1f} GB of attention weights and scores; "
           "lower --batch or --context (at most 2 GB)",
           8 * c.batch, c.context, bytes / 1e9);
  std::vector<Tensor> xs, ys;
  for (const auto& [x, y] : char_text::val_batches(d, c.batch, c.context, c.seed)) xs.push_back(x), ys.push_back(y);
  return {concat(xs, 0), concat(ys, 0)};
}

// ---------------------------------------------------------------- 2. direct path and logit lens

/// Reference losses on the evaluation windows, from counts of the training text: guessing
/// uniformly, the unigram (how often each character is) and the bigram (how often each follows
/// each), both with add-`alpha` smoothing.
struct Counted {
  double uniform, unigram, bigram;
  std::vector<int64_t> bigram_best;  // per character: the bigram's most likely next one
};

/// The Counted losses of next characters y after characters x (both (B, T)), counted from d.train.
inline Counted counted_losses(const Data& d, const Tensor& x, const Tensor& y, double alpha = 0.5) {
  const int64_t V = d.vocab.size();
  std::vector<double> uni(V, alpha), bi(V * V, alpha);
  for (size_t i = 0; i + 1 < d.train.size(); ++i) uni[d.train[i + 1]] += 1, bi[d.train[i] * V + d.train[i + 1]] += 1;
  double uni_total = 0;
  for (double u : uni) uni_total += u;
  std::vector<double> row_total(V, 0);
  Counted r{std::log(static_cast<double>(V)), 0, 0, std::vector<int64_t>(V, 0)};
  for (int64_t a = 0; a < V; ++a)
    for (int64_t b = 0; b < V; ++b) {
      row_total[a] += bi[a * V + b];
      if (bi[a * V + b] > bi[a * V + r.bigram_best[a]]) r.bigram_best[a] = b;
    }
  const auto xs = x.to_vector<int64_t>(), ys = y.to_vector<int64_t>();
  for (size_t i = 0; i < xs.size(); ++i) {
    r.unigram -= std::log(uni[ys[i]] / uni_total);
    r.bigram -= std::log(bi[xs[i] * V + ys[i]] / row_total[xs[i]]);
  }
  r.unigram /= static_cast<double>(xs.size()), r.bigram /= static_cast<double>(xs.size());
  return r;
}

/// The loss of reading the stream after its first k parts through ln_f and the head, for
/// k = 1 (the direct path: the embedding alone) ... all parts (the model itself).
inline std::vector<double> logit_lens(models::GPT& m, const Stream& s, const Tensor& y) {
  NoGradGuard no_grad;
  std::vector<double> losses;
  Tensor x = zeros_like(s.parts[0]);
  for (const Tensor& p : s.parts) {
    x = x + p;
    losses.push_back(loss_of(m.head(m.ln_f(Variable(x))).data(), y));
  }
  return losses;
}

/// The loss of the paths that see only the current character: the embedding plus what the first
/// MLP makes of the embedding alone, e + mlp_0(ln_2(e)), skipping layer 0's attention and the
/// rest. (The direct path is e alone.)
inline double token_paths_loss(models::GPT& m, const Stream& s, const Tensor& y) {
  NoGradGuard no_grad;
  const auto& b = m.blocks.at<models::GPTBlock>(0);
  const Variable e(s.parts[0]);
  const Variable z = e + b.proj(gelu(b.fc(b.ln_2(e)), b.gelu_approximate));
  return loss_of(m.head(m.ln_f(z)).data(), y);
}

/// Of the positions in x (B, T), the fraction where the direct path's most likely next character
/// is the bigram's.
inline double agreement_with_bigram(models::GPT& m, const Stream& s, const Tensor& x, const Counted& counted) {
  NoGradGuard no_grad;
  const auto best = argmax(m.head(m.ln_f(Variable(s.parts[0]))).data(), -1).to_vector<int64_t>();
  const auto xs = x.to_vector<int64_t>();
  int64_t same = 0;
  for (size_t i = 0; i < xs.size(); ++i) same += best[i] == counted.bigram_best[xs[i]];
  return static_cast<double>(same) / static_cast<double>(xs.size());
}

// ---------------------------------------------------------------- 3. each part's term in the logit

/// Each part's term in the right character's logit minus the mean of all logits, averaged over
/// the positions. ln_f(x) = gamma * (x - mean(x)) / sigma + beta. With sigma, the whole stream's,
/// held fixed, x - mean(x) is the sum of (part - mean(part)), so
///   head(ln_f(x)) = sum over parts of W (gamma * (part - mean(part)) / sigma)  +  (W beta + b),
/// exactly. The last entry of the result is that constant term; the entries add up to the model's.
inline std::vector<double> logit_terms(models::GPT& m, const Stream& s, const Tensor& y) {
  NoGradGuard no_grad;
  const double eps = m.ln_f.eps;
  const Tensor& x = s.final_stream;
  const Tensor centred = x - x.mean({-1}, true);
  const Tensor sigma = sqrt((centred * centred).mean({-1}, true) + eps);  // (B, T, 1)
  const Tensor W = m.head.weight.data();                                  // (V, d)
  const Tensor targets = y.unsqueeze(-1);                                 // (B, T, 1)
  // A (B, T, V) logit-like tensor -> the mean over positions of (its value at the target - its mean over V).
  auto term = [&](const Tensor& z) { return (z.gather(-1, targets).squeeze(-1) - z.mean({-1})).mean().item(); };
  std::vector<double> terms;
  for (const Tensor& p : s.parts)
    terms.push_back(term(matmul((p - p.mean({-1}, true)) * m.ln_f.weight.data() / sigma, W.transpose(0, 1))));
  Tensor constant = matmul(m.ln_f.bias.data(), W.transpose(0, 1));
  if (m.head.bias.defined()) constant = constant + m.head.bias.data();
  terms.push_back(term(constant.expand({x.size(0), x.size(1), W.size(0)})));
  return terms;
}

// ---------------------------------------------------------------- 4. first-token heads

/// One head's use of key 0, measured on the evaluation windows over the queries t >= 1 (query 0
/// has only key 0 to look at).
struct FirstToken {
  size_t layer;
  int64_t head;
  double weight;      // mean attention weight on key 0
  double write_norm;  // mean over windows of |W_O^h v_0|: how much key 0's value writes
  double other_norm;  // the same for the keys t >= 1
  double norm_share;  // key 0's fraction of sum_j w_tj |W_O^h v_j| (weighted value norms; the vectors may cancel)
};

/// What head h of layer l adds to the stream from each key, before weighting: u_j = W_O^h v_j^h,
/// (B, T, d), where v^h is head h's slice of w_v(ln_1(x)) (inspect::head_value_writes).
inline Tensor head_writes(models::GPT& m, size_t l, int64_t h, const Tensor& attn_in) {
  NoGradGuard no_grad;
  return inspect::head_value_writes(m.blocks.at<models::GPTBlock>(l).attn, Variable(attn_in), h).data();
}

/// Every head's use of key 0 on the run `s` recorded, in model order.
inline std::vector<FirstToken> first_token_heads(models::GPT& m, const Stream& s) {
  std::vector<FirstToken> out;
  for (size_t l = 0; l < s.weights.size(); ++l)
    for (int64_t h = 0; h < s.weights[l].size(1); ++h) {
      const Tensor w = pick(s.weights[l], 1, h).narrow(1, 1, s.weights[l].size(2) - 1);  // (B, T-1, T): queries t >= 1
      const Tensor u = head_writes(m, l, h, s.attn_in[l]);                               // (B, T, d)
      const Tensor norms = (u * u).sum({-1}).sqrt();                                     // (B, T)
      const Tensor written = w * norms.unsqueeze(1);                                     // weight * |u_j|
      FirstToken f{l, h};
      f.weight = pick(w, 2, 0).mean().item();
      f.write_norm = pick(norms, 1, 0).mean().item();
      f.other_norm = norms.narrow(1, 1, norms.size(1) - 1).mean().item();
      f.norm_share = (pick(written, 2, 0).sum() / written.sum()).item();
      out.push_back(f);
    }
  return out;
}

/// An edit of run_stream that takes key 0 away from head h of layer `layer` for every query t >= 1:
/// the head's softmax is taken again over its scores with key 0's set to -inf, so its weight goes to
/// the other keys in proportion to theirs (exact even where the weight on key 0 rounded to 1).
/// Query 0 has only key 0 and keeps it.
inline AttentionEdit without_key0(models::GPT& m, size_t layer, int64_t h) {
  return
      [&m, layer, h](size_t l, const Tensor& in, const Tensor& out, const Tensor& w, const Tensor& scores) -> Tensor {
        if (l != layer) return out;
        const int64_t T = scores.size(2);
        std::vector<float> hide(static_cast<size_t>(T * T), 0.0f);
        for (int64_t t = 1; t < T; ++t) hide[static_cast<size_t>(t * T)] = -INFINITY;
        Tensor w_new = softmax(pick(scores, 1, h) + from_vector<float>(hide, {T, T}), -1);  // (B, T, T)
        w_new.narrow(1, 0, 1).copy_(pick(w, 1, h).narrow(1, 0, 1));                         // query 0 as it was
        const Tensor u = head_writes(m, l, h, in);                                          // (B, T, d)
        return out - matmul(pick(w, 1, h), u) + matmul(w_new, u);
      };
}

/// An edit of run_stream that removes head h of layer `layer` (its part of the output is dropped).
inline AttentionEdit without_head(models::GPT& m, size_t layer, int64_t h) {
  return [&m, layer, h](size_t l, const Tensor& in, const Tensor& out, const Tensor& w, const Tensor&) -> Tensor {
    return l != layer ? out : out - matmul(pick(w, 1, h), head_writes(m, l, h, in));
  };
}

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
  viz::write_file(path,
                  viz::line_chart_svg(series, "Loss of the residual stream read part way",
                                      "parts added to the embedding (k: 2l+1 = attention of layer l, 2l+2 = its MLP)",
                                      "validation loss (nats/char)"));
  return path;
}

}  // namespace residual_stream

#ifndef MG_EXAMPLE_NO_MAIN
int main(int argc, char** argv) {
  using namespace residual_stream;
  Config c;
  CLI::App app{"residual_stream: the residual stream as a sum of parts, the direct path, and first-token heads"};
  example::add_gemm_option(app);
  app.add_option("--data", c.data, "text file to train on (default: Debian's fortunes)");
  app.add_option("--steps", c.steps, "AdamW steps")->check(CLI::Range(1, 1000000));
  app.add_option("--lr", c.lr, "peak learning rate")->check(CLI::PositiveNumber);
  app.add_option("--context", c.context, "characters of context")->check(CLI::Range(8, 1024));
  app.add_option("--dim", c.dim, "model width")->check(CLI::Range(4, 4096));
  app.add_option("--heads", c.heads, "attention heads")->check(CLI::Range(1, 64));
  app.add_option("--layers", c.layers, "Transformer blocks")->check(CLI::Range(1, 64));
  app.add_option("--batch", c.batch, "sequences per step")->check(CLI::Range(1, 4096));
  app.add_option("--sink", c.sink, "mean weight on key 0 that makes a first-token head")->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", c.seed, "random seed");
  app.add_option("--out", c.out, "output folder");
  CLI11_PARSE(app, argc, argv);
  try {
    const Data d = load_data(c);
    const std::unique_ptr<models::GPT> model = train(d, c);
    models::GPT& m = *model;
    const auto [x, y] = eval_set(d, c);
    const Stream s = run_stream(m, x);
    const Results r = analyse(m, d, c, s, x, y);
    std::printf("%s\npicture: %s\n", report(r, c).c_str(), draw(r, c).c_str());
  } catch (const mg::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
#endif
