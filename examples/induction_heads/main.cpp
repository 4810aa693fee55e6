// induction_heads: watch a circuit form. "Where do W_Q, W_K, W_V come from, and why do heads differ?"
//
// A 2-layer attention-only transformer (embeddings, two self-attention layers added to the
// residual stream, an unembedding; no MLP, no layer norm) is trained on next-token prediction
// over random tokens that contain a repeated span at a random place and distance:
//
//   r r r ... [a b c d e f ...] r r ... [a b c d e f ...] r r ...
//
// Random tokens cannot be predicted, but inside the second copy each next token can be: find
// where the current token occurred before and copy the token that followed it. That takes two
// heads in two layers (Olsson et al., 2022; Elhage et al., 2021):
//   layer 0: a previous-token head writes "my previous token was x" into each position;
//   layer 1: an induction head's query ("I am x") matches those keys ("my previous token was x")
//            -- K-composition -- and its OV circuit copies the token found there.
// A 1-layer model cannot build it: a key in layer 0 holds only its own token.
//
// The run records telemetry every few steps (inspect::Telemetry): every head's previous-token,
// first-token, induction and copying scores, and the model's in-context-learning score. It shows
// the phase change: the loss sits on a plateau, then drops while the two heads appear and the
// ICL score jumps. Then interventions: removing the previous-token head (head_mask) breaks the
// induction head and the repeated-span accuracy; removing another layer-0 head does not. Last, the
// induction head's QK and OV circuits as pictures, and runs/induction_heads/explorer.html, where
// the learner moves a slider over the training steps.
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "report.h"

int main(int argc, char** argv) {
  using namespace induction_heads;
  Config c;
  CLI::App app{"induction_heads: watch a previous-token head and an induction head form during training"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--steps", c.steps, "training steps");
  app.add_option("--lr", c.lr, "AdamW learning rate");
  app.add_option("--batch", c.batch, "sequences per step");
  app.add_option("--dim", c.dim, "residual stream width");
  app.add_option("--heads", c.heads, "heads per layer");
  app.add_option("--vocab", c.vocab, "random tokens 0..vocab-1");
  app.add_option("--seq-len", c.seq_len, "tokens per sequence");
  app.add_option("--span-min", c.span_min, "shortest repeated span");
  app.add_option("--span-max", c.span_max, "longest repeated span (at most seq-len / 2)");
  app.add_option("--every", c.every, "telemetry every this many steps");
  CLI11_PARSE(app, argc, argv);
  try {
    validate(c);
  } catch (const mg::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }

  viz::Report rep(
      c.out, "induction_heads: a circuit forms during training",
      "A 2-layer attention-only transformer learns to continue repeated spans of random tokens; a 1-layer model is "
      "the control.");
  Generator g(c.seed);
  Model two(c, g);
  fmt::print("{} parameters (2 layers); sequences of {} random tokens over {}, one span of {}-{} repeated\n",
             two.num_parameters(), c.seq_len, c.vocab, c.span_min, c.span_max);
  const RunResult r2 = train(two, c, g);
  Config c1 = c;
  c1.layers = 1;
  Generator g1(c.seed);
  Model one(c1, g1);
  const RunResult r1 = train(one, c1, g1);

  fmt::print("\nTraining, 2 layers (telemetry every {} steps, a selection):\n{}", c.every, progress_table(r2, c));
  fmt::print("phase change: the ICL score has made half of its total move by step {}\n", r2.phase_step);
  fmt::print("\nEvery head at the end (2 layers):\n{}", score_table(r2.records.back()));
  fmt::print("\nrepeated-span next-token accuracy: 2 layers {:.1f}%, 1 layer {:.1f}% (chance {:.1f}%)\n",
             100 * r2.final_span.accuracy, 100 * r1.final_span.accuracy, 100.0 / static_cast<double>(c.vocab));
  fmt::print(
      "ICL score at the end: 2 layers {:.3f}, 1 layer {:.3f} nats; best induction score: 2 layers {:.3f}, 1 layer {:.3f}\n",
      r2.records.back().icl.score, r1.records.back().icl.score, r2.induction_head.induction,
      r1.induction_head.induction);

  const PositionProfile profile = position_profile(two, c);
  const ProfileSplit split = split_profile(profile);
  fmt::print("\nWhere layer 0 looks at t - 1, by query position (512 fresh sequences):\n{}", profile_table(profile, c));
  fmt::print(
      "Where the induction head needs the key in at least 10% of sequences, the best layer-0 head puts {:.2f} on t - 1;\n"
      "where it does not (mostly t >= {}), {:.2f}. The previous-token score averages over every t, so it stays below 1.\n",
      split.where_needed, split.first_unneeded, split.elsewhere);

  const std::vector<Ablation> ab = ablate(two, c, r2);
  fmt::print("\nInterventions (2 layers; the induction head is {} head {}):\n", r2.induction_head.layer,
             r2.induction_head.head);
  fmt::print("{:<40} {:>14} {:>14} {:>20}\n", "removed (head_mask)", "span accuracy", "span loss", "induction score");
  for (const Ablation& a : ab)
    fmt::print("{:<40} {:>13.1f}% {:>14.3f} {:>20.3f}\n", a.removed, 100 * a.span.accuracy, a.span.loss, a.induction);

  const Circuits circ = circuits(two, r2);
  fmt::print(
      "\nCircuits of the induction head: the OV circuit's largest entry is on the diagonal in {:.0f}% of rows (copying;\n"
      "{:.0f}% for the sum over all of {}'s heads); the QK circuit through the previous-token head in {:.0f}%\n"
      "(matching the token before the key).\n",
      100 * circ.ov_diagonal, 100 * circ.ov_layer_diagonal, r2.induction_head.layer, 100 * circ.qk_diagonal);
  report(rep, c, r2, r1, ab, circ, head_maps(two, c, r2.induction_head.layer, r2.induction_head.head));
  fmt::print("\npictures: {}\n", rep.write_index());
  viz::write_file(rep.path("telemetry.json"), r2.telemetry_json);
  fmt::print("explorer: {}\n",
             viz::write_explorer(rep.path("explorer.html"), "induction_heads: 2 layers", r2.telemetry_json));
  return 0;
}
