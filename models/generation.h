#pragma once
// How a language model's next-token logits become the next token, step by step, with the settings
// and the arithmetic of Hugging Face transformers' generate() (its GenerationConfig and its logits
// processors), so that the same settings give the same tokens.
//
// At each step the logits of the last position, (B, vocab), go through, in this order:
//   1. repetition penalty   every token already in the row (prompt included) is made less likely:
//                           a logit s becomes s / penalty when s > 0 and s * penalty when s < 0
//                           (CTRL, Keskar et al. 2019);
// and, when sampling (do_sample), then
//   2. temperature          s / temperature: below 1 sharper, above 1 flatter;
//   3. top-k                every logit below the k-th largest becomes -inf (ties with it stay);
//   4. top-p (nucleus)      sort the probabilities, largest last; drop, from the smallest up, the
//                           tokens whose cumulative probability stays <= 1 - top_p (the smallest set
//                           of likely tokens whose probability reaches top_p survives, at least one);
//   5. draw one token from the softmax of what is left.
// Greedy decoding (do_sample false) takes the largest logit after step 1.
//
// GPT::generate casts the logits to float32 first, as transformers does. Each step computes in the
// logits' dtype with transformers' float32 arithmetic (the scalar rounded to float32 first, top-p's
// cumulative sum accumulated in double and rounded per entry, as PyTorch's CPU cumsum does). The
// repetition penalty, temperature and top-k are then equal to transformers' bit for bit; top-p's
// softmax sums in another order than PyTorch's vectorised one, so a token whose cumulative
// probability lies within a rounding of 1 - top_p could fall on the other side (tests/
// test_model_folders.cpp finds none on its fixtures).
//
// Differences from transformers' GenerationConfig: the length is max_new_tokens (transformers'
// default is max_length = 20 counting the prompt, which generation_config.json's max_length sets
// and which is not read here), max_new_tokens 0 returns the ids (transformers refuses it), and
// the end token comes from this config only (transformers also takes config.json's eos_token_id:
// pass data::AutoTokenizer::eos_token_id()).
#include <cstdint>
#include <optional>
#include <string>

#include "minigrad/tensor/generator.h"
#include "minigrad/tensor/tensor.h"

namespace mg::models {

/// The settings of a generation (transformers' GenerationConfig: names and defaults).
struct GenerationConfig {
  /// Tokens to add at most (fewer when every row has met eos_token_id).
  int64_t max_new_tokens = 20;
  /// false: greedy, the most likely token each step. true: draw from the processed distribution.
  bool do_sample = false;
  /// Sampling only: logits / temperature (> 0).
  double temperature = 1.0;
  /// Sampling only: keep the top_k largest logits (transformers' default 50; unset or 0: all).
  std::optional<int64_t> top_k = 50;
  /// Sampling only: keep the smallest set of most likely tokens whose probability reaches top_p (1: all;
  /// 0: the most likely token only).
  double top_p = 1.0;
  /// > 1 makes every token already in the row less likely (1: off).
  double repetition_penalty = 1.0;
  /// A row that produces this token is finished; later positions get pad_token_id.
  std::optional<int64_t> eos_token_id;
  /// What finished rows are filled with (unset: eos_token_id, as transformers does).
  std::optional<int64_t> pad_token_id;
  /// Draw from a generator seeded with this (unset: the generator passed to generate()).
  std::optional<uint64_t> seed;
  /// Keep every layer's keys and values, so each step runs only the new token.
  bool use_cache = true;

  /// Read a generation_config.json (the fields above that it has; eos_token_id as a number or a
  /// one-element list). A FileError when it cannot be read; a ValueError naming the file and field.
  static GenerationConfig from_json_file(const std::string& path);
};

/// Step 1: logits (B, V) floating and the tokens so far (B, T) int64 -> the penalised logits: each
/// token that occurs in row b has its logit divided by penalty (if positive) or multiplied by it.
/// (Not differentiable: generation runs without gradients.)
Tensor repetition_penalty(const Tensor& logits, const Tensor& ids, double penalty);
/// Step 3: logits (B, V) -> the logits below the k-th largest of their row set to -inf; k >= V keeps all.
Tensor top_k_filter(const Tensor& logits, int64_t k);
/// Step 4: logits (B, V) -> the logits outside each row's nucleus of probability top_p set to -inf
/// (0 <= top_p <= 1; at least the most likely token stays).
Tensor top_p_filter(const Tensor& logits, double top_p);
/// Steps 1-4 as config says (2-4 only when config.do_sample) -> the logits a token is chosen from.
Tensor process_logits(const Tensor& logits, const Tensor& ids, const GenerationConfig& config);
/// Checks config (each field in range, naming it) for a model of vocab_size tokens; `op` names the caller.
void check_generation_config(const GenerationConfig& config, int64_t vocab_size, const char* op);

}  // namespace mg::models
