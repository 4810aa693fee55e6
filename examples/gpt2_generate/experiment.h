#pragma once
// gpt2_generate, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <chrono>
#include <filesystem>

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
