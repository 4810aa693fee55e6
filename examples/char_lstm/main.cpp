// char_lstm: "What does attention do that recurrence does not?"
//
// The same task as char_gpt -- continue text one character at a time -- learned by a recurrent
// network: an embedding, a 2-layer nn::LSTM and a linear head. It reads the same text with the
// same 90/10 split, trains on exactly the same batches for the same number of steps with the same
// optimizer and schedule (examples/char_gpt/text_data.h), and measures its validation loss on the
// same windows, so the two runs can be set side by side (README.md).
//
// The difference is how the past reaches the present. char_gpt's attention lets every position
// look straight at each of the previous 64 characters. The LSTM reads them one after another and
// carries what it keeps in a fixed-size state (h, c): it can in principle carry information from
// any distance, but only what fits through that state, and it must process the characters in order.
//
//   build/examples/char_lstm/char_lstm          (after make demo-deps build)
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

int main(int argc, char** argv) {
  using namespace char_lstm;
  Config c;
  CLI::App app{"char_lstm: a character-level LSTM on the fortunes corpus (or --data FILE), beside char_gpt"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--data", c.data, "text file to train on (default: Debian's fortunes)");
  app.add_option("--steps", c.steps, "total AdamW steps")->check(CLI::PositiveNumber);
  app.add_option("--lr", c.lr, "peak learning rate");
  app.add_option("--context", c.context, "characters per training window")->check(CLI::Range(8, 1024));
  app.add_option("--embed", c.embed, "embedding width")->check(CLI::PositiveNumber);
  app.add_option("--hidden", c.hidden, "LSTM state size")->check(CLI::PositiveNumber);
  app.add_option("--layers", c.layers, "stacked LSTM layers")->check(CLI::PositiveNumber);
  app.add_option("--batch", c.batch, "windows per step")->check(CLI::PositiveNumber);
  app.add_option("--eval-every", c.eval_every, "validation loss every N steps")->check(CLI::PositiveNumber);
  app.add_option("--prompt", c.prompt, "text to continue");
  app.add_option("--sample-len", c.sample_len, "characters to sample");
  app.add_option("--temperature", c.temperature, "sampling temperature")->check(CLI::PositiveNumber);
  app.add_option("--top-k", c.top_k, "sample among the k most likely characters")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    const Data d = load_data(c);
    Generator g(c.seed);
    CharLSTM m(d.vocab.size(), c, g);
    fmt::print("{} characters ({} distinct), {} for training; {} parameters\n", d.text.size(), d.vocab.size(),
               d.train.size(), m.num_parameters());
    const History h = train(m, d, c);
    fmt::print("validation loss {:.4f} (uniform guessing: {:.4f}); {:.0f} training tokens/s\n", h.val_losses.back(),
               std::log(static_cast<double>(d.vocab.size())), h.tokens_per_s);
    Generator sg(c.seed + 1);
    const Sample s = sample(m, d.vocab, c, sg);
    fmt::print("\n--- sample (temperature {:.2f}, top-k {}) ---\n{}\n---\n", c.temperature, c.top_k, s.text);
    fmt::print("pictures: {}\n", write_report(h, s, c));
  } catch (const mg::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
