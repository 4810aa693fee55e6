// hand_attention: "Where do W_Q and W_K come from?"
//
// Part 1 sets them by hand, the lecture construction: one-hot embeddings over {A, B}, the sequence
// A A B A, W_K = 10 I and W_Q = [[0, 1], [0, 1]], so every query, whatever its token, looks for
// the B. It prints Q, K, the scores, the attention (with and without the 1/sqrt(d) scaling) and
// the output, attention times V.
// Part 2 starts W_Q and W_K from random numbers and traces one backward pass by hand on A A B A:
// dL/dW_Q from the chain rule written out, from autograd, and from finite differences. Then it
// trains them on a task whose solution is "find the B": every position must say where the B is.
// Backpropagation finds weights that do the same job as the hand-set ones -- different numbers,
// same bilinear form W_Q W_K^T up to what softmax ignores -- and the B - A gap of that form keeps
// growing as long as training runs.
//
// Row-vector convention, as on the blackboard: Q = X W_Q, K = X W_K, scores = Q K^T / sqrt(d).
// (nn::Linear computes x W^T, so the Linear weight holds W_Q^T.)
#include <array>
#include <cmath>

#include <CLI/CLI.hpp>

#include "../common/gemm.h"  // add_gemm_option: --gemm portable|blas
#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace hand_attention {
using namespace mg;

constexpr int64_t kDim = 2;  // one-hot embeddings over {A, B}
const std::vector<std::string> kTokens = {"A", "B"};

struct Config {
  int64_t seq_len = 8;  // training sequences: seq_len tokens, exactly one of them B
  int64_t batch = 64;   // sequences per step
  int steps = 1000;     // Adam steps
  double lr = 0.02;     // Adam learning rate
  uint64_t seed = 0;    // same seed, same run
  std::string out = "runs/hand_attention";
};

// ---- part 1: the hand-set head ------------------------------------------------------------
struct HandResult {
  Tensor x, w_q, w_k, q, k, scores, attn, scores_scaled, attn_scaled;
  Tensor out;  // attention V with V = X (W_V = I): each row a mix of the tokens' one-hot vectors
};

HandResult hand_set() {
  HandResult r;
  r.x = tensor({1, 0, 1, 0, 0, 1, 1, 0}, {4, kDim});  // A A B A as rows of E
  r.w_q = tensor({0, 1, 0, 1}, {2, 2});
  r.w_k = tensor({10, 0, 0, 10}, {2, 2});
  r.q = matmul(r.x, r.w_q);                     // every row (0, 1): "looking for B"
  r.k = matmul(r.x, r.w_k);                     // A -> (10, 0), B -> (0, 10)
  r.scores = matmul(r.q, r.k.transpose(0, 1));  // 10 where the key is B, else 0
  r.attn = softmax(r.scores, 1);
  r.scores_scaled = r.scores / std::sqrt(static_cast<double>(kDim));
  r.attn_scaled = softmax(r.scores_scaled, 1);
  r.out = matmul(r.attn_scaled, r.x);  // every row ~ (0.003, 0.997): "B"
  return r;
}

// ---- part 2: the same head, learned ---------------------------------------------------------
// A single attention head: only W_Q and W_K are parameters. The values are the positions
// (one-hot), so row t of the attention *is* position t's answer to "where is the B?".
struct Head : nn::Callable<Head> {
  nn::Linear w_q, w_k;  // (2, 2) each, no bias: weight = W^T in the row-vector convention
  explicit Head(Generator& g) : w_q(kDim, kDim, {.bias = false}, g), w_k(kDim, kDim, {.bias = false}, g) {
    register_module("w_q", w_q);
    register_module("w_k", w_k);
  }
  // x: (B, T, 2) one-hot -> scores (B, T, T) = Q K^T / sqrt(2)
  Variable scores(const Variable& x) const {
    return matmul(w_q(x), transpose(w_k(x), 1, 2)) / std::sqrt(static_cast<double>(kDim));
  }
  // W_Q and W_K in the row-vector convention, and their bilinear form W_Q W_K^T.
  Tensor W_Q() const { return w_q.weight.data().transpose(0, 1).contiguous(); }
  Tensor W_K() const { return w_k.weight.data().transpose(0, 1).contiguous(); }
  std::string type_name() const override { return "Head"; }
};

struct Batch {
  Tensor x;      // (B, T, 2) one-hot tokens
  Tensor where;  // (B,) position of the B
};

Batch make_batch(Generator& g, int64_t batch, int64_t T) {
  Tensor where = randint(0, T, {batch}, g);
  Tensor ids = zeros({batch, T}, DType::Int64);
  for (int64_t b = 0; b < batch; ++b) ids.data<int64_t>()[b * T + where.data<int64_t>()[b]] = 1;
  return {one_hot(ids, kDim), where};
}

// Cross-entropy of each attention row against the B's position: minimising it pushes every
// row's attention onto the B.
Variable loss_of(const Head& head, const Batch& b, int64_t T) {
  Variable s = head.scores(Variable(b.x));
  Tensor targets = b.where.reshape({-1, 1}).expand({b.where.size(0), T}).contiguous().reshape({-1});
  return cross_entropy(reshape(s, {-1, T}), targets);
}

// ---- one backward pass, by hand ------------------------------------------------------------
// On A A B A with the random W_Q, W_K training starts from, and the training loss (every row's
// attention should be on the B, position 2):
//   S = Q K^T / sqrt(d),  P = softmax(S),  L = -(1/T) sum_t log P[t, 2]
// backward, one line per forward line, last first:
//   dP = -(1/T) onehot(2) / P                      (derivative of -log)
//   dS = P * (dP - rowsum(dP * P))                 (softmax: the Jacobian diag(p) - p p^T per row)
//   dQ = dS K / sqrt(d),  dK = dS^T Q / sqrt(d)    (S is a product of Q and K^T)
//   dW_Q = X^T dQ,  dW_K = X^T dK                  (Q = X W_Q, K = X W_K)
// (with values, Y = P V, there would also be dP = dY V^T and dV = P^T dY).
struct BackwardTrace {
  Tensor by_hand, autograd, numeric;  // dL/dW_Q (2, 2), row-vector convention, float64
  double gradcheck_error;             // gradcheck's worst |analytic - numeric| over W_Q and W_K
  bool gradcheck_ok;
};

BackwardTrace trace_backward(const Config& c) {
  Generator g(c.seed);  // the same initial W_Q, W_K as train()
  Head head(g);
  head.to(DType::Float64);
  const int64_t T = 4;
  const Tensor X = tensor({1, 0, 1, 0, 0, 1, 1, 0}, {T, kDim}).to(DType::Float64);  // A A B A
  const Batch b{X.reshape({1, T, kDim}), from_vector<int64_t>({2}, {1})};
  const double sd = std::sqrt(static_cast<double>(kDim));
  BackwardTrace r;
  {  // by hand, each line the derivative of one forward line
    const Tensor WQ = head.W_Q(), WK = head.W_K();
    const Tensor Q = matmul(X, WQ), K = matmul(X, WK);
    const Tensor P = softmax(matmul(Q, K.transpose(0, 1)) / sd, 1);
    const Tensor onehot_b = one_hot(full({T}, 2, DType::Int64), T).to(DType::Float64);
    const Tensor dP = -onehot_b / (P * static_cast<double>(T));
    const Tensor dS = P * (dP - sum(dP * P, {1}, true));
    const Tensor dQ = matmul(dS, K) / sd;
    r.by_hand = matmul(X.transpose(0, 1), dQ);
  }
  {  // autograd: the Linear's weight holds W_Q^T, so its gradient is dW_Q^T
    Variable loss = loss_of(head, b, T);
    loss.backward();
    r.autograd = head.w_q.weight.grad().transpose(0, 1).contiguous();
  }
  {  // central differences on each entry of W_Q
    NoGradGuard no_grad;
    const double eps = 1e-6;
    r.numeric = zeros({kDim, kDim}, DType::Float64);
    Tensor w = head.w_q.weight.data();  // w[j][i] = W_Q[i][j]
    for (int64_t i = 0; i < kDim; ++i)
      for (int64_t j = 0; j < kDim; ++j) {
        const double keep = w.at({j, i});
        w.narrow(0, j, 1).narrow(1, i, 1).fill_(keep + eps);
        const double up = loss_of(head, b, T).item();
        w.narrow(0, j, 1).narrow(1, i, 1).fill_(keep - eps);
        const double down = loss_of(head, b, T).item();
        w.narrow(0, j, 1).narrow(1, i, 1).fill_(keep);
        r.numeric.narrow(0, i, 1).narrow(1, j, 1).fill_((up - down) / (2 * eps));
      }
  }
  const GradcheckResult gc = gradcheck([&] { return loss_of(head, b, T); }, head.parameters());
  r.gradcheck_ok = gc.ok, r.gradcheck_error = gc.error;
  return r;
}

struct Evaluation {
  double accuracy;  // rows whose largest weight is on the B
  double min_mass;  // the smallest attention weight on the B over all rows
  double mean_mass;
  Tensor example_attn;  // (T, T) for the first test sequence
  Tensor example_ids;   // (T,)
};

Evaluation evaluate(const Head& head, int64_t T, Generator& g) {
  NoGradGuard no_grad;
  Batch b = make_batch(g, 512, T);
  Tensor w = softmax(head.scores(Variable(b.x)).data(), -1);  // (N, T, T)
  Tensor target = b.where.reshape({-1, 1, 1}).expand({b.where.size(0), T, 1}).contiguous();
  Tensor mass = gather(w, 2, target);  // (N, T, 1): weight on the B
  Tensor hit = eq(argmax(w, 2, true), target).to(DType::Float32);
  return {mean(hit).item(), -max(-mass).item(), mean(mass).item(), w.narrow(0, 0, 1).reshape({T, T}),
          argmax(b.x.narrow(0, 0, 1), 2).reshape({T})};
}

// Column B minus column A of W_Q W_K^T, for query token A and query token B: softmax ignores a
// constant added to a row, so this difference is all the attention depends on.
std::array<double, 2> form_gap(const Tensor& W_Q, const Tensor& W_K) {
  const Tensor M = matmul(W_Q, W_K.transpose(0, 1));
  return {M.at({0, 1}) - M.at({0, 0}), M.at({1, 1}) - M.at({1, 0})};
}

struct TrainResult {
  Evaluation eval;
  Tensor W_Q0, W_K0, W_Q, W_K;  // initial and learned
  std::vector<double> losses;
  std::vector<std::array<double, 2>> gaps;  // form_gap after every step
};

TrainResult train(const Config& c) {
  Generator g(c.seed);
  Head head(g);
  TrainResult r;
  r.W_Q0 = head.W_Q(), r.W_K0 = head.W_K();
  optim::Adam opt(head.parameters(), {.lr = c.lr});
  viz::ProgressBar bar(c.steps, "train");
  for (int step = 1; step <= c.steps; ++step) {
    Batch b = make_batch(g, c.batch, c.seq_len);
    Variable loss = loss_of(head, b, c.seq_len);
    opt.zero_grad();
    loss.backward();
    opt.step();
    r.losses.push_back(loss.item());
    r.gaps.push_back(form_gap(head.W_Q(), head.W_K()));
    bar.update(step, loss.item(), -1, c.batch * c.seq_len);
  }
  bar.finish();
  r.eval = evaluate(head, c.seq_len, g);
  r.W_Q = head.W_Q(), r.W_K = head.W_K();
  return r;
}

std::vector<std::string> labels(const Tensor& ids) {
  std::vector<std::string> out;
  for (int64_t i : ids.to_vector<int64_t>()) out.push_back(kTokens[i]);
  return out;
}

void report_hand(const HandResult& h, viz::Report& rep) {
  const std::vector<std::string> seq = {"A", "A", "B", "A"}, ab = {"A", "B"};
  auto show = [&](const char* what, const Tensor& t, const std::vector<std::string>& rows,
                  const std::vector<std::string>& cols) {
    std::printf("%s\n%s\n", what, viz::terminal_heatmap(t, rows, cols).c_str());
  };
  show("Q = X W_Q   (every query is (0, 1): looking for B)", h.q, seq, {"d0", "d1"});
  show("K = X W_K   (A -> (10, 0), B -> (0, 10))", h.k, seq, {"d0", "d1"});
  show("scores = Q K^T", h.scores, seq, seq);
  show("attention = softmax(Q K^T), rows sum to 1", h.attn, seq, seq);
  show("attention = softmax(Q K^T / sqrt(2))", h.attn_scaled, seq, seq);
  show("output = attention V, with V = X (W_V = I): every row is ~all B", h.out, seq, {"A", "B"});
  std::printf(
      "The scores are an n x n table: %lld tokens, %lld scores. At 1024 tokens it is about a million per head\n"
      "and layer, which is why attention's cost grows with the square of the context (docs/BENCHMARKS.md,\n"
      "'Context scaling').\n\n",
      static_cast<long long>(h.x.size(0)), static_cast<long long>(h.x.size(0) * h.x.size(0)));
  auto heat = [&](const Tensor& t, const std::string& title, bool diverging = false) {
    return viz::heatmap_svg(t, {.title = title,
                                .row_labels = seq,
                                .col_labels = seq,
                                .row_title = "query",
                                .col_title = "key",
                                .diverging = diverging});
  };
  rep.add_svg("hand_scores.svg", heat(h.scores, "Hand-set scores Q K^T"),
              "Scores: 10 wherever the key is the B, 0 elsewhere.");
  rep.add_svg("hand_attention.svg", heat(h.attn, "Hand-set attention, softmax(Q K^T)"),
              "Without scaling: every query puts 0.9999 of its attention on the B.");
  rep.add_svg(
      "hand_attention_scaled.svg", heat(h.attn_scaled, "Hand-set attention, softmax(Q K^T / sqrt(2))"),
      "With the 1/sqrt(d) scaling the scores shrink by 1.41 and the attention is slightly softer (0.997 on the B).");
  rep.add_svg(
      "hand_output.svg",
      viz::heatmap_svg(h.out, {.title = "Output = attention V (V = X)",
                               .row_labels = seq,
                               .col_labels = {"A", "B"},
                               .row_title = "query",
                               .col_title = "feature"}),
      "The output: each row is the attention-weighted mix of the value rows; with V = X every position now carries "
      "the B's one-hot vector, whatever its own token.");
}

void report_trace(const BackwardTrace& t, viz::Report& rep) {
  std::string s = "dL/dW_Q at initialisation on A A B A (every row's attention should be on the B):\n";
  s += fmt::format("  {:<8} {:>14} {:>14} {:>16}\n", "entry", "by hand", "autograd", "finite diff.");
  for (int64_t i = 0; i < kDim; ++i)
    for (int64_t j = 0; j < kDim; ++j)
      s += fmt::format("  W_Q[{},{}] {:>+14.8f} {:>+14.8f} {:>+16.8f}\n", i, j, t.by_hand.at({i, j}),
                       t.autograd.at({i, j}), t.numeric.at({i, j}));
  s += fmt::format("gradcheck over W_Q and W_K: {} (worst |analytic - numeric| {:.1e})\n",
                   t.gradcheck_ok ? "ok" : "FAILED", t.gradcheck_error);
  s += "No separate network updates W_Q: this gradient, from the chain rule through softmax and two matmuls,\n"
       "is all the optimizer sees.\n";
  std::printf("%s", s.c_str());
  rep.add_note(
      "One backward pass traced by hand (dP = -onehot/(T P), dS = P * (dP - rowsum(dP * P)), "
      "dQ = dS K / sqrt(d), dW_Q = X^T dQ), against autograd and finite differences:",
      false);
  rep.add_note(s, true);
}

// The B - A gap of W_Q W_K^T at a few steps: it keeps growing.
std::string gap_table(const TrainResult& r) {
  std::string s = fmt::format("  {:>6} {:>16} {:>16} {:>10}\n", "step", "query A: B - A", "query B: B - A", "loss");
  for (size_t step : {50, 100, 200, 400, 1000, 2000})
    if (step <= r.gaps.size())
      s += fmt::format("  {:>6} {:>16.2f} {:>16.2f} {:>10.5f}\n", step, r.gaps[step - 1][0], r.gaps[step - 1][1],
                       r.losses[step - 1]);
  return s;
}

void report_learned(const HandResult& h, const TrainResult& r, const Config& c, viz::Report& rep) {
  // W_Q, W_K in the row-vector convention: rows are the input features (one per token, one-hot),
  // columns the query or key features.
  auto mat = [&](const Tensor& t, const std::string& title) {
    return viz::heatmap_svg(t, {.title = title,
                                .row_labels = kTokens,
                                .col_labels = {"d0", "d1"},
                                .row_title = "input (token)",
                                .col_title = "output feature",
                                .diverging = true});
  };
  const Tensor M_hand = matmul(h.w_q, h.w_k.transpose(0, 1)), M = matmul(r.W_Q, r.W_K.transpose(0, 1));
  // The hand-set and learned forms on one colour scale, so that their colours compare: the
  // learned gap (column B - column A) is larger than the hand-set 10.
  const double form_range = std::max(max(abs(M_hand)).item(), max(abs(M)).item());
  auto form = [&](const Tensor& t, const std::string& title) {
    return viz::heatmap_svg(t, {.title = title,
                                .row_labels = kTokens,
                                .col_labels = kTokens,
                                .row_title = "query token",
                                .col_title = "key token",
                                .diverging = true,
                                .vmin = -form_range,
                                .vmax = form_range});
  };
  std::printf("\nW_Q W_K^T, the bilinear form (rows: query token, cols: key token)\n hand-set:\n%s learned:\n%s",
              viz::terminal_heatmap(M_hand, kTokens, kTokens).c_str(),
              viz::terminal_heatmap(M, kTokens, kTokens).c_str());
  std::printf("Softmax ignores a constant added to a row, so what matters is column B minus column A:\n");
  for (int64_t q = 0; q < 2; ++q)
    std::printf("  query %s: hand %+.2f, learned %+.2f\n", kTokens[q].c_str(), M_hand.at({q, 1}) - M_hand.at({q, 0}),
                M.at({q, 1}) - M.at({q, 0}));
  const std::string gaps = gap_table(r);
  std::printf(
      "\nThe learned gap is not a target that training reaches; it keeps growing:\n%s"
      "Cross-entropy is -log(attention on the B), which is above 0 for any finite gap, so every step still\n"
      "pushes the B's score up relative to the A's; the push weakens as the loss shrinks, so the growth slows.\n",
      gaps.c_str());
  rep.add_note(
      "The learned B - A gap keeps growing: cross-entropy -log(attention on the B) is above 0 for any finite gap, so "
      "every step pushes it further (more slowly as the loss shrinks). The hand-set 10 is one point on this road.",
      false);
  rep.add_note(gaps, true);
  std::vector<double> ga, gb;
  for (auto& g2 : r.gaps) ga.push_back(g2[0]), gb.push_back(g2[1]);
  rep.add_svg("gap.svg",
              viz::line_chart_svg({viz::Series::over_steps("query A: column B - column A", ga),
                                   viz::Series::over_steps("query B: column B - column A", gb),
                                   viz::Series::over_steps("hand-set (10)", std::vector<double>(ga.size(), 10.0))},
                                  "B - A gap of the learned W_Q W_K^T", "step", "gap"),
              "The gap over training: it passes the hand-set 10 and goes on growing.");
  rep.add_svg("W_Q_hand.svg", mat(h.w_q, "W_Q, set by hand"), "Hand-set W_Q: both tokens map to the query (0, 1).");
  rep.add_svg("W_K_hand.svg", mat(h.w_k, "W_K, set by hand"), "Hand-set W_K = 10 I.");
  rep.add_svg("W_Q_init.svg", mat(r.W_Q0, "W_Q at initialisation"), "W_Q before training: random numbers.");
  rep.add_svg("W_K_init.svg", mat(r.W_K0, "W_K at initialisation"), "W_K before training: random numbers.");
  rep.add_svg("W_Q_learned.svg", mat(r.W_Q, "W_Q after training"),
              "Learned W_Q: different numbers from the hand-set one...");
  rep.add_svg("W_K_learned.svg", mat(r.W_K, "W_K after training"), "...and a different W_K...");
  rep.add_svg("form_hand.svg", form(M_hand, "W_Q W_K^T, hand-set"),
              fmt::format("The bilinear form of the hand-set head: column B is 10 above column A. It shares its "
                          "colour scale with the learned form beside it (-{0:.1f} to {0:.1f}).",
                          form_range));
  rep.add_svg("form_learned.svg", form(M, "W_Q W_K^T, learned"), [&] {
    const double ga = M.at({0, 1}) - M.at({0, 0}), gb = M.at({1, 1}) - M.at({1, 0});
    const double hand = M_hand.at({0, 1}) - M_hand.at({0, 0});
    const char* vs = ga > hand && gb > hand ? "more than" : ga < hand && gb < hand ? "less than" : "around";
    return fmt::format(
        "...and the learned bilinear form has the same shape: for both query tokens, column B is "
        "above column A, by {:.1f} and {:.1f}, {} the hand-set {:.0f} (the same colour scale). "
        "Many weight settings give the same attention.",
        ga, gb, vs, hand);
  }());
  const std::vector<std::string> seq = labels(r.eval.example_ids);
  rep.add_svg("learned_attention.svg",
              viz::heatmap_svg(r.eval.example_attn, {.title = "Learned attention on a test sequence",
                                                     .row_labels = seq,
                                                     .col_labels = seq,
                                                     .row_title = "query",
                                                     .col_title = "key"}),
              "A held-out sequence: every row puts its attention on the B, like the hand-set head.");
  rep.add_svg("loss.svg",
              viz::line_chart_svg({viz::Series::over_steps("train loss", r.losses)}, "Training loss", "step",
                                  "cross-entropy", true),
              "Loss: -log(attention on the B), averaged over every position.");
  rep.add_note(
      fmt::format("Learned from random weights in {} steps: accuracy {:.2f}%, attention on the B: mean {:.4f}, "
                  "smallest row {:.4f}.",
                  c.steps, 100 * r.eval.accuracy, r.eval.mean_mass, r.eval.min_mass));
}

}  // namespace hand_attention

#ifndef MG_EXAMPLE_NO_MAIN
int main(int argc, char** argv) {
  using namespace hand_attention;
  Config c;
  CLI::App app{"hand_attention: W_Q and W_K set by hand, then learned from random weights"};
  example::add_gemm_option(app);
  app.add_option("--steps", c.steps, "training steps");
  app.add_option("--lr", c.lr, "Adam learning rate");
  app.add_option("--seq-len", c.seq_len, "training sequence length")->check(CLI::Range(2, 64));
  app.add_option("--seed", c.seed, "random seed");
  app.add_option("--out", c.out, "output folder");
  CLI11_PARSE(app, argc, argv);

  mg::viz::Report rep(
      c.out, "hand_attention: W_Q and W_K by hand, and learned",
      "Part 1 sets W_Q and W_K by hand so that every token attends to the B. Part 2 learns them from random "
      "numbers by backpropagation.");
  std::printf("== Part 1: attention set by hand on A A B A ==\n\n");
  const HandResult h = hand_set();
  report_hand(h, rep);
  std::printf("== Part 2: the same head learned from random W_Q, W_K (find the B in %lld tokens) ==\n",
              static_cast<long long>(c.seq_len));
  report_trace(trace_backward(c), rep);
  std::printf("\n");
  const TrainResult r = train(c);
  std::printf("held-out accuracy %.2f%%, attention on the B: mean %.4f, smallest row %.4f\n", 100 * r.eval.accuracy,
              r.eval.mean_mass, r.eval.min_mass);
  report_learned(h, r, c, rep);
  std::printf("\npictures: %s\n", rep.write_index().c_str());
  return r.eval.accuracy >= 0.99 && r.eval.min_mass >= 0.9 ? 0 : 1;
}
#endif
