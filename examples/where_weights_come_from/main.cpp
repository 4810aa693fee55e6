// where_weights_come_from: "Are W_Q, W_K, W_V special? Are they the embedding?"
//
// A tiny model -- token and position embeddings, one self-attention layer, a linear read-out --
// trained end to end on "at every position, name the sequence's first token". It shows:
//   1. W_Q, W_K, W_V before and after training: random matrices that backpropagation shapes;
//   2. one backward pass reaches every parameter: the gradient norms at step 1 of the embedding,
//      W_Q, W_K, W_V and W_O are all non-zero;
//   3. the embedding is a Linear layer applied to one-hot rows (same numbers, exactly);
//   4. an ablation: learned W_Q/W_K/W_V against fixed identity (Q = K = V = X) and against
//      frozen random matrices, and the loss each reaches;
//   5. static vs contextual: a token's embedding row never changes, but its vector after
//      attention depends on the rest of the sequence;
//   6. co-occurrence: do tokens that often appear together get similar embeddings? Only when the
//      objective rewards it. The same data trains two models, one to name the first token and one
//      to predict the next token; the embedding cosine of co-occurring pairs is measured in both.
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "report.h"

int main(int argc, char** argv) {
  using namespace where_weights;
  Config c;
  CLI::App app{"where_weights_come_from: W_Q, W_K, W_V are ordinary parameters trained by backpropagation"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--steps", c.steps, "training steps per model");
  app.add_option("--lr", c.lr, "AdamW learning rate");
  int seeds = 10;
  app.add_option("--seeds", seeds, "seeds of the ablation's seed table, from --seed")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  viz::Report rep(c.out, "where_weights_come_from: W_Q, W_K, W_V are ordinary parameters",
                  "An embedding + one self-attention layer, trained end to end to name each sequence's first token.");
  std::vector<RunResult> results;
  for (Variant v : {Variant::Learned, Variant::Identity, Variant::FrozenRandom}) {
    Generator g(c.seed);  // every variant starts from the same initial weights and sees the same data
    Model m(c, g);
    results.push_back(train(m, c, v, g));
    if (v == Variant::Learned) report_learned(rep, m, results.back(), c, g);
  }
  report_ablation(rep, results, c);
  std::vector<AblationRow> rows{{c.seed, results}};
  for (int k = 1; k < seeds; ++k) rows.push_back(ablation_at(c, c.seed + static_cast<uint64_t>(k)));
  const std::string table = ablation_seed_table(rows);
  fmt::print("\nThe ablation at {} seeds from {}:\n{}", seeds, c.seed, table);
  rep.add_note(fmt::format("The ablation at {} seeds: how often each variant reaches 100% on the test set.", seeds),
               false);
  rep.add_note(table, true);
  report_cooccurrence(rep, c);
  fmt::print("\npictures: {}\n", rep.write_index());
  return 0;
}
