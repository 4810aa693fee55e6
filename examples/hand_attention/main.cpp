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
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "report.h"

int main(int argc, char** argv) {
  using namespace hand_attention;
  Config c;
  CLI::App app{"hand_attention: W_Q and W_K set by hand, then learned from random weights"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--steps", c.steps, "training steps");
  app.add_option("--lr", c.lr, "Adam learning rate");
  app.add_option("--seq-len", c.seq_len, "training sequence length")->check(CLI::Range(2, 64));
  CLI11_PARSE(app, argc, argv);

  mg::viz::Report rep(
      c.out, "hand_attention: W_Q and W_K by hand, and learned",
      "Part 1 sets W_Q and W_K by hand so that every token attends to the B. Part 2 learns them from random "
      "numbers by backpropagation.");
  fmt::print("== Part 1: attention set by hand on A A B A ==\n\n");
  const HandResult h = hand_set();
  report_hand(h, rep);
  fmt::print("== Part 2: the same head learned from random W_Q, W_K (find the B in {} tokens) ==\n", c.seq_len);
  report_trace(trace_backward(c), rep);
  fmt::print("\n");
  const TrainResult r = train(c);
  fmt::print("held-out accuracy {:.2f}%, attention on the B: mean {:.4f}, smallest row {:.4f}\n", 100 * r.eval.accuracy,
             r.eval.mean_mass, r.eval.min_mass);
  report_learned(h, r, c, rep);
  fmt::print("\npictures: {}\n", rep.write_index());
  return r.eval.accuracy >= 0.99 && r.eval.min_mass >= 0.9 ? 0 : 1;
}
