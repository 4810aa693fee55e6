#pragma once
// Exercise 4 (chapter 3, the math first): softmax's backward, by hand.
//
// For one row, y = softmax(x) has the Jacobian dy_j/dx_i = y_j (delta_ij - y_i). A backward never
// builds that matrix: it applies it to the incoming gradient directly. Derive the line, then write
// it with whole-tensor ops (no loops needed).
#include "exercise.h"

namespace exercises {

/// The gradient of softmax's input: y = mg::softmax(x, dim) (any shape, float64), dy = dL/dy (y's
/// shape); returns dx = dL/dx, y's shape. dim may be negative (-1: the last dim).
/// Expect: every row of dx (along dim) sums to 0, and dx is 0 wherever y is 0 (a masked score).
/// Useful: mg::sum(t, {dim}, /*keepdim=*/true), and * and - on tensors (they broadcast).
/// Not the library's softmax backward: the check compares with it.
/// Hint: docs/03-writing-an-op.md, section "The math first" (and the softmax line of
/// docs/05-attention.md, "Is there a separate network that updates W_Q?").
inline mg::Tensor softmax_backward(const mg::Tensor& y, const mg::Tensor& dy, int64_t dim) {
  throw NotDone("04_softmax_backward", "docs/03-writing-an-op.md, section \"The math first\"");
}

}  // namespace exercises
