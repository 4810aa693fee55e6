#pragma once
// why_sqrt_dk, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <algorithm>
#include <cmath>
#include <memory>

#include "../common/numbers.h"  // window_mean, median, median_ms, finite_abs_max
#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace why_sqrt_dk {
using namespace mg;
using example::window_mean;

// Part 2's two tasks, on sequences of seq_len random tokens, one answer per sequence given at
// every position: the first token (over 16 tokens), or how many of the tokens are 0 (over 4).
enum class Task { FirstToken, CountZeros };
const char* task_name(Task t) { return t == Task::FirstToken ? "name the first token" : "count the 0s"; }

struct Config {
  int64_t keys = 16;       // keys per query in part 1 (a sequence of 16 tokens)
  int64_t queries = 4096;  // random queries per width in part 1
  int64_t max_dk = 1024;   // part 1 runs d_k = 2, 4, ..., max_dk
  int64_t dk = 64;         // part 2's head width (= the model width: one head)
  int64_t seq_len = 16;
  int64_t batch = 64;
  int steps = 600;   // steps per run in part 2
  double lr = 1e-3;  // Adam's (or SGD's) learning rate
  bool sgd = false;  // plain SGD instead of Adam (which rescales every gradient)
  uint64_t seed = 0;
  std::string out = "runs/why_sqrt_dk";
};

// A softmax row counts as "passing almost no gradient" when its Jacobian's norm is below this.
constexpr double kFrozen = 0.01;

// ---- part 1: statistics of random scores ----------------------------------------------------

// For one width and one choice of scale: the spread of the scores, the mean largest softmax
// weight and the mean Frobenius norm of the softmax Jacobian over the queries.
struct ScoreStats {
  double score_std = 0;      // standard deviation of the scores (q . k, or q . k / sqrt(d_k))
  double max_weight = 0;     // mean over queries of the largest softmax weight
  double jacobian_norm = 0;  // mean over queries of ||diag(p) - p p^T||_F
  double frozen = 0;         // share of queries whose Jacobian norm is below kFrozen
};

// ||diag(p) - p p^T||_F^2 = sum_i (p_i - p_i^2)^2 + sum_{i != j} p_i^2 p_j^2, for each row p of
// probs (N, n) -> (N). The second sum is (sum p^2)^2 - sum p^4, which cancels to a rounding error
// (possibly below 0) when p is one-hot: clamped at 0.
Tensor softmax_jacobian_norm(const Tensor& probs) {
  const Tensor d = probs - probs * probs, sq = probs * probs;
  const Tensor p2 = sum(sq, {-1}), p4 = sum(sq * sq, {-1});
  return sqrt(sum(d * d, {-1}) + clamp(p2 * p2 - p4, 0.0, std::nullopt));
}

ScoreStats score_stats(const Tensor& q, const Tensor& k, bool scaled) {
  // q (N, d), k (N, n, d) -> scores (N, n): query i against its own n keys
  const double d = static_cast<double>(q.size(1));
  Tensor s = matmul(k, q.unsqueeze(2)).squeeze(2);
  if (scaled) s = s * (1 / std::sqrt(d));
  const Tensor p = softmax(s, -1);
  ScoreStats r;
  r.score_std = std::sqrt(mean(s * s).item() - std::pow(mean(s).item(), 2));
  r.max_weight = mean(std::get<0>(max(p, -1))).item();
  const Tensor j = softmax_jacobian_norm(p);
  r.jacobian_norm = mean(j).item();
  r.frozen = mean(lt(j, full({1}, kFrozen, DType::Float64)).to(DType::Float64)).item();
  return r;
}

struct WidthRow {
  int64_t dk;
  ScoreStats unscaled, scaled;
};

std::vector<WidthRow> sweep_widths(const Config& c) {
  std::vector<WidthRow> rows;
  for (int64_t d = 2; d <= c.max_dk; d *= 2) {
    Generator g(c.seed * 1000 + static_cast<uint64_t>(d));
    const Tensor q = randn({c.queries, d}, g, DType::Float64), k = randn({c.queries, c.keys, d}, g, DType::Float64);
    rows.push_back({d, score_stats(q, k, false), score_stats(q, k, true)});
  }
  return rows;
}

// ---- part 2: one head trained with and without the scale ------------------------------------

int64_t vocab(Task t) { return t == Task::FirstToken ? 16 : 4; }
int64_t classes(const Config& c, Task t) { return t == Task::FirstToken ? vocab(t) : c.seq_len + 1; }

// Embeddings -> one attention head (W_Q, W_K, W_V, no biases) -> read-out, no residual: all the
// read-out sees is what attention gathered. Every weight is drawn so that the features of x, q, k
// and v have variance about 1, the premise of the argument.
struct Head : nn::Callable<Head> {
  nn::Embedding tok, pos;
  nn::Linear w_q, w_k, w_v, readout;
  bool scaled = true;
  Head(const Config& c, Task t, Generator& g)
      : tok(vocab(t), c.dk, {}, g),
        pos(c.seq_len, c.dk, {}, g),
        w_q(c.dk, c.dk, {.bias = false}, g),
        w_k(c.dk, c.dk, {.bias = false}, g),
        w_v(c.dk, c.dk, {.bias = false}, g),
        readout(c.dk, classes(c, t), {}, g) {
    for (auto [name, m] : {std::pair<const char*, nn::Module*>{"tok", &tok},
                           {"pos", &pos},
                           {"w_q", &w_q},
                           {"w_k", &w_k},
                           {"w_v", &w_v},
                           {"readout", &readout}})
      register_module(name, *m);
    const double half = std::sqrt(0.5), inv = 1 / std::sqrt(static_cast<double>(c.dk));
    nn::init::normal_(tok.weight, 0, half, g);  // x = tok + pos: variance 1/2 + 1/2
    nn::init::normal_(pos.weight, 0, half, g);
    for (nn::Linear* l : {&w_q, &w_k, &w_v}) nn::init::normal_(l->weight, 0, inv, g);  // q_i: d_k terms of 1/d_k
  }
  /// (B, T, d) embeddings -> (B, T, T) scores before softmax: q k^T, divided by sqrt(d_k) if scaled.
  Variable scores(const Variable& x) const {
    Variable s = matmul(w_q(x), transpose(w_k(x), 1, 2));
    return scaled ? s / std::sqrt(static_cast<double>(w_q.in_features)) : s;
  }
  /// (B, T) ids -> (B, T, d) token plus position embeddings.
  Variable embed(const Tensor& ids) const { return tok(ids) + pos(arange(ids.size(1))); }
  /// (B, T) ids -> (B, T, classes) logits.
  Variable forward(const Tensor& ids) const {
    Variable x = embed(ids);
    return readout(matmul(softmax(scores(x), -1), w_v(x)));
  }
  std::string type_name() const override { return "Head"; }
};

// n sequences and their targets, one per position, flattened: (n, T) ids, (n * T) classes.
std::pair<Tensor, Tensor> batch(const Config& c, Task t, Generator& g, int64_t n) {
  Tensor ids = randint(0, vocab(t), {n, c.seq_len}, g);
  Tensor answer =
      t == Task::FirstToken ? ids.narrow(1, 0, 1) : sum(eq(ids, zeros({1}, DType::Int64)).to(DType::Int64), {1}, true);
  return {ids, answer.expand({n, c.seq_len}).contiguous().reshape({-1})};
}

// The head's softmax rows on 256 probe sequences: spread of the scores, mean largest weight, and
// the share of rows whose Jacobian norm is below kFrozen.
struct RowStats {
  double score_std = 0, max_weight = 0, frozen = 0;
};

RowStats row_stats(const Head& m, const Config& c, Task t) {
  NoGradGuard no_grad;
  Generator probe(c.seed + 7);
  const Tensor s = m.scores(m.embed(batch(c, t, probe, 256).first)).data().to(DType::Float64);
  const Tensor p = softmax(s, -1);
  const Tensor j = softmax_jacobian_norm(p.reshape({-1, c.seq_len}));
  return {std::sqrt(mean(s * s).item() - std::pow(mean(s).item(), 2)), mean(std::get<0>(max(p, -1))).item(),
          mean(lt(j, full({1}, kFrozen, DType::Float64)).to(DType::Float64)).item()};
}

struct TrainResult {
  Task task;
  bool scaled;
  std::vector<double> loss, grad_wq;  // per step: the loss and ||dL/dW_Q||
  RowStats start, end;                // the softmax rows before and after training
  double accuracy = 0;                // on 1024 fresh sequences
  double qk_norm_ratio = 0;           // ||W_Q|| ||W_K|| at the end over the same at the start
  double form_norm_ratio = 0;         // ||W_Q^T W_K|| at the end over the same at the start
};

// ||W_Q|| ||W_K|| (Frobenius): the size of the scores' bilinear form, up to its direction.
double qk_norm(const Head& m) {
  NoGradGuard no_grad;
  const Tensor q = m.w_q.weight.data().to(DType::Float64), k = m.w_k.weight.data().to(DType::Float64);
  return std::sqrt(sum(q * q).item() * sum(k * k).item());
}

// ||W_Q^T W_K|| (Frobenius; nn::Linear stores W as (out, in), so scores = x W_Q^T W_K x^T): the
// size of the bilinear form itself, which ||W_Q|| ||W_K|| only bounds from above.
double form_norm(const Head& m) {
  NoGradGuard no_grad;
  const Tensor q = m.w_q.weight.data().to(DType::Float64), k = m.w_k.weight.data().to(DType::Float64);
  const Tensor f = matmul(q.transpose(0, 1), k);
  return std::sqrt(sum(f * f).item());
}

TrainResult train(const Config& c, Task t, bool scaled) {
  Generator g(c.seed);  // the same initial weights for both runs of a task
  Head m(c, t, g);
  m.scaled = scaled;
  TrainResult r{t, scaled, {}, {}, row_stats(m, c, t), {}, 0, 0};
  const double qk_start = qk_norm(m), form_start = form_norm(m);
  Generator data(c.seed + 1);  // the same batches for both runs of a task
  std::unique_ptr<optim::Optimizer> opt;
  if (c.sgd)
    opt = std::make_unique<optim::SGD>(m.parameters(), optim::SGDOptions{.lr = c.lr});
  else
    opt = std::make_unique<optim::Adam>(m.parameters(), optim::AdamOptions{.lr = c.lr});
  viz::ProgressBar bar(c.steps, fmt::format("{:<22}{:<9}", task_name(t), scaled ? "scaled" : "unscaled"));
  for (int step = 1; step <= c.steps; ++step) {
    auto [ids, targets] = batch(c, t, data, c.batch);
    Variable loss = cross_entropy(reshape(m(ids), {-1, classes(c, t)}), targets);
    opt->zero_grad();
    loss.backward();
    r.grad_wq.push_back(std::sqrt(sum(m.w_q.weight.grad() * m.w_q.weight.grad()).item()));
    opt->step();
    r.loss.push_back(loss.item());
    bar.update(step, loss.item(), -1, c.batch * c.seq_len);
  }
  bar.finish();
  r.end = row_stats(m, c, t);
  r.qk_norm_ratio = qk_norm(m) / qk_start;
  r.form_norm_ratio = form_norm(m) / form_start;
  NoGradGuard no_grad;
  Generator test(c.seed + 1000);
  auto [ids, targets] = batch(c, t, test, 1024);
  r.accuracy = mean(eq(argmax(m(ids).data(), -1).reshape({-1}), targets).to(DType::Float32)).item();
  return r;
}

// A run "learned" its task when its held-out accuracy reaches this.
constexpr double kLearned = 0.8;

// What part 2 shows about one task, from its two runs: which of them learned it (kLearned), and
// is the gradient reaching W_Q smaller without the scale?
std::string task_conclusion(const TrainResult& scaled, const TrainResult& unscaled) {
  std::string s = fmt::format("{}: ", task_name(scaled.task));
  // A run whose loss is no longer finite diverged: its other numbers mean nothing.
  auto diverged = [](const TrainResult& r) {
    const auto bad = std::find_if(r.loss.begin(), r.loss.end(), [](double x) { return !std::isfinite(x); });
    return bad == r.loss.end() ? 0 : static_cast<int>(bad - r.loss.begin()) + 1;
  };
  const int d_s = diverged(scaled), d_u = diverged(unscaled);
  if (d_s > 0 || d_u > 0) {
    if (d_s > 0) s += fmt::format("the scaled run diverged (its loss is not finite from step {}); ", d_s);
    if (d_u > 0) s += fmt::format("the unscaled run diverged (its loss is not finite from step {}); ", d_u);
    return s + "try a smaller --lr.\n";
  }
  const double g_s = window_mean(scaled.grad_wq, 1, 50), g_u = window_mean(unscaled.grad_wq, 1, 50);
  const bool s_ok = scaled.accuracy >= kLearned, u_ok = unscaled.accuracy >= kLearned;
  // Why a run that did not learn did not: its rows saturated (a large share passing almost no
  // gradient at the end), or not (then it is not the softmax that stopped it).
  auto why = [](const TrainResult& r) {
    return r.end.frozen >= 0.2 ? fmt::format(
                                     "its softmax rows still put {:.2f} on one key at the end, {:.0f}% of them "
                                     "passing almost no gradient",
                                     r.end.max_weight, 100 * r.end.frozen)
                               : fmt::format(
                                     "yet its rows are not saturated at the end: they put {:.2f} on their "
                                     "largest key, {:.0f}% of them passing almost no gradient",
                                     r.end.max_weight, 100 * r.end.frozen);
  };
  if (s_ok && u_ok)
    s += fmt::format("learned with and without the scale ({:.1f}% and {:.1f}%)", 100 * scaled.accuracy,
                     100 * unscaled.accuracy);
  else if (s_ok)
    s += fmt::format("learned with the scale ({:.1f}%), not without it ({:.1f}%; {})", 100 * scaled.accuracy,
                     100 * unscaled.accuracy, why(unscaled));
  else if (u_ok)
    s += fmt::format("learned without the scale ({:.1f}%), not with it ({:.1f}%; {})", 100 * unscaled.accuracy,
                     100 * scaled.accuracy, why(scaled));
  else
    s += fmt::format("learned neither with the scale ({:.1f}%) nor without it ({:.1f}%) in {} steps",
                     100 * scaled.accuracy, 100 * unscaled.accuracy, scaled.loss.size());
  s += fmt::format("; the gradient reaching W_Q over steps 1-50 is {} without the scale ({:.2e} against {:.2e}).\n",
                   g_u < g_s ? "smaller" : "larger", g_u, g_s);
  return s;
}

}  // namespace why_sqrt_dk
