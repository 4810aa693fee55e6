// llama_style: "What did the decoders after GPT-2 change, and what does each change buy?"
//
// Two decoder-only Transformers learn the same text as char_gpt (Debian's fortunes, or --data),
// with the same budget (steps, batch, context, AdamW and its schedule) and the same number of
// parameters:
//   GPT-2 style: LayerNorm, learned position vectors added to the input, a GELU MLP 4x wide,
//                biases everywhere, every head with its own keys and values;
//   LLaMA style: RMSNorm, rotary position embedding in every attention layer, a SwiGLU MLP,
//                no biases, grouped-query attention (half as many key/value heads as query heads).
// Then the LLaMA-style model again with one change undone at a time. Each variant's MLP width is
// set so that its parameter count matches the GPT-2-style model's. For each it prints the
// validation loss (median over --seeds), the time per step, the memory a training step holds and
// the KV cache per generated token, and the conclusions are computed from those numbers: a
// difference is called real only where it exceeds the spread between seeds. The LLaMA-style run of
// the first seed records its heads as it trains (runs/llama_style/explorer.html).
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

int main(int argc, char** argv) {
  using namespace llama_style;
  Config c;
  CLI::App app{"llama_style: a GPT-2-style and a LLaMA-style decoder on the same text, budget and parameter count"};
  example::add_run_options(app, c.seed, &c.out, {.seed_help = "the first seed"});
  app.add_option("--data", c.data, "text file to train on (default: Debian's fortunes)");
  app.add_option("--steps", c.steps, "AdamW steps per run")->check(CLI::PositiveNumber);
  app.add_option("--lr", c.lr, "peak learning rate");
  app.add_option("--context", c.context, "characters of context")->check(CLI::Range(8, 1024));
  app.add_option("--dim", c.dim, "model width");
  app.add_option("--heads", c.heads, "query heads (even: the grouped models keep half as many key/value heads)");
  app.add_option("--layers", c.layers, "blocks");
  app.add_option("--batch", c.batch, "sequences per step");
  app.add_option("--seeds", c.seeds, "runs of every model")->check(CLI::PositiveNumber);
  app.add_flag("!--no-ablate", c.ablate, "only the two models, not the five ablations");
  app.add_flag("--tie", c.tie, "tie every head to its token embedding");
  CLI11_PARSE(app, argc, argv);
  try {
    MG_CHECK(c.heads >= 2 && c.heads % 2 == 0 && c.dim % c.heads == 0 && (c.dim / c.heads) % 2 == 0, ValueError,
             "llama_style: --heads must be even and divide --dim into even head widths, got dim {} and {} heads", c.dim,
             c.heads);
    std::filesystem::create_directories(c.out);
    const Data d = char_text::load_data(c.data, c.context, "llama_style");
    fmt::print("{} characters ({} distinct); {} steps of {} x {} characters per run, {} seed(s)\n", d.text.size(),
               d.vocab.size(), c.steps, c.batch, c.context, c.seeds);
    const std::vector<Summary> all = compare(d, c);
    fmt::print("\n{}\n", table(all));
    for (const std::string& line : conclusions(all, c.seeds)) fmt::print("- {}\n", line);
    for (const Summary& s : all)
      for (const Run& r : s.runs)
        if (!r.explorer.empty()) fmt::print("explorer (LLaMA style, seed {}): {}\n", r.seed, r.explorer);
  } catch (const mg::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
