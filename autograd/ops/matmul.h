#pragma once
// Differentiable matrix products (autograd/ops/matmul.cpp).
#include "minigrad/autograd/variable.h"

namespace mg {

/// torch.matmul: 2-D, batched with broadcast batch dims, and 1-D vectors.
Variable matmul(const Variable& a, const Variable& b);
/// x W^T + b: x (..., in), weight (out, in), bias (out) or undefined -> (..., out).
Variable linear(const Variable& x, const Variable& weight, const Variable& bias = Variable());
/// gelu(linear(x, weight, bias), approximate) as one op: the same numbers, bit for bit, with a
/// backward that computes GELU's derivative, the bias gradient and (under autocast) the bfloat16
/// gradient operand in one pass instead of three. nn::GPT's MLP uses it.
Variable linear_gelu(const Variable& x, const Variable& weight, const Variable& bias = Variable(),
                     const std::string& approximate = "none");

}  // namespace mg
