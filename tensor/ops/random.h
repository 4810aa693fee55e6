#pragma once
// Random sampling beyond the creation functions of tensor/tensor.h (tensor/ops/random.cpp):
// categories from weights, permutations. Every draw comes from a Generator, so a seed fixes it.
#include <optional>

#include "minigrad/tensor/generator.h"
#include "minigrad/tensor/tensor.h"

namespace mg {

/// num_samples category ids (int64) drawn for each row of `probs`, (n) or (batch, n): weights that
/// are finite and >= 0, not necessarily summing to 1. Without replacement an id comes at most once
/// per row, so num_samples may not exceed the categories with non-zero weight.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   Generator& gen = default_generator());
/// The next token of a language model, one per row of logits (batch, vocab) -> (batch, 1) int64:
/// logits / temperature, only the top_k largest kept (all when none), one draw from their softmax.
/// Temperature 0 takes the largest logit (no draw). GPT::generate and examples/char_lstm sample with it.
Tensor sample_logits(const Tensor& logits, double temperature = 1.0, std::optional<int64_t> top_k = std::nullopt,
                     Generator& gen = default_generator());
/// A random permutation of 0, ..., n-1 (int64), by Fisher-Yates.
Tensor randperm(int64_t n, Generator& gen = default_generator());

}  // namespace mg
