// one_matrix_per_head: "In multi-head notation, is a per-head matrix multiplied onto W_Q?"
//
// The paper writes head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V), with Q = K = V = X in
// self-attention. W_i^Q (d_model x d_k) is not a matrix applied after W_Q: it *is* a block of
// the one W_Q. In minigrad's (and PyTorch's) storage, weight (d_model, d_model) maps x to x W^T,
// and W_i^Q is the transpose of its row block i, rows [i d_k, (i+1) d_k).
//
// Some write head h's query as A_q^h (W_q x): a shared W_Q, then a per-head matrix on top. This
// example builds that over-parameterised attention beside the standard one, folds each product
// A^h W_q[h] into one matrix, and shows the standard module then computes the same outputs. A
// product of two linear maps is one linear map: the extra matrices add parameters, not functions.
//
// They do change training. The experiment is a fair one: for each seed the standard model starts
// from the fold of the product model's initial weights (same embeddings, same read-out), so at
// step 0 the two compute the same function, and both then see the same batches in the same order.
// Whatever separates their loss curves afterwards is the parameterisation alone: gradient
// descent on a product A W moves differently (each factor's gradient is scaled by the other
// factor) from gradient descent on the single matrix it equals. Which curve ends lower is
// measured over several seeds and printed from the numbers, not assumed.
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

int main(int argc, char** argv) {
  using namespace one_matrix;
  Config c;
  CLI::App app{"one_matrix_per_head: a per-head matrix on top of W_Q folds into W_Q"};
  example::add_run_options(app, c.seed, &c.out, {.seed_help = "first random seed"});
  app.add_option("--steps", c.steps, "training steps per model");
  app.add_option("--seeds", c.seeds, "number of seeds to run")->check(CLI::Range(1, 1000));
  app.add_option("--lr", c.lr, "AdamW learning rate");
  app.add_option("--vocab", c.vocab, "number of distinct tokens")->check(CLI::Range(2, 100000));
  CLI11_PARSE(app, argc, argv);
  if (c.steps < 4) {
    fmt::print(stderr, "--steps must be at least 4 (the run is summarised by quarters)\n");
    return 2;
  }

  Generator g(c.seed);
  viz::Report rep(c.out, "one_matrix_per_head: one W_Q covers all heads",
                  "A per-head matrix applied after a shared W_Q folds into a single W_Q.");
  const double diff = fold_difference(c, g);
  OverParamAttention over_counts(c.dim, c.heads, g);
  nn::MultiheadAttention std_counts(c.dim, c.heads, {}, g);
  const std::string counts = fmt::format(
      "parameters, standard MultiheadAttention({0}, {1}):         {2}\n"
      "parameters, with a per-head matrix after W_Q, W_K and W_V: {3}  (+3 x {1} heads x {4}x{4})\n"
      "after folding A^h W[h] into one matrix per projection, max |output difference| = {5:.2e}\n",
      c.dim, c.heads, std_counts.num_parameters(), over_counts.num_parameters(), c.dim / c.heads, diff);
  fmt::print("{}", counts);
  rep.add_note(counts, true);

  std::vector<SeedRun> runs;
  for (int s = 0; s < c.seeds; ++s) runs.push_back(run_seed(c, c.seed + static_cast<uint64_t>(s)));
  const std::vector<Quarter> qs = quarters(runs);
  std::string result = fmt::format(
      "task: name the largest of {} tokens (vocab {}); {} seeds from {}, each pair of models started as the same "
      "function and trained on the same batches\n"
      "loss at step 0, seed {}: standard {:.5f}, per-head A^h {:.5f}\n"
      "ratio of mean training loss, per-head A^h / standard, across seeds:\n  {:<12} {:>8} {:>18} {:>16}\n",
      c.seq_len, c.vocab, c.seeds, c.seed, runs[0].seed, runs[0].start_loss_standard, runs[0].start_loss_product,
      "steps", "median", "range", "standard's loss");
  for (const Quarter& q : qs)
    result += fmt::format("  {:<12} {:>7.2f}x {:>8.2f}x - {:.2f}x {:>16.4f}\n", fmt::format("{}-{}", q.from, q.to),
                          q.median, q.lo, q.hi, q.standard_loss);
  result += conclusion(runs, qs);
  fmt::print("{}", result);
  rep.add_note(
      "The two parameterisations can represent exactly the same functions, and here they start as the same "
      "function. Gradient descent moves a product of two matrices differently from one matrix (each factor's "
      "gradient is scaled by the other), so the curves separate:",
      false);
  rep.add_note(result, true);
  rep.add_svg("loss.svg",
              viz::line_chart_svg({viz::Series::over_steps("standard (one W_Q)", median_smoothed(runs, false)),
                                   viz::Series::over_steps("A^h W_q[h] (per-head extra)", median_smoothed(runs, true))},
                                  {.title = fmt::format("Median over {} seeds of the 20-step mean loss", runs.size()),
                                   .x_label = "step",
                                   .y_label = "cross-entropy",
                                   .log_y = true}),
              fmt::format("Training loss of both parameterisations, each pair started as the same function: the "
                          "median over {} seeds of each step's 20-step running mean. The table gives each quarter's "
                          "range across seeds.",
                          runs.size()));
  fmt::print("\npictures: {}\n", rep.write_index());
  double start = 0;
  for (const SeedRun& r : runs) start = std::max(start, r.start_logit_diff);
  return diff < 1e-4 && start < 1e-4 ? 0 : 1;
}
