// why_sqrt_dk: "Why divide the scores by sqrt(d_k)?"
//
// A score is q . k = sum_i q_i k_i over d_k features. If the features of q and k are independent
// with mean 0 and variance 1, each product q_i k_i has mean 0 and variance 1, and the variances of
// the d_k independent terms add: Var(q . k) = d_k. The spread of the scores grows like sqrt(d_k),
// and softmax of widely spread scores is nearly one-hot: its largest weight goes to 1 and its
// Jacobian, diag(p) - p p^T, goes to 0 in more and more rows. Dividing by sqrt(d_k) brings the
// variance back to 1 at every width.
//
// Part 1 measures those things (the spread of q . k, the largest softmax weight, the norm of the
// softmax Jacobian and the share of rows where it is nearly 0) on random unit-variance q and k for
// d_k = 2 ... 1024, with and without the scale. Part 2 trains one attention head at d_k = 64 on two
// tasks, each twice from the same weights on the same batches, with and without the scale: naming
// the first token (a sharp look-up) and counting the 0s (attention spread over every position).
// What the scale changes is printed from the measurements, not assumed.
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

int main(int argc, char** argv) {
  using namespace why_sqrt_dk;
  Config c;
  CLI::App app{"why_sqrt_dk: why attention divides its scores by sqrt(d_k)"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--steps", c.steps, "training steps per run (part 2)");
  app.add_option("--dk", c.dk, "head width in part 2")->check(CLI::Range(1, 4096));
  app.add_option("--lr", c.lr, "learning rate (part 2)");
  app.add_flag("--sgd", c.sgd, "plain SGD instead of Adam in part 2");
  CLI11_PARSE(app, argc, argv);
  // SGD's step is the gradient times the rate, Adam's about the rate itself: SGD needs its own
  // defaults (a larger rate, more steps; at 0.05 and above this task is unstable under SGD).
  if (c.sgd && app.count("--lr") == 0) c.lr = 0.03;
  if (c.sgd && app.count("--steps") == 0) c.steps = 3000;
  if (c.steps < 50) {
    fmt::print(stderr, "--steps must be at least 50 (the tables average steps 1-50 and the last 50)\n");
    return 2;
  }

  viz::Report rep(c.out, "why_sqrt_dk: why attention divides its scores by sqrt(d_k)",
                  "The spread of q.k grows like sqrt(d_k); what that does to softmax, and to training.");
  const std::vector<WidthRow> rows = sweep_widths(c);
  std::string t1 = fmt::format(
      "Part 1: random q, k with unit-variance features, {} keys per query, {} queries per width\n"
      "{:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
      c.keys, c.queries, "d_k", "std q.k", "scaled", "max w", "scaled", "|J|", "scaled", "frozen", "scaled");
  for (const WidthRow& r : rows)
    t1 += fmt::format("{:>6} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.4f} {:>10.4f} {:>9.1f}% {:>9.1f}%\n", r.dk,
                      r.unscaled.score_std, r.scaled.score_std, r.unscaled.max_weight, r.scaled.max_weight,
                      r.unscaled.jacobian_norm, r.scaled.jacobian_norm, 100 * r.unscaled.frozen, 100 * r.scaled.frozen);
  t1 += fmt::format(
      "(max w: mean largest softmax weight; |J|: mean norm of the softmax Jacobian; frozen: rows with "
      "|J| < {})\n",
      kFrozen);
  fmt::print("{}", t1);
  rep.add_note(t1, true);
  std::vector<double> dks, sq, std_u, std_s, max_u, max_s, j_u, j_s;
  for (const WidthRow& r : rows) {
    dks.push_back(static_cast<double>(r.dk)), sq.push_back(std::sqrt(static_cast<double>(r.dk)));
    std_u.push_back(r.unscaled.score_std), std_s.push_back(r.scaled.score_std);
    max_u.push_back(r.unscaled.max_weight), max_s.push_back(r.scaled.max_weight);
    j_u.push_back(r.unscaled.jacobian_norm), j_s.push_back(r.scaled.jacobian_norm);
  }
  rep.add_svg("score_std.svg",
              viz::line_chart_svg({{"q.k", dks, std_u}, {"q.k / sqrt(d_k)", dks, std_s}, {"sqrt(d_k)", dks, sq, true}},
                                  {.title = "Spread of the scores",
                                   .x_label = "d_k",
                                   .y_label = "standard deviation",
                                   .log_y = true,
                                   .log_x = true}),
              "The standard deviation of q.k follows sqrt(d_k) (dashed); divided by sqrt(d_k) it stays at 1.");
  rep.add_svg("max_weight.svg",
              viz::line_chart_svg({{"q.k", dks, max_u}, {"q.k / sqrt(d_k)", dks, max_s}},
                                  {.title = fmt::format("Largest softmax weight over {} keys", c.keys),
                                   .x_label = "d_k",
                                   .y_label = "mean largest weight",
                                   .log_x = true}),
              "Without the scale the softmax approaches one-hot as d_k grows; with it, it does not depend on d_k.");
  rep.add_svg(
      "jacobian.svg",
      viz::line_chart_svg({{"q.k", dks, j_u}, {"q.k / sqrt(d_k)", dks, j_s}}, {.title = "Norm of the softmax Jacobian",
                                                                               .x_label = "d_k",
                                                                               .y_label = "mean ||diag(p) - p p^T||",
                                                                               .log_x = true}),
      "How much a change of the scores moves the weights: it falls with d_k without the scale.");

  std::vector<TrainResult> runs;
  for (Task t : {Task::FirstToken, Task::CountZeros})
    for (bool scaled : {true, false}) runs.push_back(train(c, t, scaled));
  std::string t2 = fmt::format(
      "Part 2: one head at d_k = {}, {} steps of {} (learning rate {}), each task twice from the same weights on the "
      "same batches\n"
      "{:<22} {:<9} {:>9} {:>8} {:>8} {:>12} {:>10} {:>8} {:>9}\n",
      c.dk, c.steps, c.sgd ? "SGD" : "Adam", c.lr, "task", "scale", "score std", "max w", "frozen", "|dW_Q| 1-50",
      "last loss", "max w", "accuracy");
  for (const TrainResult& r : runs)
    t2 += fmt::format("{:<22} {:<9} {:>9.2f} {:>8.3f} {:>7.1f}% {:>12.2e} {:>10.4f} {:>8.3f} {:>8.1f}%\n",
                      task_name(r.task), r.scaled ? "yes" : "no", r.start.score_std, r.start.max_weight,
                      100 * r.start.frozen, window_mean(r.grad_wq, 1, 50),
                      window_mean(r.loss, r.loss.size() - 49, r.loss.size()), r.end.max_weight, 100 * r.accuracy);
  t2 += "(score std, max w, frozen: at the start; last loss: mean of the last 50 steps; then max w at the end)\n";
  t2 += fmt::format(
      "||W_Q|| ||W_K|| at the end over the start: first token {:.2f} scaled, {:.2f} unscaled; count the 0s {:.2f} "
      "scaled, {:.2f} unscaled (undoing the missing scale takes 1/sqrt(d_k) = {:.3f})\n",
      runs[0].qk_norm_ratio, runs[1].qk_norm_ratio, runs[2].qk_norm_ratio, runs[3].qk_norm_ratio,
      1 / std::sqrt(static_cast<double>(c.dk)));
  t2 += fmt::format(
      "||W_Q^T W_K||, the form itself, at the end over the start: first token {:.2f} scaled, {:.2f} unscaled; count "
      "the 0s {:.2f} scaled, {:.2f} unscaled\n",
      runs[0].form_norm_ratio, runs[1].form_norm_ratio, runs[2].form_norm_ratio, runs[3].form_norm_ratio);
  t2 += task_conclusion(runs[0], runs[1]) + task_conclusion(runs[2], runs[3]);
  fmt::print("\n{}", t2);
  rep.add_note(t2, true);
  std::vector<viz::Series> curves;
  for (const TrainResult& r : runs)
    curves.push_back(
        viz::Series::over_steps(fmt::format("{}, {}", task_name(r.task), r.scaled ? "scaled" : "unscaled"), r.loss));
  rep.add_svg("loss.svg",
              viz::line_chart_svg(curves, {.title = fmt::format("One head at d_k = {}: training loss", c.dk),
                                           .x_label = "step",
                                           .y_label = "cross-entropy",
                                           .log_y = true}),
              "The same head, the same weights and batches for each task, with and without the scale.");
  fmt::print("\npictures: {}\n", rep.write_index());
  return 0;
}
