// seq2seq_cross_attention: "How does cross-attention mix the encoder and the decoder?"
//
// An encoder-decoder Transformer learns to reverse digit strings and then say it is done:
// 3 1 4 1 5 9 -> 9 5 1 4 1 3 </s>. The encoder reads the source (L tokens); the decoder writes the
// answer one token at a time (L + 1 tokens, so the two lengths differ). In the decoder's
// cross-attention the queries come from the decoder (what am I writing now?) and the keys and
// values from the encoder's output (which source digit holds it?): Q has the decoder's length,
// K and V the encoder's, and the map is (L + 1) x L, not square. For reversal the answer is
// "output t reads source L-1-t", so the map becomes the anti-diagonal. Greedy decoding is scored
// on strings that never appear in training (those whose digit sum is a multiple of 7).
// Two interventions show the decoder really reads the memory: decode with another string's
// encoder output and the answer follows that string; swap one memory position and exactly the
// mirrored output digit changes.
// Training records every head of the three attention layers (inspect::Telemetry): the encoder's
// self-attention, the decoder's self-attention and the cross-attention, whose (L + 1) x L map
// runs/seq2seq_cross_attention/explorer.html shows turning into the anti-diagonal step by step.
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

int main(int argc, char** argv) {
  using namespace seq2seq;
  Config c;
  CLI::App app{"seq2seq_cross_attention: an encoder-decoder Transformer learns to reverse digit strings"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--steps", c.steps, "training steps");
  app.add_option("--length", c.length, "digits per string")->check(CLI::Range(2, 16));
  app.add_option("--lr", c.lr, "peak AdamW learning rate");
  app.add_option("--every", c.every, "telemetry every this many steps");
  CLI11_PARSE(app, argc, argv);

  Generator g(c.seed);
  Model m(c, g);
  fmt::print("{} parameters; training on strings whose digit sum is not a multiple of 7\n", m.num_parameters());
  const TrainResult tr = train(m, c, g);
  const Evaluation e = evaluate(m, c, g);
  const Intervention iv = intervene(m, c, g);
  const std::vector<std::string> src = digits(e.example_src), out = digits(e.example_out);
  std::string shown;
  for (auto& s : src) shown += s + " ";
  shown += "-> ";
  for (auto& s : out) shown += s + " ";
  const std::string summary = fmt::format(
      "held-out exact match (greedy decoding, 500 strings never seen in training): {:.1f}%\n"
      "mean cross-attention weight on the mirrored source position: {:.3f}\nexample: {}\n",
      100 * e.exact_match, e.anti_diagonal, shown);
  const std::string interventions = fmt::format(
      "Interventions on the memory (pairs of held-out strings a, b):\n"
      "  decoder input from a, encoder output of b: {:.1f}% of predicted digits are b's reversal, {:.1f}% a's\n"
      "  a's encoder output with position {} taken from b: {:.1f}% of greedy answers are a's reversal with\n"
      "  b's digit at output step {} and nothing else changed\n",
      100 * iv.swapped_follows_memory, 100 * iv.swapped_follows_input, iv.slot, 100 * iv.slot_exact,
      c.length - 1 - iv.slot);
  fmt::print("\n{}\n{}\n{}\ncross-attention, heads averaged (rows: output step, cols: source digit)\n{}", summary,
             e.shapes, interventions, viz::terminal_heatmap(e.example_map, out, src));

  viz::Report rep(
      c.out, "seq2seq_cross_attention: reversing digit strings",
      "Queries from the decoder, keys and values from the encoder: the cross-attention map shows which source "
      "digit each output step reads.");
  rep.add_note(summary, true);
  rep.add_note(e.shapes, true);
  rep.add_svg(
      "cross_attention.svg",
      viz::heatmap_svg(e.example_map, {.title = "Decoder cross-attention (heads averaged)",
                                       .row_labels = out,
                                       .col_labels = src,
                                       .row_title = "output step",
                                       .col_title = "source digit"}),
      fmt::format(
          "{} output steps (rows, the decoder's queries) against {} source digits (columns, the encoder's keys): "
          "each digit attends to the mirrored source position, the anti-diagonal of reversal. The </s> row has "
          "no digit to read.",
          c.length + 1, c.length));
  rep.add_note(interventions, true);
  rep.add_svg(
      "loss.svg",
      viz::line_chart_svg({viz::Series::over_steps("train loss", tr.losses)},
                          {.title = "Training loss", .x_label = "step", .y_label = "cross-entropy", .log_y = true}),
      "Teacher-forced training loss.");
  fmt::print("\npictures: {}\n", rep.write_index());
  std::string line = "explorer: cross-attention on the probe string, weight on the mirrored digit by step:";
  for (size_t k = 0; k < tr.records.size(); ++k) {
    if (k > 0 && tr.records[k].step > 100 && k + 1 < tr.records.size()) continue;  // the forming, and the end
    line += fmt::format(" {} {:.2f}", tr.records[k].step, tr.mirrored[k]);
  }
  fmt::print("{}\nexplorer: {}\n", line, save_explorer(c, tr));
  return e.exact_match >= 0.99 ? 0 : 1;
}
