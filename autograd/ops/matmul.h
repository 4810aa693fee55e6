#pragma once
// Differentiable matrix products (autograd/ops/matmul.cpp).
#include <string_view>
#include <vector>

#include "minigrad/autograd/variable.h"
#include "minigrad/tensor/ops/activation.h"

namespace mg {

/// torch.matmul: 2-D, batched with broadcast batch dims, and 1-D vectors.
Variable matmul(const Variable& a, const Variable& b);
/// x W^T + b: x (..., in), weight (out, in), bias (out) or undefined -> (..., out).
Variable linear(const Variable& x, const Variable& weight, const Variable& bias = Variable());
/// gelu(linear(x, weight, bias), approximate) as one op: the same numbers, bit for bit, with a
/// backward that computes GELU's derivative, the bias gradient and (under autocast) the bfloat16
/// gradient operand in one pass instead of three. models::GPT's MLP uses it.
Variable linear_gelu(const Variable& x, const Variable& weight, const Variable& bias = Variable(),
                     GeluApproximate approximate = GeluApproximate::None);

/// beta input + alpha (mat1 @ mat2) (torch.addmm): mat1 (n, m), mat2 (m, p), input broadcastable
/// to (n, p). With beta 0, input is not read (a NaN in it does not reach the result), as PyTorch.
Variable addmm(const Variable& input, const Variable& mat1, const Variable& mat2, double beta = 1, double alpha = 1);
/// beta input + alpha (batch1 @ batch2), batch by batch (torch.baddbmm): batch1 (b, n, m), batch2
/// (b, m, p), input broadcastable to (b, n, p).
Variable baddbmm(const Variable& input, const Variable& batch1, const Variable& batch2, double beta = 1,
                 double alpha = 1);

/// torch.einsum(equation, *operands) (tensor/ops/einsum.h has the equation's rules): the same
/// plan as Tensor's einsum, run on Variables, so its derivative is the derivative of the diagonals,
/// sums, reshapes, permutes and matmuls it is made of (and differentiable again).
Variable einsum(std::string_view equation, const std::vector<Variable>& operands);
}  // namespace mg
