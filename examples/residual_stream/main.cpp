// residual_stream: "What does each layer add, and where does a head look when it has nothing to do?"
//
// A GPT's blocks never replace their input: each adds to it (x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))).
// So the vector the head reads at the end is a sum: the embedding, plus what every attention layer
// wrote, plus what every MLP wrote. This example trains char_gpt's model (the same flags, seeds
// and batches, so the same weights) and takes that sum apart:
//
// 1. The sum, checked: the parts add up to the stream the model computes, logits included.
// 2. The direct path: the embedding straight to the head, skipping every block. It sees only the
//    current character and its position, so the best it could do is a bigram table; we compare
//    its loss with the bigram counted from the training text, and read the stream after each
//    block through the same final LayerNorm and head ("logit lens").
// 3. Each part's term in the right character's logit. The final LayerNorm divides by the whole
//    stream's standard deviation; with that number held fixed, it is linear, and the logit splits
//    exactly into one term per part.
// 4. First-token heads: heads that put most of their weight on position 0 whatever the query.
//    We measure what that weight brings (the norm of what key 0's value writes, against the other
//    keys'), and what happens when key 0 is taken away from the head and its weight must go elsewhere.
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "report.h"

int main(int argc, char** argv) {
  using namespace residual_stream;
  Config c;
  CLI::App app{"residual_stream: the residual stream as a sum of parts, the direct path, and first-token heads"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--data", c.data, "text file to train on (default: Debian's fortunes)");
  app.add_option("--steps", c.steps, "AdamW steps")->check(CLI::Range(1, 1000000));
  app.add_option("--lr", c.lr, "peak learning rate")->check(CLI::PositiveNumber);
  app.add_option("--context", c.context, "characters of context")->check(CLI::Range(8, 1024));
  app.add_option("--dim", c.dim, "model width")->check(CLI::Range(4, 4096));
  app.add_option("--heads", c.heads, "attention heads")->check(CLI::Range(1, 64));
  app.add_option("--layers", c.layers, "Transformer blocks")->check(CLI::Range(1, 64));
  app.add_option("--batch", c.batch, "sequences per step")->check(CLI::Range(1, 4096));
  app.add_option("--sink", c.sink, "mean weight on key 0 that makes a first-token head")->check(CLI::Range(0.0, 1.0));
  CLI11_PARSE(app, argc, argv);
  try {
    const Data d = load_data(c);
    const std::unique_ptr<models::GPT> model = train(d, c);
    models::GPT& m = *model;
    const auto [x, y] = eval_set(d, c);
    const Stream s = run_stream(m, x);
    const Results r = analyse(m, d, c, s, x, y);
    fmt::print("{}\npicture: {}\n", report(r, c), draw(r, c));
  } catch (const mg::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
