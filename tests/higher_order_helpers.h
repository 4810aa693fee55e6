#pragma once
// Shared by the higher-order tests (test_higher_order_*.cpp): a float64 scalar leaf, int64 tensors
// of given values, and random inputs kept away from 0 (for ops with a kink there).
#include <cstdint>
#include <vector>

#include "helpers.h"

namespace mgtest {

/// A float64 scalar that requires grad.
inline mg::Variable leaf(double v) { return mg::Variable(mg::scalar_tensor(v, mg::DType::Float64), true); }
/// An int64 tensor of the given values (indices, targets).
inline mg::Tensor ints(const std::vector<int64_t>& v, const mg::Shape& s) { return mg::from_vector<int64_t>(v, s); }
/// rnd, with every element at least `gap` away from 0 (for ops with a kink there)
inline mg::Tensor away_from_zero(const mg::Shape& s, uint64_t seed, double gap = 0.1) {
  const mg::Tensor r = rnd(s, seed);
  return r + mg::sign(r) * gap;
}

}  // namespace mgtest
