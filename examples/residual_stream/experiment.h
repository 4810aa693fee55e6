#pragma once
// residual_stream, the experiment: char_gpt's model and training, the stream as a sum of its parts,
// the direct path and the logit lens, each part's logit term and the first-token heads. The tests
// include it; main.cpp runs it, report.h says and draws what it measured.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>

#include "../char_gpt/text_data.h"  // the text, its split and batches, shared with char_gpt
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

}  // namespace residual_stream
