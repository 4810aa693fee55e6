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

#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "report.h"

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
  const SeedSummary sum = summarise(rows);
  const std::string t4 = seed_table(c, rows, two);
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
  show_heads(rep, c, two, one, same);
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
