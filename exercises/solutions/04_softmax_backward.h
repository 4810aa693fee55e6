#pragma once
// Exercise 4, the reference solution (docs/03-writing-an-op.md, section "The math first").
#include "exercise.h"

namespace exercises {

/// The gradient of softmax's input, given its output y and the output's gradient dy.
inline mg::Tensor softmax_backward(const mg::Tensor& y, const mg::Tensor& dy, int64_t dim) {
  // dx_i = sum_j dy_j y_j (delta_ij - y_i) = y_i (dy_i - sum_j dy_j y_j)
  // The sum is one number per row (kept as a dim of size 1, so it broadcasts back along the row).
  const mg::Tensor row_dot = mg::sum(dy * y, {dim}, /*keepdim=*/true);
  return y * (dy - row_dot);
}

}  // namespace exercises
