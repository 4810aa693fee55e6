// gpt2_generate: text from OpenAI's GPT-2, run by minigrad. "Is the GPT here the real thing?"
//
// Hugging Face's GPT-2 folder (config.json, model.safetensors, and tokenizer.json or vocab.json +
// merges.txt) is read into models::GPT (models/pretrained.h: the Conv1D weights transposed, c_attn
// split into W_Q, W_K, W_V, lm_head tied to the token embedding) and data::AutoTokenizer
// (data/auto_tokenizer.h: GPT-2's byte-level BPE, data/bpe.h). The prompt becomes token ids,
// GPT::generate continues them with transformers' settings (models/generation.h: repetition penalty,
// temperature, top-k, top-p, stop at end-of-text; greedy with temperature 0; the KV cache makes each
// new token one step), and the ids become text.
//
// The model of examples/char_gpt is the same class: the only differences are GELU's tanh form,
// no bias on the head, and 124 M trained parameters instead of a few hundred thousand.
//
//   build/examples/gpt2_generate/gpt2_generate --model DIR --prompt "The meaning of life is"
//
// Without --model it runs on tests/golden/tiny_gpt2 (and its tokenizer.json), a 2-layer GPT-2 with
// random weights that transformers saved (the test fixture): the words are nonsense, but every
// step is the one the real model takes, and tests/test_example_models.cpp checks the ids and the text
// against transformers' own generate().
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

int main(int argc, char** argv) {
  using namespace gpt2_generate;
  Config c = fixture_config();
  CLI::App app{"gpt2_generate: continue a prompt with a Hugging Face GPT-2 folder"};
  example::add_run_options(app, c.seed, nullptr, {.seed_help = "the sampling's random generator"});
  app.add_option("--model", c.model, "folder with config.json and model.safetensors (default: the test fixture)");
  app.add_option("--tokenizer", c.tokenizer,
                 "folder with tokenizer.json, or vocab.json and merges.txt (default: the model's folder)");
  app.add_option("--prompt", c.prompt, "the text to continue");
  app.add_option("--tokens", c.tokens, "new tokens at most");
  app.add_option("--temperature", c.temperature, "0: always the most likely token");
  app.add_option("--top-k", c.top_k, "sample among the k most likely tokens (0: all)");
  app.add_option("--top-p", c.top_p, "sample among the most likely tokens whose probability reaches p (1: all)");
  app.add_option("--repetition-penalty", c.repetition_penalty, "> 1 makes tokens already there less likely");
  app.add_flag("!--no-stop", c.stop_at_eos, "go on past the end-of-text token");
  CLI11_PARSE(app, argc, argv);
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
