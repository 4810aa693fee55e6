#pragma once
// gpt2_generate, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <chrono>
#include <filesystem>

#include "minigrad/minigrad.h"

namespace gpt2_generate {
using namespace mg;

struct Config {
  std::string model;      // a Hugging Face GPT-2 folder: config.json, model.safetensors and the tokenizer's files
  std::string tokenizer;  // the tokenizer's folder (default: the model's)
  std::string prompt = "The meaning of life is";
  int64_t tokens = 40;              // new tokens at most
  double temperature = 0.8;         // 0: greedy (transformers' do_sample = false)
  int64_t top_k = 40;               // 0: every token
  double top_p = 1.0;               // 1: every token
  double repetition_penalty = 1.0;  // 1: off
  bool stop_at_eos = true;          // stop at the tokenizer's end-of-text token
  uint64_t seed = 0;
};

/// Where the fixtures are, relative to the repository.
inline Config fixture_config(const std::string& repo = ".") {
  Config c;
  c.model = repo + "/tests/golden/tiny_gpt2";
  c.tokens = 12;
  c.temperature = 0.0;
  c.stop_at_eos = false;  // as the fixture's golden: 12 tokens, whatever they are
  return c;
}

/// What one run produced.
struct Generation {
  std::vector<int64_t> prompt_ids, ids;  // ids: the prompt's, then the new ones
  std::string text;                      // ids decoded
  double seconds = 0;                    // generate() alone
};

/// The settings of c as transformers' generate() takes them.
inline models::GenerationConfig generation_config(const Config& c, const data::AutoTokenizer& tok) {
  models::GenerationConfig g;
  g.max_new_tokens = c.tokens;
  g.do_sample = c.temperature > 0;
  if (g.do_sample) g.temperature = c.temperature;
  g.top_k = c.top_k;
  g.top_p = c.top_p;
  g.repetition_penalty = c.repetition_penalty;
  if (c.stop_at_eos) g.eos_token_id = tok.eos_token_id();
  g.seed = c.seed;
  return g;
}

/// Load the model and tokenizer named by c, and continue c.prompt by at most c.tokens tokens.
inline Generation generate(const Config& c) {
  const data::AutoTokenizer tok = data::AutoTokenizer::from_pretrained(c.tokenizer.empty() ? c.model : c.tokenizer);
  const std::unique_ptr<models::GPT> model = models::gpt2_from_pretrained(c.model);
  MG_CHECK(tok.vocab_size() <= model->vocab_size, ValueError,
           "gpt2_generate: the tokenizer has {} tokens, more than the model's {}", tok.vocab_size(), model->vocab_size);
  Generation g;
  g.prompt_ids = tok.encode(c.prompt);
  MG_CHECK(!g.prompt_ids.empty(), ValueError, "gpt2_generate: the prompt is empty");
  const int64_t T = static_cast<int64_t>(g.prompt_ids.size());  // past the context, generate() slides its window
  const auto t0 = std::chrono::steady_clock::now();
  const Tensor out = model->generate(from_vector<int64_t>(g.prompt_ids, {1, T}), generation_config(c, tok));
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g.ids = out.to_vector<int64_t>();
  g.text = tok.decode(g.ids);
  return g;
}

}  // namespace gpt2_generate
