#pragma once
// Differentiable elementwise ops (autograd/ops/elementwise.cpp). Binary ops broadcast; their
// gradients come back in the broadcast shape and the engine sums them down to each input's shape.
#include <optional>
#include <string>

#include "minigrad/autograd/variable.h"

namespace mg {

/// a + b, broadcast.
Variable add(const Variable& a, const Variable& b);
/// a - b, broadcast.
Variable sub(const Variable& a, const Variable& b);
/// a * b, broadcast.
Variable mul(const Variable& a, const Variable& b);
/// a / b, broadcast.
Variable div(const Variable& a, const Variable& b);
/// -x
Variable neg(const Variable& x);
/// x^exponent for a constant exponent.
Variable pow(const Variable& x, double exponent);
/// e^x
Variable exp(const Variable& x);
/// natural log
Variable log(const Variable& x);
/// square root
Variable sqrt(const Variable& x);
/// |x| (gradient 0 at 0, like PyTorch)
Variable abs(const Variable& x);
/// tanh(x)
Variable tanh(const Variable& x);
/// 1 / (1 + e^-x)
Variable sigmoid(const Variable& x);
/// sin(x)
Variable sin(const Variable& x);
/// cos(x)
Variable cos(const Variable& x);
/// log(1 + x)
Variable log1p(const Variable& x);
/// e^x - 1
Variable expm1(const Variable& x);
/// x limited to [min, max] (either may be absent); gradient 1 where min <= x <= max, as PyTorch's.
Variable clamp(const Variable& x, std::optional<double> min, std::optional<double> max = std::nullopt);
/// sign(x): -1, 0 or 1; its gradient is 0
Variable sign(const Variable& x);

// ---- backward kernels as ops of their own: what makes tanh, sigmoid and clamp differentiable twice ----
/// dy * (1 - y^2), differentiable in dy and y
Variable tanh_backward(const Variable& dy, const Variable& y);
/// dy * y * (1 - y), differentiable in dy and y
Variable sigmoid_backward(const Variable& dy, const Variable& y);
/// dy where min <= x <= max, else 0 (differentiable in dy; x only selects)
Variable clamp_backward(const Variable& dy, const Variable& x, std::optional<double> min, std::optional<double> max);
/// elementwise max(a, b), broadcast; a tie sends half the gradient to each side, as in PyTorch.
Variable maximum(const Variable& a, const Variable& b);
/// elementwise min(a, b), broadcast; a tie sends half the gradient to each side.
Variable minimum(const Variable& a, const Variable& b);
/// x with `value` where mask (Bool, broadcastable to x) is true; no gradient flows there.
Variable masked_fill(const Variable& x, const Tensor& mask, double value);
/// cond ? a : b, broadcast.
Variable where(const Tensor& cond, const Variable& a, const Variable& b);

Variable operator+(const Variable& a, const Variable& b);
Variable operator-(const Variable& a, const Variable& b);
Variable operator*(const Variable& a, const Variable& b);
Variable operator/(const Variable& a, const Variable& b);
Variable operator-(const Variable& x);
/// With a constant: the constant takes the variable's dtype (float32 beside bfloat16, as for Tensors).
Variable operator+(const Variable& a, double b);
Variable operator-(const Variable& a, double b);
Variable operator*(const Variable& a, double b);
Variable operator/(const Variable& a, double b);
Variable operator+(double a, const Variable& b);
Variable operator-(double a, const Variable& b);
Variable operator*(double a, const Variable& b);
Variable operator/(double a, const Variable& b);

/// start + weight (end - start), elementwise and broadcast (torch.lerp), computed as PyTorch does
/// for accuracy near weight 1: end - (end - start)(1 - weight) where weight >= 0.5. Derivatives:
/// d start = 1 - weight, d end = weight, d weight = end - start.
Variable lerp(const Variable& start, const Variable& end, const Variable& weight);
/// lerp with one weight for every element.
Variable lerp(const Variable& start, const Variable& end, double weight);

}  // namespace mg
