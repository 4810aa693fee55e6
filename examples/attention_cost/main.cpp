// attention_cost: "What does attention cost as the sequence grows, and what does it buy?"
//
// Part 1, the cost. For T tokens of width d, the four projections (W_Q, W_K, W_V, W_O) are
// 4 products of (T, d) by (d, d): 8 T d^2 multiply-adds... counted as FLOPs, 2 per multiply-add:
//   projections  8 T d^2   (forward)       attention  4 T^2 d   (Q K^T and weights V, forward)
// The projections grow like T, attention like T^2: attention costs as much as the projections at
// T = 2d, and as much as the projections and a 4d-wide MLP (16 T d^2 more) at T = 6d. The example
// times them, forward and backward, for T = 64 ... 4096 at d = 128, attention both fused
// (scaled_dot_product_attention, which never stores the (T, T) weights) and composed (matmul,
// softmax, matmul, which keeps them for the backward), and measures the memory each needs.
//
// Part 2, what it buys. Copy the token k positions back: one attention layer reaches position
// t - k in one step, whatever k, through a score that depends on the two positions; a recurrent
// network (an LSTM, as in char_lstm) must carry the token through k steps of its state. Both are
// trained on the same batches for each k, and their accuracy is printed against k.
//
// Part 3, the other half of the trade (sequential.h): the LSTM's T steps run one after another,
// attention's T^2 work as a few large products; and generating one token at a time, a key/value
// cache makes the next token O(T) instead of O(T^2). Then the online softmax, which would let a
// fused kernel tile the keys as well as the queries.
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "sequential.h"     // part 3, and experiment.h

int main(int argc, char** argv) {
  using namespace attention_cost;
  Config c;
  CLI::App app{"attention_cost: attention's cost against sequence length, and what its direct path buys"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--dim", c.dim, "model width d in part 1 (a multiple of 4)")->check(CLI::Range(4, 8192));
  app.add_option("--max-len", c.max_len, "longest T in part 1 (from 64, doubling; at least 512)")
      ->check(CLI::Range(512, 65536));
  app.add_option("--reps", c.reps, "timed runs per measurement")->check(CLI::Range(1, 100));
  app.add_option("--steps", c.steps, "training steps per model in part 2");
  app.add_option("--window", c.window, "part 2's local attention: the keys before each query it sees")
      ->check(CLI::Range(1, 1024));
  app.add_option("--part", c.part,
                 "1: only the cost against T; 2: only the copying task; 3: only the sequential steps and the KV "
                 "cache; 0: all three")
      ->check(CLI::Range(0, 3));
  CLI11_PARSE(app, argc, argv);
  if (c.dim % c.heads != 0) {
    fmt::print(stderr, "--dim must be a multiple of {}\n", c.heads);
    return 2;
  }

  viz::Report rep(c.out, "attention_cost: what attention costs against T, and what it buys",
                  "Time and memory of attention against the projections; copying from k positions back.");
  if (c.part == 0 || c.part == 1) report_costs(c, rep);
  if (c.part == 0 || c.part == 2) report_copying(c, rep);
  if (c.part == 0 || c.part == 3) report_sequential(c, rep);
  fmt::print("\npictures: {}\n", rep.write_index());
  return 0;
}
