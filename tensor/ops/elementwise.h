#pragma once
// Elementwise kernels (tensor/ops/elementwise.cpp): one value in, one value out, over any layout.
//
// Binary ops broadcast NumPy-style and need both operands of the same dtype (a DTypeError names
// both otherwise; minigrad does not promote silently), with one exception: float32 and bfloat16
// mix as PyTorch promotes them (detail::result_dtype: float32, unless the float32 one is 0-dim),
// computed in float32 and rounded to bfloat16 once where the result is bfloat16. Results are new
// contiguous tensors.
// The *_backward kernels are the derivatives the autograd rules call: plain arithmetic on the
// output gradient dy and what the forward saved.
#include <optional>
#include <string>

#include "minigrad/tensor/tensor.h"

namespace mg {

// ---- unary ----
/// -x
Tensor neg(const Tensor& x);
/// e^x
Tensor exp(const Tensor& x);
/// natural log; log(0) = -inf, log(negative) = nan, as in IEEE arithmetic
Tensor log(const Tensor& x);
/// square root
Tensor sqrt(const Tensor& x);
/// |x|
Tensor abs(const Tensor& x);
/// -1, 0 or 1
Tensor sign(const Tensor& x);
/// tanh(x)
Tensor tanh(const Tensor& x);
/// 1 / (1 + e^-x)
Tensor sigmoid(const Tensor& x);
/// x^exponent
Tensor pow(const Tensor& x, double exponent);
/// sin(x)
Tensor sin(const Tensor& x);
/// cos(x)
Tensor cos(const Tensor& x);
/// log(1 + x), accurate for small x
Tensor log1p(const Tensor& x);
/// e^x - 1, accurate for small x
Tensor expm1(const Tensor& x);
/// x limited to [min, max]; either bound may be absent. NaN stays NaN; with min > max every
/// element is max, as in torch.clamp.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
/// dy where min <= x <= max (the bounds included, as PyTorch's gradient has it), else 0
Tensor clamp_backward(const Tensor& dy, const Tensor& x, std::optional<double> min, std::optional<double> max);

// ---- derivatives of the unary kernels (dy and the saved tensor have the same shape) ----
/// dy * (1 - y^2), y = tanh(x)
Tensor tanh_backward(const Tensor& dy, const Tensor& y);
/// dy * y * (1 - y), y = sigmoid(x)
Tensor sigmoid_backward(const Tensor& dy, const Tensor& y);

// ---- binary, broadcast ----
/// a + b
Tensor add(const Tensor& a, const Tensor& b);
/// a - b
Tensor sub(const Tensor& a, const Tensor& b);
/// a * b
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b
Tensor div(const Tensor& a, const Tensor& b);
/// elementwise max(a, b); NaN wins from either side
Tensor maximum(const Tensor& a, const Tensor& b);
/// elementwise min(a, b); NaN wins from either side
Tensor minimum(const Tensor& a, const Tensor& b);
/// a == b as a Bool tensor; likewise ne, lt, le, gt, ge
Tensor eq(const Tensor& a, const Tensor& b);
/// a != b
Tensor ne(const Tensor& a, const Tensor& b);
/// a < b
Tensor lt(const Tensor& a, const Tensor& b);
/// a <= b
Tensor le(const Tensor& a, const Tensor& b);
/// a > b
Tensor gt(const Tensor& a, const Tensor& b);
/// a >= b
Tensor ge(const Tensor& a, const Tensor& b);
/// !mask for a Bool tensor
Tensor logical_not(const Tensor& mask);
/// cond ? a : b elementwise; cond is Bool; all three broadcast together
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` wherever mask (Bool, broadcastable to x) is true
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

/// Tensor operators; a double operand becomes a 0-dim tensor of the other operand's dtype (beside
/// bfloat16: a float32 one, read as PyTorch reads a number there; beside a 0-dim bfloat16 tensor
/// the result is float32, where PyTorch's is bfloat16).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator*(double a, const Tensor& b);
/// Scalar on the left: 1.0 - t, 2.0 / t, 1.0 + t (the double becomes a 0-dim tensor of t's dtype,
/// as on the right).
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
/// In place: a += b (b broadcast to a's shape; used to accumulate gradients).
Tensor& add_(Tensor& a, const Tensor& b);

}  // namespace mg
