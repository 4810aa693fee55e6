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
// Part 2 sorts the digits instead, with two encoder and two decoder layers: which source position
// holds the t-th smallest digit depends on the digits, so the map is a different permutation for
// every string (content-based alignment, where reversal's is positional). Forward hooks show that
// both decoder layers read the same memory, the encoder's final output.
// Training records every head of the three attention layers (inspect::Telemetry): the encoder's
// self-attention, the decoder's self-attention and the cross-attention, whose (L + 1) x L map
// runs/seq2seq_cross_attention/explorer.html shows turning into the anti-diagonal step by step.
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

namespace {
using namespace seq2seq;

std::string joined(const std::vector<std::string>& tokens) {
  std::string s;
  for (size_t i = 0; i < tokens.size(); ++i) s += (i ? " " : "") + tokens[i];
  return s;
}

// Trains and reports one task; returns whether greedy decoding reached 99% exact match.
bool run(const Config& c) {
  Generator g(c.seed);
  Model m(c, g);
  const char* what = c.task == Task::Reverse ? "reverse" : "sort";
  fmt::print(
      "{} parameters, {} encoder and {} decoder layer{}; the task: {} the digits; training on strings whose "
      "digit sum is not a multiple of 7\n",
      m.num_parameters(), c.layers, c.layers, c.layers > 1 ? "s" : "", what);
  const TrainResult tr = train(m, c, g);
  const Evaluation e = evaluate(m, c, g);
  const Intervention iv = intervene(m, c, g);
  const CrossLayer& reader = e.cross[e.reader];
  std::vector<std::vector<std::string>> src, out;
  for (int64_t k = 0; k < 2; ++k) {
    src.push_back(digits(e.example_src.narrow(0, k, 1))), out.push_back(digits(e.example_out.narrow(0, k, 1)));
  }
  const std::string needs =
      c.task == Task::Reverse ? "on the mirrored source position" : "on the source positions holding the digit written";
  std::string summary = fmt::format(
      "held-out exact match (greedy decoding, 500 strings never seen in training): {:.1f}%\n"
      "mean cross-attention weight {}: {:.3f}{}\nexamples: {} -> {}   {} -> {}\n",
      100 * e.exact_match, needs, reader.aligned,
      c.layers > 1 ? fmt::format(" (layer {}, the layer that reads most)", e.reader) : std::string(), joined(src[0]),
      joined(out[0]), joined(src[1]), joined(out[1]));
  // Positional or content-based: does one fixed map explain the weight, or does it move with the digits?
  std::string table = fmt::format(
      "cross-attention per digit step, heads averaged, over the 500 test strings:\n"
      "  {:<28} {:>14} {:>12} {:>20}\n",
      "layer", "where needed", "uniform map", "best fixed position");
  for (const CrossLayer& x : e.cross)
    table += fmt::format("  {:<28} {:>14.3f} {:>12.3f} {:>20.3f}\n", x.name, x.aligned, x.uniform, x.positional);
  table += alignment_verdict(reader);
  std::string memory = fmt::format(
      "memory: the keys and values of {} cross-attention differ from the encoder's final output by at most {:.1e}",
      c.layers > 1 ? "every decoder layer's" : "the decoder's", e.memory_difference);
  memory += c.layers > 1 ? fmt::format(
                               ":\nevery layer reads the same memory; encoder layer 0's output (what a decoder layer "
                               "pairing with its own depth would read) differs from it by up to {:.2f}\n",
                               e.first_layer_difference)
                         : std::string("\n");
  const std::string changed =
      c.task == Task::Reverse
          ? fmt::format("a's reversal with\n  b's digit at output step {} and nothing else changed",
                        c.length - 1 - iv.slot)
          : std::string(
                "a's digits sorted\n  with b's digit in place of a's: the new digit moves to where its value "
                "puts it");
  const std::string interventions = fmt::format(
      "Interventions on the memory (pairs of held-out strings a, b):\n"
      "  decoder input from a, encoder output of b: {:.1f}% of predicted digits are b's {}, {:.1f}% a's\n"
      "  a's encoder output with position {} taken from b: {:.1f}% of greedy answers are {}\n",
      100 * iv.swapped_follows_memory, c.task == Task::Reverse ? "reversal" : "sorted digits",
      100 * iv.swapped_follows_input, iv.slot, 100 * iv.slot_exact, changed);
  fmt::print("\n{}\n{}\n{}\n{}\n{}\ncross-attention{}, heads averaged (rows: output step, cols: source digit)\n",
             summary, table, memory, e.shapes, interventions,
             c.layers > 1 ? fmt::format(" of layer {}", e.reader) : "");
  for (int64_t k = 0; k < 2; ++k)
    fmt::print("{}",
               viz::terminal_heatmap(reader.maps.narrow(0, k, 1).reshape({c.length + 1, c.length}), out[k], src[k]));

  viz::Report rep(c.out, fmt::format("seq2seq_cross_attention: {} digit strings", what),
                  "Queries from the decoder, keys and values from the encoder: the cross-attention map shows which "
                  "source digit each output step reads.");
  rep.add_note(summary, true);
  rep.add_note(table, true);
  rep.add_note(memory, true);
  rep.add_note(e.shapes, true);
  for (int64_t k = 0; k < 2; ++k)
    rep.add_svg(
        k == 0 ? "cross_attention.svg" : "cross_attention_2.svg",
        viz::heatmap_svg(reader.maps.narrow(0, k, 1).reshape({c.length + 1, c.length}).contiguous(),
                         {.title = fmt::format("Decoder cross-attention{} (heads averaged)",
                                               c.layers > 1 ? fmt::format(", layer {}", e.reader) : ""),
                          .row_labels = out[k],
                          .col_labels = src[k],
                          .row_title = "output step",
                          .col_title = "source digit"}),
        fmt::format("{} output steps (rows, the decoder's queries) against {} source digits (columns, the encoder's "
                    "keys): {}. The </s> row has no digit to read.",
                    c.length + 1, c.length,
                    c.task == Task::Reverse ? "each digit attends to the mirrored source position, the anti-diagonal "
                                              "of reversal"
                                            : "each digit attends to where that digit sits in the source, a "
                                              "permutation that changes with the string"));
  rep.add_note(interventions, true);
  rep.add_svg(
      "loss.svg",
      viz::line_chart_svg({viz::Series::over_steps("train loss", tr.losses)},
                          {.title = "Training loss", .x_label = "step", .y_label = "cross-entropy", .log_y = true}),
      "Teacher-forced training loss.");
  fmt::print("\npictures: {}\n", rep.write_index());
  for (size_t i = 0; i < e.cross.size(); ++i) {
    std::string line = fmt::format("explorer: {} on the probe string, weight {} by step:", e.cross[i].name,
                                   c.task == Task::Reverse ? "on the mirrored digit" : "where the digit written sits");
    for (size_t k = 0; k < tr.records.size(); ++k) {
      if (k > 0 && tr.records[k].step > 100 && k + 1 < tr.records.size()) continue;  // the forming, and the end
      line += fmt::format(" {} {:.2f}", tr.records[k].step, tr.aligned[i][k]);
    }
    fmt::print("{}\n", line);
  }
  fmt::print("explorer: {}\n", save_explorer(c, tr));
  return e.exact_match >= 0.99;
}
}  // namespace

int main(int argc, char** argv) {
  Config c;
  std::string task = "both";
  CLI::App app{
      "seq2seq_cross_attention: an encoder-decoder Transformer learns to reverse, then to sort, digit strings"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--task", task, "reverse, sort, or both (reversal with 1 layer each side, then sorting with 2)")
      ->check(CLI::IsMember({"reverse", "sort", "both"}));
  CLI::Option* steps = app.add_option("--steps", c.steps, "training steps (default 1200 to reverse, 3000 to sort)");
  CLI::Option* layers =
      app.add_option("--layers", c.layers, "encoder and decoder layers (default 1 to reverse, 2 to sort)")
          ->check(CLI::Range(1, 8));
  app.add_option("--length", c.length, "digits per string")->check(CLI::Range(2, 16));
  app.add_option("--lr", c.lr, "peak AdamW learning rate");
  app.add_option("--every", c.every, "telemetry every this many steps");
  CLI11_PARSE(app, argc, argv);

  bool ok = true;
  if (task != "sort") {
    fmt::print("== Part 1: reversal, a positional alignment ==\n");
    ok = run(c) && ok;
  }
  if (task != "reverse") {
    Config s = c;
    s.task = Task::Sort;
    if (steps->count() == 0) s.steps = 3000;
    if (layers->count() == 0) s.layers = 2;
    if (task == "both") s.out = c.out + "/sort";
    fmt::print("\n== Part 2: sorting, an alignment that depends on the content ==\n");
    ok = run(s) && ok;
  }
  return ok ? 0 : 1;
}
