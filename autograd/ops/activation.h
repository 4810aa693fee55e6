#pragma once
// Differentiable activation functions (autograd/ops/activation.cpp; kernels in
// tensor/ops/activation.cpp). Same names, arguments and defaults as torch.nn.functional.
#include <string>

#include "minigrad/autograd/variable.h"
#include "minigrad/tensor/ops/activation.h"

namespace mg {

/// max(x, 0) (gradient 0 at 0, like PyTorch)
Variable relu(const Variable& x);
/// GELU in the erf form (PyTorch's default) or GeluApproximate::Tanh.
Variable gelu(const Variable& x, GeluApproximate approximate = GeluApproximate::None);
/// x sigmoid(x)
Variable silu(const Variable& x);
/// SwiGLU's gate: x (..., 2h) = [a | u] on the last dim -> silu(a) * u (..., h), in one pass forward
/// and backward (the composed form's values, bit for bit).
Variable swiglu(const Variable& x);
/// log(1 + e^(beta x)) / beta (x itself where beta x > threshold)
Variable softplus(const Variable& x, double beta = 1, double threshold = 20);
/// x for x > 0, negative_slope x otherwise
Variable leaky_relu(const Variable& x, double negative_slope = 0.01);
/// x for x > 0, alpha (e^x - 1) otherwise
Variable elu(const Variable& x, double alpha = 1);

// ---- the derivative kernels as ops of their own (dy * f'(x)), differentiable in dy and x: what
// makes each activation differentiable twice (their rules hold f'') ----
/// dy where x > 0, else 0
Variable relu_backward(const Variable& dy, const Variable& x);
/// dy * GELU'(x)
Variable gelu_backward(const Variable& dy, const Variable& x, GeluApproximate approximate = GeluApproximate::None);
/// dy * SiLU'(x)
Variable silu_backward(const Variable& dy, const Variable& x);
/// dy * sigmoid(beta x) (dy where beta x > threshold)
Variable softplus_backward(const Variable& dy, const Variable& x, double beta = 1, double threshold = 20);
/// dy where x > 0, negative_slope dy otherwise
Variable leaky_relu_backward(const Variable& dy, const Variable& x, double negative_slope = 0.01);
/// dy where x > 0, dy alpha e^x otherwise
Variable elu_backward(const Variable& dy, const Variable& x, double alpha = 1);

}  // namespace mg
