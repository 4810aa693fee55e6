#pragma once
// Differentiable matrix products (autograd/ops/matmul.cpp).
#include "minigrad/autograd/variable.h"

namespace mg {

/// torch.matmul: 2-D, batched with broadcast batch dims, and 1-D vectors.
Variable matmul(const Variable& a, const Variable& b);
/// x W^T + b: x (..., in), weight (out, in), bias (out) or undefined -> (..., out).
Variable linear(const Variable& x, const Variable& weight, const Variable& bias = Variable());

}  // namespace mg
