#pragma once
// heads_specialise, the report: the seed table and each head's maps (terminal and pictures), kept
// out of main.cpp so that main() reads as the experiment's steps.
#include <tuple>

#include "experiment.h"

namespace heads_specialise {

// The seed table of the two-head run (one row per seed) and the sentences computed from it; `two`
// is the run at c.seed, whose random start the nudged runs are compared with.
inline std::string seed_table(const Config& c, const std::vector<SeedRow>& rows, const RunResult& two) {
  const SeedSummary sum = summarise(rows);
  std::string t4 =
      fmt::format("{:>6} {:>9} {:>19} {:>19}   {:<20} {:>18} {:>18} {:>14}\n", "seed", "accuracy", "head 0: t-1 / x_0",
                  "head 1: t-1 / x_0", "roles (head 0, 1)", "on t-1 at step 1", "on t-1 at step 20", "nudged: diff");
  for (const SeedRow& r : rows)
    t4 += fmt::format(
        "{:>6} {:>8.1f}% {:>11.3f} / {:.3f} {:>11.3f} / {:.3f}   {:<20} {:>10.3f} / {:.3f} {:>11.2f} / {:.2f} {:>14.1e}\n",
        r.seed, 100 * r.accuracy, r.roles.on_prev[0], r.roles.on_first[0], r.roles.on_prev[1], r.roles.on_first[1],
        fmt::format("{}, {}{}", role_name(role_of(r.roles, 0)), role_name(role_of(r.roles, 1)),
                    r.swapped() ? " (swapped)" : ""),
        r.start_prev.at(0), r.start_prev.at(1), r.early_prev.at(0), r.early_prev.at(1), r.nudged_diff);
  t4 += fmt::format(
      "In {} of {} seeds the two heads divide the work, one look-up each: {} with head 0 on t-1, {} with the roles "
      "swapped.\nIn {} of {}, one head does one look-up and the other mixes both places, as the single head does. "
      "The lowest accuracy of the {} seeds is {:.1f}%.\n",
      sum.clean, sum.n, sum.clean - sum.swapped, sum.swapped, sum.mixed, sum.n, sum.n, 100 * sum.min_accuracy);
  if (sum.clean > 0)
    t4 += fmt::format(
        "In {} of the {} clean splits, the head that put more weight on t-1 at step 20 is the one that ends on t-1; "
        "at step 1, one update from the random start, in {} of {}.\n",
        sum.early_predicts, sum.clean, sum.start_predicts, sum.clean);
  t4 += fmt::format(
      "Identical start nudged by 1e-6 (one entry of head 1's W_Q): after {} steps the heads differ by {:.1e} to "
      "{:.1e} over the {} seeds, {} than the nudge{}.\n",
      c.steps, sum.nudged_lo, sum.nudged_hi, sum.n, sum.nudged_lo > 1e-6 ? "every one more" : "not every one more",
      sum.nudged_hi < 0.01 * two.head_diff_end
          ? fmt::format(", and each under a hundredth of the random start's {:.2f}", two.head_diff_end)
          : "");
  t4 += fmt::format(
      "In {} of the {} seeds the nudged heads end within {:.1e} of each other{}, against {:.2f} for the "
      "random start at seed {}.\n",
      sum.nudged_close, sum.n, SeedSummary::kClose,
      sum.nudged_close > 0 ? fmt::format(" (at most {:.1e})", sum.nudged_close_hi) : "", two.head_diff_end, c.seed);
  return t4;
}

// Prints the heads' maps on one test sequence and adds their pictures to `rep`: the two-head run's
// scores, weights, means and graphs, the row-shift picture, the one-head control and the identical
// start.
inline void show_heads(viz::Report& rep, const Config& c, const RunResult& two, const RunResult& one,
                       const RunResult& same) {
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
}

}  // namespace heads_specialise
