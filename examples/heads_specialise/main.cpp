// heads_specialise: "Why several heads? Do they learn different things?"
//
// At position t the model must output the pair (x_{t-1}, x_0) -- the previous token and the
// first token -- as one class out of vocab^2. Four runs of the same model and data:
//   1. two heads: after training we *measure* where each head looks (its mean attention on
//      position t-1 and on position 0) and remove each head in turn (head_mask) to see which
//      half of the answer breaks. Each head does one look-up.
//   2. one head (the control): it solves the task too, by splitting its attention between t-1 and
//      position 0 (a softmax can put weight on two places). Two heads do not make the task
//      possible; they divide cleanly what one head does by splitting.
//   3. two heads started identical (head 1's rows of W_Q, W_K, W_V and its columns of W_O copied
//      from head 0): they receive identical gradients, stay identical and split the same way.
//      Heads differ because random initialisation breaks the symmetry between them.
//   4. the identical start with one number of head 1's W_Q moved by 1e-6: is the symmetric state
//      stable? (The gap is never pulled back to 0.) Runs 1 and 4 repeat at the next seeds
//      (--seeds): the seed table of which head takes which job, and whether they split at all.
// Every run records its heads while it trains (inspect::Telemetry); the two-head run's recording
// becomes runs/heads_specialise/explorer.html, where a slider moves over the training steps.
#include <tuple>

#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

int main(int argc, char** argv) {
  using namespace heads_specialise;
  Config c;
  CLI::App app{"heads_specialise: why several heads, and why they differ"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--steps", c.steps, "training steps");
  app.add_option("--lr", c.lr, "AdamW learning rate");
  app.add_option("--every", c.every, "telemetry every this many steps");
  int seeds = 10;
  app.add_option("--seeds", seeds, "seeds of the two-head run in the seed table, from --seed")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  if (c.steps < 20) {
    fmt::print(stderr, "--steps must be at least 20 (the seed table reads where the heads look at step 20)\n");
    return 2;
  }

  fmt::print("task: at position t, output (x_{{t-1}}, x_0) as one of {} classes\n", c.vocab * c.vocab);
  std::vector<RunResult> runs;
  for (Variant v : {Variant::TwoHeads, Variant::OneHead, Variant::IdenticalStart, Variant::NudgedStart}) {
    fmt::print("\n-- {} --\n", variant_name(v));
    runs.push_back(run(c, v));
  }
  const RunResult &two = runs[0], &one = runs[1], &same = runs[2], &nudged = runs[3];

  viz::Report rep(
      c.out, "heads_specialise: why several heads, and why they differ",
      "At position t the model must output the previous token and the first token. The same model is trained "
      "on the same data with two heads, with one head, with two heads that start identical, and with that start "
      "nudged; then the two-head run at more seeds.");
  std::string t1 = fmt::format("{:<28} {:>6} {:>10} {:>18} {:>24}\n", "run", "head", "accuracy", "attention on t-1",
                               "attention on position 0");
  for (size_t k = 0; k < 3; ++k)
    for (size_t h = 0; h < runs[k].roles.on_prev.size(); ++h)
      t1 += fmt::format("{:<28} {:>6} {:>9.1f}% {:>18.3f} {:>24.3f}\n",
                        h == 0 ? variant_name(static_cast<Variant>(k)) : "", h, 100 * runs[k].full.both,
                        runs[k].roles.on_prev[h], runs[k].roles.on_first[h]);
  std::string t2 = fmt::format("{:<18} {:>16} {:>16} {:>12}\n", "heads used", "x_{t-1} correct", "x_0 correct", "both");
  auto row = [](const std::string& name, const HalfAccuracy& a) {
    return fmt::format("{:<18} {:>15.1f}% {:>15.1f}% {:>11.1f}%\n", name, 100 * a.prev, 100 * a.first, 100 * a.both);
  };
  t2 += row("both", two.full);
  for (int h = 0; h < 2; ++h) t2 += row(fmt::format("head {} removed", h), two.ablated[h]);
  const std::string t3 = fmt::format(
      "identical start: max |W_Q head 0 - head 1| = {:.1e} before training, {:.1e} after {} steps\n"
      "nudged by 1e-6:  max |W_Q head 0 - head 1| = {:.1e} before training, {:.1e} after {} steps\n"
      "random start:    max |W_Q head 0 - head 1| = {:.2f} before training, {:.2f} after {} steps\n",
      same.head_diff_start, same.head_diff_end, c.steps, nudged.head_diff_start, nudged.head_diff_end, c.steps,
      two.head_diff_start, two.head_diff_end, c.steps);
  fmt::print("\nWhere each head looks (mean over positions t >= 2 of 512 test sequences):\n{}", t1);
  fmt::print(
      "\nHead ablation in the two-head run (chance for one half is {:.1f}%; at t = 1 the previous token *is*\n"
      "the first token, so a model that keeps only the x_0 head still gets 1 of the 7 positions right):\n{}",
      100.0 / c.vocab, t2);
  // The two-head run again at the next seeds: which head takes which job, and whether they split.
  std::vector<SeedRow> rows{seed_row(c.seed, two, nudged)};
  for (int k = 1; k < seeds; ++k) {
    Config ck = c;
    ck.seed = c.seed + static_cast<uint64_t>(k);
    fmt::print("-- two heads, and identical start nudged, seed {} --\n", ck.seed);
    rows.push_back(seed_row(ck.seed, run(ck, Variant::TwoHeads), run(ck, Variant::NudgedStart, 16)));
  }
  std::string t4 =
      fmt::format("{:>6} {:>9} {:>19} {:>19}   {:<20} {:>17} {:>14}\n", "seed", "accuracy", "head 0: t-1 / x_0",
                  "head 1: t-1 / x_0", "roles (head 0, 1)", "on t-1 at step 20", "nudged: diff");
  for (const SeedRow& r : rows)
    t4 += fmt::format("{:>6} {:>8.1f}% {:>11.3f} / {:.3f} {:>11.3f} / {:.3f}   {:<20} {:>10.2f} / {:.2f} {:>14.1e}\n",
                      r.seed, 100 * r.accuracy, r.roles.on_prev[0], r.roles.on_first[0], r.roles.on_prev[1],
                      r.roles.on_first[1],
                      fmt::format("{}, {}{}", role_name(role_of(r.roles, 0)), role_name(role_of(r.roles, 1)),
                                  r.swapped() ? " (swapped)" : ""),
                      r.early_prev.at(0), r.early_prev.at(1), r.nudged_diff);
  const SeedSummary sum = summarise(rows);
  t4 += fmt::format(
      "In {} of {} seeds the two heads divide the work, one look-up each: {} with head 0 on t-1, {} with the roles "
      "swapped.\nIn {} of {}, one head does one look-up and the other mixes both places, as the single head does. "
      "The lowest accuracy of the {} seeds is {:.1f}%.\n",
      sum.clean, sum.n, sum.clean - sum.swapped, sum.swapped, sum.mixed, sum.n, sum.n, 100 * sum.min_accuracy);
  if (sum.clean > 0)
    t4 += fmt::format(
        "In {} of the {} clean splits, the head that put more weight on t-1 at step 20 is the one that ends on t-1.\n",
        sum.early_predicts, sum.clean);
  t4 += fmt::format(
      "Identical start nudged by 1e-6 (one entry of head 1's W_Q): after {} steps the heads differ by {:.1e} to "
      "{:.1e} over the {} seeds, {} than the nudge{}.\n",
      c.steps, sum.nudged_lo, sum.nudged_hi, sum.n, sum.nudged_lo > 1e-6 ? "every one more" : "not every one more",
      sum.nudged_hi < 0.01 * two.head_diff_end
          ? fmt::format(", and each under a hundredth of the random start's {:.2f}", two.head_diff_end)
          : "");
  fmt::print(
      "\nThe two-head run at {} seeds from {} (a head is \"t-1\" or \"x_0\" when it puts at least 0.8 of its weight "
      "there, else \"mixed\"):\n{}",
      sum.n, c.seed, t4);
  fmt::print("\nWhy do the heads differ?\n{}", t3);
  rep.add_note(
      "Where each head looks, measured. One head already solves the task by splitting its attention between "
      "t-1 and position 0; two heads divide that work cleanly, one look-up each. Two heads that start identical "
      "stay identical and split the same way as the single head.",
      false);
  rep.add_note(t1, true);
  rep.add_note(
      "Remove one head of the two-head run (its output multiplied by 0 before W_O) and see which half of the "
      "answer breaks:",
      false);
  rep.add_note(t2, true);
  rep.add_note(fmt::format("The two-head run at {} seeds: which head takes which job depends on the random start, and "
                           "not every seed splits cleanly.",
                           sum.n),
               false);
  rep.add_note(t4, true);
  rep.add_note(
      "Why do heads differ? Identical heads receive identical gradients, so nothing can ever pull them apart: "
      "the random initialisation is what breaks the symmetry.",
      false);
  rep.add_note(t3, true);
  std::vector<std::string> pos;
  for (int64_t i = 0; i < c.seq_len; ++i) pos.push_back(std::to_string(i));
  // Weights on one shared scale, [0, 1]; scores (before softmax) in diverging colours, the masked
  // future hatched grey, both heads on one scale. The one sequence is labelled with its tokens.
  const std::vector<std::string>& toks = two.roles.tokens;
  auto weights_map = [&](const std::string& file, const Tensor& w, const std::string& title,
                         const std::vector<std::string>& labels, const std::string& caption) {
    rep.add_svg(file,
                viz::heatmap_svg(w, {.title = title,
                                     .row_labels = labels,
                                     .col_labels = labels,
                                     .row_title = "query",
                                     .col_title = "key",
                                     .vmin = 0,
                                     .vmax = 1}),
                caption);
  };
  double score_range = 0;  // one colour scale for both heads' scores
  for (int h = 0; h < 2; ++h) score_range = std::max(score_range, example::finite_abs_max(two.roles.example_scores[h]));
  for (int h = 0; h < 2; ++h) {
    fmt::print("\ntwo heads, head {} on one test sequence: scores before softmax (masked: the future)\n{}", h,
               viz::terminal_heatmap(two.roles.example_scores[h], toks, toks));
    fmt::print("two heads, head {} on the same sequence: weights after softmax\n{}", h,
               viz::terminal_heatmap(two.roles.example[h], toks, toks));
    rep.add_svg(fmt::format("head{}_scores.svg", h),
                viz::heatmap_svg(two.roles.example_scores[h], {.title = fmt::format("Head {}: scores, one sequence", h),
                                                               .row_labels = toks,
                                                               .col_labels = toks,
                                                               .row_title = "query",
                                                               .col_title = "key",
                                                               .diverging = true,
                                                               .vmin = -score_range,
                                                               .vmax = score_range}),
                fmt::format("Two-head run, head {}, one test sequence (its tokens on both axes): the scores "
                            "q.k / sqrt(d_k) before softmax; hatched grey: the future, masked. Both heads on one "
                            "colour scale.",
                            h));
    weights_map(fmt::format("head{}.svg", h), two.roles.example[h], fmt::format("Head {}: weights, one sequence", h),
                toks,
                fmt::format("The same sequence after softmax: head {} puts {:.2f} of its weight on the previous token "
                            "and {:.2f} on the first, on average over the test set.",
                            h, two.roles.on_prev[h], two.roles.on_first[h]));
    weights_map(fmt::format("head{}_mean.svg", h), two.roles.mean[h], fmt::format("Head {}: weights, mean of 512", h),
                pos,
                fmt::format("Head {}'s weights averaged over the 512 test sequences (positions on the axes, since "
                            "the tokens differ): the pattern does not depend on which tokens are there.",
                            h));
  }
  // The row-shift picture: head 1's scores with -3, 0 or +3 added to each row, and the weights.
  const RowShift rs = shift_rows(two.roles.example_scores[1]);
  fmt::print(
      "\nhead 1's scores with -3, 0 or +3 added to each row (rows 0, 1, 2, 3, ...: -3, 0, +3, -3, ...): the weights "
      "change by at most {:.1e}\n{}",
      rs.max_diff, viz::terminal_heatmap(rs.shifted, toks, toks));
  const double shift_range = std::max(score_range, example::finite_abs_max(rs.shifted));
  for (const auto& [file, map, title] :
       {std::tuple{"head1_scores_same_scale.svg", two.roles.example_scores[1], "Head 1: scores"},
        std::tuple{"head1_scores_shifted.svg", rs.shifted, "Head 1: scores, rows shifted"}})
    rep.add_svg(file,
                viz::heatmap_svg(map, {.title = title,
                                       .row_labels = toks,
                                       .col_labels = toks,
                                       .row_title = "query",
                                       .col_title = "key",
                                       .diverging = true,
                                       .vmin = -shift_range,
                                       .vmax = shift_range}),
                fmt::format("{}: the colours of a row change, the differences within it do not, and softmax reads only "
                            "those: both give head 1's weights (largest difference {:.1e}).",
                            title, rs.max_diff));
  // The same two heads as graphs: tokens as nodes, each weight an edge from the key to its query.
  for (int h = 0; h < 2; ++h)
    rep.add_svg(fmt::format("head{}_graph.svg", h),
                viz::attention_graph_svg(two.roles.example[h],
                                         {.title = fmt::format("Head {} as a graph, one sequence", h), .labels = toks}),
                fmt::format("Head {}'s weights on the same sequence as a graph: an edge from each key to the query "
                            "that reads it, as wide as its weight (weights under 0.05 left out).",
                            h));
  fmt::print("\none head, on the same test sequence\n{}", viz::terminal_heatmap(one.roles.example[0], pos, pos));
  weights_map("one_head.svg", one.roles.example[0], "One head: weights, one sequence", toks,
              fmt::format("The one-head control on the same sequence: it splits its attention, {:.2f} on the previous "
                          "token and {:.2f} on the first (means over the test set).",
                          one.roles.on_prev[0], one.roles.on_first[0]));
  for (int h = 0; h < 2; ++h)
    weights_map(fmt::format("identical_head{}.svg", h), same.roles.example[h],
                fmt::format("Identical start: head {}, one sequence", h), toks,
                fmt::format("Two heads that started identical, head {}, on the same sequence: {:.2f} on the previous "
                            "token, {:.2f} on the first, like the single head.",
                            h, same.roles.on_prev[h], same.roles.on_first[h]));
  std::vector<viz::Series> curves;
  for (size_t k = 0; k < 3; ++k)
    curves.push_back(viz::Series::over_steps(variant_name(static_cast<Variant>(k)), runs[k].losses));
  rep.add_svg("loss.svg",
              viz::line_chart_svg(
                  curves, {.title = "Training loss", .x_label = "step", .y_label = "cross-entropy", .log_y = true}),
              "Loss of the three runs: all three solve the task.");
  fmt::print("\npictures: {}\n", rep.write_index());
  fmt::print("explorer: {}\n", save_explorer(c, two, "heads_specialise: two heads"));
  // What the explorer's slider shows over the first steps, as numbers: each head's mean weight on
  // t - 1 and on position 0 in the recorded probe.
  fmt::print("the explorer's records (two heads; head: on t-1 / on position 0):\n");
  for (const inspect::TelemetryRecord& rec : two.records)
    if (rec.step == 1 || rec.step == 20 || rec.step == 40 || rec.step == 50) {
      fmt::print("  step {:>3}:", rec.step);
      for (const inspect::HeadScore& h : rec.heads)
        fmt::print("  head {} {:.2f} / {:.2f}", h.head, h.previous_token, h.first_token);
      fmt::print("\n");
    }
  return two.full.both >= 0.95 && one.full.both >= 0.95 ? 0 : 1;
}
