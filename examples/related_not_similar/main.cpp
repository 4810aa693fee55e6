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
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

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
      "start and batches)\n{:<22} {:>10} {:>14} {:>12} {:>18} {:>18}\n",
      c.vocab, c.pairs, c.steps, "", "accuracy", "top key: self", "asymmetry", "M[a,.] best: self", "best: successor");
  for (const RunResult* r : {&sep, &tie})
    for (const Measures* m : {&r->init, &r->trained})
      t += fmt::format("{:<22} {:>9.1f}% {:>13.1f}% {:>12.3f} {:>17.1f}% {:>17.1f}%\n",
                       fmt::format("{} {}", r->tied ? "W_Q = W_K" : "W_Q, W_K", m == &r->init ? "at init" : "trained"),
                       100 * m->accuracy, 100 * m->on_self, m->asymmetry, 100 * m->self_best, 100 * m->successor_best);
  t += fmt::format(
      "(accuracy: rows whose largest weight is on the successor, 1024 fresh sequences, chance 1 in {}; asymmetry:\n"
      " ||M - M^T|| / ||M|| of the token form M = E W_Q^T W_K E^T / sqrt(d); the last two: over the {} tokens, which\n"
      " key token M ranks first, chance 1 in {})\n",
      2 * c.pairs, c.vocab, c.vocab);
  const Measures &s0 = sep.init, &s1 = sep.trained;
  t += fmt::format(
      "Separate matrices: the successor is M's first choice for {:.1f}% of tokens ({:.1f}% at init) and is found in "
      "{:.1f}% of rows ({:.1f}% at init).\nTheir form's asymmetry is {:.2f}, against {:.2f} at init: {}.\n"
      "One shared matrix: M is symmetric (asymmetry {:.1e}) and a token's best key is itself for {:.0f}% of tokens; "
      "the successor is found in {:.1f}% of rows{}.\n",
      100 * s1.successor_best, 100 * s0.successor_best, 100 * s1.accuracy, 100 * s0.accuracy, s1.asymmetry,
      s0.asymmetry,
      std::abs(s1.asymmetry - s0.asymmetry) < 0.25 * s0.asymmetry
          ? "two unrelated random matrices are already that far from symmetric, so the asymmetry is the room the "
            "form has, and the successor's rank is what was learned"
          : "training changed how far from symmetric the form is",
      tie.trained.asymmetry, 100 * tie.trained.self_best, 100 * tie.trained.accuracy,
      tie.trained.on_self > 0.5 ? fmt::format(", and {:.1f}% of rows look at themselves", 100 * tie.trained.on_self)
                                : "");
  fmt::print("\n{}", t);
  rep.add_note(t, true);

  // The same task with narrower queries and keys: W_Q, W_K of shape (d_k, d), so the QK circuit
  // W_Q^T W_K, a d x d matrix, has rank at most d_k. Is a product with a small inner size redundant?
  const std::vector<WidthRow> widths = width_table(c, {1, 2, 4, c.dim});
  std::string t3 = fmt::format(
      "\nSeparate W_Q, W_K of width d_k (shape d_k x {}): M = E W_Q^T W_K E^T / sqrt(d_k) has rank at most d_k\n"
      "{:>5} {:>22} {:>11} {:>10} {:>17}\n",
      c.dim, "d_k", "W_Q + W_K parameters", "rank of M", "accuracy", "best: successor");
  for (const WidthRow& w : widths)
    t3 += fmt::format("{:>5} {:>22} {:>11} {:>9.1f}% {:>16.1f}%\n", w.dk, w.parameters, w.rank,
                      100 * w.trained.accuracy, 100 * w.trained.successor_best);
  const auto enough =
      std::find_if(widths.begin(), widths.end(), [](const WidthRow& w) { return w.trained.accuracy >= 0.99; });
  if (enough == widths.end())
    t3 += "No width found the successor in 99% of rows.\n";
  else
    t3 += fmt::format(
        "The narrowest width that finds the successor in at least 99% of rows is d_k = {} ({} parameters against {} at "
        "d_k = {}); d_k = 1 finds it in {:.1f}% of rows.\n",
        enough->dk, enough->parameters, widths.back().parameters, widths.back().dk,
        100 * widths.front().trained.accuracy);
  fmt::print("{}", t3);
  rep.add_note("A head of width d_k: its QK circuit has rank at most d_k. The successor relation needs rank 2, not 1.",
               false);
  rep.add_note(t3, true);
  std::vector<std::string> labels;
  for (int64_t i = 0; i < c.vocab; ++i) labels.push_back(std::to_string(i));
  const double range = std::max(max(abs(sep.trained.form)).item(), max(abs(tie.trained.form)).item());
  for (const RunResult* r : {&sep, &tie})
    rep.add_svg(r->tied ? "form_tied.svg" : "form_separate.svg",
                viz::heatmap_svg(r->trained.form, {.title = r->tied ? "W_Q = W_K: M = E W W^T E^T / sqrt(d)"
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
