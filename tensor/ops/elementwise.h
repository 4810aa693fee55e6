#pragma once
// Elementwise kernels (tensor/ops/elementwise.cpp): one value in, one value out, over any layout.
//
// Binary ops broadcast NumPy-style and need both operands of the same dtype (a DTypeError names
// both otherwise; minigrad does not promote silently). Results are new contiguous tensors.
// The *_backward kernels are the derivatives the autograd rules call: plain arithmetic on the
// output gradient dy and what the forward saved.
#include <string>

#include "tensor/tensor.h"

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
/// max(x, 0)
Tensor relu(const Tensor& x);
/// GELU. approximate "none": x Phi(x), Phi the standard normal CDF (erf form, PyTorch's default);
/// "tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
/// x^exponent
Tensor pow(const Tensor& x, double exponent);

// ---- derivatives of the unary kernels (dy and the saved tensor have the same shape) ----
/// dy * (1 - y^2), y = tanh(x)
Tensor tanh_backward(const Tensor& dy, const Tensor& y);
/// dy * y * (1 - y), y = sigmoid(x)
Tensor sigmoid_backward(const Tensor& dy, const Tensor& y);
/// dy where x > 0, else 0
Tensor relu_backward(const Tensor& dy, const Tensor& x);
/// dy * GELU'(x) for the same `approximate` as the forward.
Tensor gelu_backward(const Tensor& dy, const Tensor& x, const std::string& approximate = "none");

// ---- binary, broadcast ----
/// a + b
Tensor add(const Tensor& a, const Tensor& b);
/// a - b
Tensor sub(const Tensor& a, const Tensor& b);
/// a * b
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b
Tensor div(const Tensor& a, const Tensor& b);
/// elementwise max(a, b)
Tensor maximum(const Tensor& a, const Tensor& b);
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

/// Tensor operators; a double operand becomes a 0-dim tensor of the other operand's dtype.
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
/// In place: a += b (b broadcast to a's shape; used to accumulate gradients).
Tensor& add_(Tensor& a, const Tensor& b);

}  // namespace mg
