#pragma once
// Random sampling beyond the creation functions of tensor/tensor.h (tensor/ops/random.cpp):
// categories from weights, permutations. Every draw comes from a Generator, so a seed fixes it.
#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace mg {

/// num_samples category ids (int64) drawn for each row of `probs`, (n) or (batch, n): weights that
/// are finite and >= 0, not necessarily summing to 1. Without replacement an id comes at most once
/// per row, so num_samples may not exceed the categories with non-zero weight.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   Generator& gen = default_generator());
/// A random permutation of 0, ..., n-1 (int64), by Fisher-Yates.
Tensor randperm(int64_t n, Generator& gen = default_generator());

}  // namespace mg
