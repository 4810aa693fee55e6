// gpt2_generate: text from OpenAI's GPT-2, run by minigrad. "Is the GPT here the real thing?"
//
// Hugging Face's GPT-2 folder (config.json, model.safetensors, vocab.json, merges.txt) is read
// into models::GPT (models/pretrained.h: the Conv1D weights transposed, c_attn split into W_Q, W_K, W_V,
// lm_head tied to the token embedding) and data::GPT2Tokenizer (data/bpe.h: byte-level BPE). The
// prompt becomes token ids, GPT::generate continues them (top-k sampling with a temperature, or
// greedy with temperature 0; the KV cache makes each new token one step), and the ids become text.
//
// The model of examples/char_gpt is the same class: the only differences are GELU's tanh form,
// no bias on the head, and 124 M trained parameters instead of a few hundred thousand.
//
//   build/examples/gpt2_generate/gpt2_generate --model DIR --prompt "The meaning of life is"
//
// Without --model it runs on tests/golden/tiny_gpt2 and tests/golden/bpe, a 2-layer GPT-2 with
// random weights that transformers saved (the test fixture): the words are nonsense, but every
// step is the one the real model takes, and tests/test_example_models.cpp checks the ids and the text
// against transformers' own generate().
#include <chrono>
#include <filesystem>

#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "minigrad/minigrad.h"

namespace gpt2_generate {
using namespace mg;

struct Config {
  std::string model;      // config.json + model.safetensors
  std::string tokenizer;  // vocab.json + merges.txt (default: the model folder)
  std::string prompt = "The meaning of life is";
  int64_t tokens = 40;       // new tokens
  double temperature = 0.8;  // 0: greedy
  int64_t top_k = 40;        // 0: every token
  uint64_t seed = 0;
};

/// Where the fixtures are, relative to the repository.
inline Config fixture_config(const std::string& repo = ".") {
  Config c;
  c.model = repo + "/tests/golden/tiny_gpt2";
  c.tokenizer = repo + "/tests/golden/bpe";
  c.tokens = 12;
  c.temperature = 0.0;
  return c;
}

/// What one run produced.
struct Generation {
  std::vector<int64_t> prompt_ids, ids;  // ids: the prompt's, then the new ones
  std::string text;                      // ids decoded
  double seconds = 0;                    // generate() alone
};

/// Load the model and tokenizer named by c, and continue c.prompt by c.tokens tokens.
inline Generation generate(const Config& c) {
  const std::string tok_dir = c.tokenizer.empty() ? c.model : c.tokenizer;
  const data::GPT2Tokenizer tok = data::GPT2Tokenizer::from_files(tok_dir + "/vocab.json", tok_dir + "/merges.txt");
  const std::unique_ptr<models::GPT> model = models::gpt2_from_pretrained(c.model);
  MG_CHECK(tok.vocab_size() <= model->vocab_size, ValueError,
           "gpt2_generate: the tokenizer has {} tokens, more than the model's {}", tok.vocab_size(), model->vocab_size);
  Generation g;
  g.prompt_ids = tok.encode(c.prompt);
  MG_CHECK(!g.prompt_ids.empty(), ValueError, "gpt2_generate: the prompt is empty");
  const int64_t T = static_cast<int64_t>(g.prompt_ids.size());  // past the context, generate() slides its window
  Generator gen(c.seed);
  const auto t0 = std::chrono::steady_clock::now();
  const Tensor out = model->generate(from_vector<int64_t>(g.prompt_ids, {1, T}), c.tokens, c.temperature,
                                     c.top_k > 0 ? std::optional<int64_t>(c.top_k) : std::nullopt, gen);
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g.ids = out.to_vector<int64_t>();
  g.text = tok.decode(g.ids);
  return g;
}

}  // namespace gpt2_generate

#ifndef MG_EXAMPLE_NO_MAIN
int main(int argc, char** argv) {
  using namespace gpt2_generate;
  Config c = fixture_config();
  CLI::App app{"gpt2_generate: continue a prompt with a Hugging Face GPT-2 folder"};
  example::add_run_options(app, c.seed, nullptr, {.seed_help = "the sampling's random generator"});
  app.add_option("--model", c.model, "folder with config.json and model.safetensors (default: the test fixture)");
  app.add_option("--tokenizer", c.tokenizer, "folder with vocab.json and merges.txt (default: the model's folder)");
  app.add_option("--prompt", c.prompt, "the text to continue");
  app.add_option("--tokens", c.tokens, "new tokens");
  app.add_option("--temperature", c.temperature, "0: always the most likely token");
  app.add_option("--top-k", c.top_k, "sample among the k most likely tokens (0: all)");
  CLI11_PARSE(app, argc, argv);
  if (app.count("--model") && !app.count("--tokenizer")) c.tokenizer.clear();  // the model's own folder
  if (c.model.find("tiny_gpt2") != std::string::npos)
    fmt::print(
        "(the test fixture: a 2-layer GPT-2 with random weights, so the words are nonsense; pass --model DIR "
        "for the real one, see examples/gpt2_generate/README.md)\n");
  try {
    const Generation g = generate(c);
    fmt::print("prompt: {} tokens {}\n", g.prompt_ids.size(), fmt::join(g.prompt_ids, " "));
    fmt::print("{}\n", g.text);
    fmt::print("({} new tokens in {:.2f} s, {:.1f} tokens/s)\n", c.tokens, g.seconds,
               static_cast<double>(c.tokens) / std::max(g.seconds, 1e-9));
  } catch (const mg::Error& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
  return 0;
}
#endif
