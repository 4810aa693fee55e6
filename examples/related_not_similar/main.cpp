// related_not_similar: "Attention finds related tokens, not similar ones. Why two matrices?"
//
// A score is q . k = (x_i W_Q)(x_j W_K)^T = x_i M x_j^T with M = W_Q W_K^T (row vectors, as in
// docs/05). Nothing makes M symmetric: token a can score token b high while b scores a low. If
// W_Q = W_K = W, M = W W^T is symmetric, and more: with u = x W, a score is u_i . u_j, and by
// Cauchy-Schwarz u_i . u_j <= |u_i| |u_j|. A token can then prefer another token over itself only
// if that token's u is longer; around a cycle a -> b -> c -> ... -> a every token would need a
// longer u than the one before it, which is impossible. One shared matrix can express
// "similar to me"; it cannot express "the token I predict".
//
// The task makes that concrete. Tokens 0..V-1 each have a successor, s(x) = x + 1 mod V (one
// cycle through every token). A sequence holds pairs x, s(x) in shuffled order, and every token
// whose successor is in the sequence must put its attention on it. The attention row itself is
// trained (cross-entropy against the successor's position), with separate W_Q and W_K or with one
// matrix for both, from the same start on the same batches; the example prints how often each
// finds the successor, how asymmetric its learned M is, and how often a token's best key is itself.
#include <algorithm>
#include <cmath>

#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace related {
using namespace mg;

struct Config {
  int64_t vocab = 16;  // tokens 0..15, successor x + 1 mod 16
  int64_t pairs = 4;   // each sequence: 4 tokens and their 4 successors, shuffled (8 tokens)
  int64_t dim = 16;    // embedding width = d_k
  int64_t batch = 64;
  int steps = 1000;
  double lr = 1e-2;
  uint64_t seed = 0;
  std::string out = "runs/related_not_similar";
};

int64_t successor(int64_t x, int64_t vocab) { return (x + 1) % vocab; }

// Embeddings, then scores q k^T / sqrt(d) with q = x W_Q^T and k = x W_K^T (nn::Linear stores
// W^T); tied: k uses w_q too, so the scores are symmetric.
struct Scorer : nn::Callable<Scorer> {
  nn::Embedding tok;
  nn::Linear w_q, w_k;
  bool tied = false;
  Scorer(const Config& c, bool tie, Generator& g)
      : tok(c.vocab, c.dim, {}, g),
        w_q(c.dim, c.dim, {.bias = false}, g),
        w_k(c.dim, c.dim, {.bias = false}, g),
        tied(tie) {
    register_module("tok", tok), register_module("w_q", w_q);
    if (!tied) register_module("w_k", w_k);  // tied: w_k is unused and not a parameter
  }
  /// (B, T) ids -> (B, T, T) scores.
  Variable forward(const Tensor& ids) const {
    Variable x = tok(ids);
    Variable q = w_q(x), k = tied ? w_q(x) : w_k(x);
    return matmul(q, transpose(k, 1, 2)) / std::sqrt(static_cast<double>(w_q.in_features));
  }
  /// The token-token form M = E W_Q^T W_K E^T / sqrt(d) (vocab, vocab): the score of query token
  /// a on key token b, whatever their positions.
  Tensor form() const {
    NoGradGuard no_grad;
    const Tensor E = tok.weight.data(), Wq = w_q.weight.data(), Wk = tied ? Wq : w_k.weight.data();
    return matmul(matmul(E, Wq.transpose(0, 1)), matmul(E, Wk.transpose(0, 1)).transpose(0, 1)) *
           (1 / std::sqrt(static_cast<double>(w_q.in_features)));
  }
  std::string type_name() const override { return "Scorer"; }
};

// A batch: n sequences of 2 * pairs tokens, `pairs` distinct tokens whose successors are not
// among them, with their successors, shuffled. targets (n, T): the position of the token's
// successor, or -1 when its successor is not in the sequence (no loss there).
std::pair<Tensor, Tensor> make_batch(const Config& c, Generator& g, int64_t n) {
  const int64_t T = 2 * c.pairs;
  Tensor ids = zeros({n, T}, DType::Int64), targets = full({n, T}, -1.0, DType::Int64);
  int64_t* id = ids.data<int64_t>();
  int64_t* tg = targets.data<int64_t>();
  auto draw = [&](int64_t k) { return static_cast<int64_t>(g.next_u64() % static_cast<uint64_t>(k)); };
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> tokens;  // x and s(x) for `pairs` x, all 2 * pairs tokens distinct
    while (static_cast<int64_t>(tokens.size()) < T) {
      const int64_t x = draw(c.vocab), sx = successor(x, c.vocab);
      if (std::find(tokens.begin(), tokens.end(), x) == tokens.end() &&
          std::find(tokens.begin(), tokens.end(), sx) == tokens.end())
        tokens.push_back(x), tokens.push_back(sx);
    }
    for (int64_t j = T - 1; j > 0; --j) std::swap(tokens[j], tokens[draw(j + 1)]);  // Fisher-Yates
    for (int64_t t = 0; t < T; ++t) {
      id[i * T + t] = tokens[t];
      for (int64_t u = 0; u < T; ++u)
        if (tokens[u] == successor(tokens[t], c.vocab)) tg[i * T + t] = u;
    }
  }
  return {ids, targets};
}

// Cross-entropy of each attention row (the scores as logits over the T keys) against its
// successor's position; rows without one (target -1) are ignored.
Variable loss_of(const Scorer& m, const Tensor& ids, const Tensor& targets) {
  const int64_t T = ids.size(1);
  return cross_entropy(reshape(m(ids), {-1, T}), targets.reshape({-1}), {.ignore_index = -1});
}

struct RunResult {
  bool tied;
  std::vector<double> loss;
  double accuracy = 0;        // rows whose largest weight is on the successor (fresh sequences)
  double on_self = 0;         // rows whose largest weight is on the token itself
  double asymmetry = 0;       // ||M - M^T|| / ||M|| of the learned form
  double self_best = 0;       // share of tokens a whose highest M[a, b] over all b is b = a
  double successor_best = 0;  // ... is b = s(a)
  Tensor form;
};

RunResult train(const Config& c, bool tied) {
  Generator g(c.seed);  // the same embeddings and W_Q for both
  Scorer m(c, tied, g);
  RunResult r{tied, {}, 0, 0, 0, 0, 0, Tensor()};
  Generator data(c.seed + 1);  // the same batches for both
  optim::Adam opt(m.parameters(), {.lr = c.lr});
  viz::ProgressBar bar(c.steps, tied ? "W_Q = W_K  " : "W_Q, W_K   ");
  for (int step = 1; step <= c.steps; ++step) {
    auto [ids, targets] = make_batch(c, data, c.batch);
    Variable loss = loss_of(m, ids, targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
    r.loss.push_back(loss.item());
    bar.update(step, loss.item(), -1, c.batch * 2 * c.pairs);
  }
  bar.finish();
  NoGradGuard no_grad;
  Generator test(c.seed + 1000);
  auto [ids, targets] = make_batch(c, test, 1024);
  const Tensor best = argmax(m(ids).data(), -1).reshape({-1}), t = targets.reshape({-1});
  const int64_t T = ids.size(1);
  int64_t rows = 0, hit = 0, self = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.data<int64_t>()[i] < 0) continue;
    ++rows;
    hit += best.data<int64_t>()[i] == t.data<int64_t>()[i];
    self += best.data<int64_t>()[i] == i % T;
  }
  r.accuracy = static_cast<double>(hit) / static_cast<double>(rows);
  r.on_self = static_cast<double>(self) / static_cast<double>(rows);
  r.form = m.form().to(DType::Float64).contiguous();
  const Tensor diff = r.form - r.form.transpose(0, 1);
  r.asymmetry = std::sqrt(sum(diff * diff).item() / sum(r.form * r.form).item());
  const Tensor row_best = argmax(r.form, 1);
  for (int64_t a = 0; a < c.vocab; ++a) {
    r.self_best += row_best.data<int64_t>()[a] == a;
    r.successor_best += row_best.data<int64_t>()[a] == successor(a, c.vocab);
  }
  r.self_best /= static_cast<double>(c.vocab), r.successor_best /= static_cast<double>(c.vocab);
  return r;
}

}  // namespace related

#ifndef MG_EXAMPLE_NO_MAIN
int main(int argc, char** argv) {
  using namespace related;
  Config c;
  CLI::App app{"related_not_similar: separate W_Q and W_K let a token attend to the token it predicts"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--steps", c.steps, "Adam steps per model")->check(CLI::Range(1, 10000000));
  CLI11_PARSE(app, argc, argv);

  viz::Report rep(
      c.out, "related_not_similar: why W_Q and W_K are two matrices",
      "Each token must attend to its successor (x + 1 mod 16): separate W_Q, W_K against one shared matrix.");
  const RunResult sep = train(c, false), tie = train(c, true);
  std::string t = fmt::format(
      "Every token attends to its successor x + 1 mod {} ({} pairs per sequence, shuffled; {} Adam steps, the same "
      "start and batches)\n{:<12} {:>10} {:>14} {:>12} {:>18} {:>18}\n",
      c.vocab, c.pairs, c.steps, "", "accuracy", "top key: self", "asymmetry", "M[a,.] best: self", "best: successor");
  for (const RunResult* r : {&sep, &tie})
    t +=
        fmt::format("{:<12} {:>9.1f}% {:>13.1f}% {:>12.3f} {:>17.1f}% {:>17.1f}%\n", r->tied ? "W_Q = W_K" : "W_Q, W_K",
                    100 * r->accuracy, 100 * r->on_self, r->asymmetry, 100 * r->self_best, 100 * r->successor_best);
  t +=
      "(accuracy: rows whose largest weight is on the successor, 1024 fresh sequences; asymmetry: ||M - M^T|| / ||M||\n"
      " of the learned token form M = E W_Q^T W_K E^T / sqrt(d); the last two: over the 16 tokens, which key token\n"
      " M ranks first)\n";
  t += fmt::format(
      "Separate matrices: the successor is found in {:.1f}% of rows and M is {} (asymmetry {:.2f}).\n"
      "One shared matrix: M is symmetric (asymmetry {:.1e}) and a token's best key is itself for {:.0f}% of tokens; "
      "the successor is found in {:.1f}% of rows{}.\n",
      100 * sep.accuracy, sep.asymmetry > 0.5 ? "far from symmetric" : "close to symmetric", sep.asymmetry,
      tie.asymmetry, 100 * tie.self_best, 100 * tie.accuracy,
      tie.on_self > 0.5 ? fmt::format(", and {:.1f}% of rows look at themselves", 100 * tie.on_self) : "");
  fmt::print("\n{}", t);
  rep.add_note(t, true);
  std::vector<std::string> labels;
  for (int64_t i = 0; i < c.vocab; ++i) labels.push_back(std::to_string(i));
  const double range = std::max(max(abs(sep.form)).item(), max(abs(tie.form)).item());
  for (const RunResult* r : {&sep, &tie})
    rep.add_svg(r->tied ? "form_tied.svg" : "form_separate.svg",
                viz::heatmap_svg(r->form, {.title = r->tied ? "W_Q = W_K: M = E W W^T E^T / sqrt(d)"
                                                            : "W_Q, W_K: M = E W_Q^T W_K E^T / sqrt(d)",
                                           .row_labels = labels,
                                           .col_labels = labels,
                                           .row_title = "query token",
                                           .col_title = "key token",
                                           .diverging = true,
                                           .vmin = -range,
                                           .vmax = range,
                                           .annotate = 0,
                                           .cell = 22}),
                r->tied ? "One shared matrix: the form is symmetric and its diagonal (the token itself) is its largest "
                          "entry in most rows."
                        : "Separate matrices: the form's largest entry in each row sits just right of the diagonal, "
                          "on the successor. Both maps share one colour scale.");
  rep.add_svg("loss.svg",
              viz::line_chart_svg(
                  {viz::Series::over_steps("W_Q, W_K", sep.loss), viz::Series::over_steps("W_Q = W_K", tie.loss)},
                  {.title = "Attend to the successor: training loss",
                   .x_label = "step",
                   .y_label = "cross-entropy",
                   .log_y = true}),
              "The same start and batches; only the tying differs.");
  fmt::print("\npictures: {}\n", rep.write_index());
  return 0;
}
#endif
