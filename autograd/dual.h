#pragma once
// Forward mode with dual numbers (autograd/dual.cpp): x + eps t with eps^2 = 0, elementwise over
// tensors. Every op maps a pair (primal, tangent) to (f(x), f'(x) t): the tangent of the output is
// the directional derivative J t, computed alongside the value in the same forward pass, with no
// tape and no backward. PyTorch calls the pair make_dual/unpack_dual (torch.autograd.forward_ad).
//
//   Dual x = make_dual(x0, u);                 // u: the direction
//   Dual y = exp(x) * sin(x);                  // y.primal() = f(x0), y.tangent() = f'(x0) u
//
// Written generically, the same function runs on Tensors, Variables or Duals:
//   auto f = [](const auto& x) { return exp(x) * sin(x); };
// For an elementwise op the Jacobian is diagonal, so the forward rule is the backward kernel applied
// to the tangent (relu_backward(t, x) is t where x > 0). mg::jvp (autograd/functional.h) gets J u
// for any op through two backwards instead; docs/08-higher-order.md compares the two.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "minigrad/tensor/ops/activation.h"
#include "minigrad/tensor/tensor.h"

namespace mg {

class Dual;
/// The dual number (primal, tangent): a ShapeError or DTypeError unless both have one shape and
/// floating dtype. The only way to make one, so every Dual's tangent has its value's shape.
Dual make_dual(Tensor primal, Tensor tangent);

/// A tensor and its tangent (the same shape and dtype).
class Dual {
 public:
  /// The value.
  const Tensor& primal() const { return primal_; }
  /// Its derivative along the chosen direction.
  const Tensor& tangent() const { return tangent_; }

 private:
  Dual(Tensor primal, Tensor tangent) : primal_(std::move(primal)), tangent_(std::move(tangent)) {}
  friend Dual make_dual(Tensor primal, Tensor tangent);
  Tensor primal_, tangent_;
};
/// A constant: tangent zero.
Dual constant_dual(const Tensor& value);

// ---- arithmetic, broadcast as the tensor ops are ----
/// d(a + b) = da + db
Dual operator+(const Dual& a, const Dual& b);
/// d(a - b) = da - db
Dual operator-(const Dual& a, const Dual& b);
/// d(a b) = da b + a db
Dual operator*(const Dual& a, const Dual& b);
/// d(a / b) = da / b - a db / b^2
Dual operator/(const Dual& a, const Dual& b);
/// d(-x) = -dx
Dual operator-(const Dual& x);
/// x + c, c a number
Dual operator+(const Dual& x, double c);
/// x - c
Dual operator-(const Dual& x, double c);
/// x * c
Dual operator*(const Dual& x, double c);
/// x / c
Dual operator/(const Dual& x, double c);
/// c + x
Dual operator+(double c, const Dual& x);
/// c - x
Dual operator-(double c, const Dual& x);
/// c * x
Dual operator*(double c, const Dual& x);
/// c / x: d(c / x) = -c dx / x^2
Dual operator/(double c, const Dual& x);

// ---- unary ----
/// d(e^x) = e^x dx
Dual exp(const Dual& x);
/// d(log x) = dx / x
Dual log(const Dual& x);
/// d(sqrt x) = dx / (2 sqrt x)
Dual sqrt(const Dual& x);
/// d|x| = sign(x) dx
Dual abs(const Dual& x);
/// sign(x), tangent 0
Dual sign(const Dual& x);
/// d(x^p) = p x^(p-1) dx
Dual pow(const Dual& x, double p);
/// d(tanh x) = (1 - tanh^2 x) dx
Dual tanh(const Dual& x);
/// d(sigmoid x) = s (1 - s) dx
Dual sigmoid(const Dual& x);
/// d(sin x) = cos x dx
Dual sin(const Dual& x);
/// d(cos x) = -sin x dx
Dual cos(const Dual& x);
/// d(log(1 + x)) = dx / (1 + x)
Dual log1p(const Dual& x);
/// d(e^x - 1) = e^x dx
Dual expm1(const Dual& x);
/// dx where min <= x <= max, else 0
Dual clamp(const Dual& x, std::optional<double> min, std::optional<double> max = std::nullopt);
/// relu: dx where x > 0
Dual relu(const Dual& x);
/// GELU'(x) dx, in either form
Dual gelu(const Dual& x, GeluApproximate approximate = GeluApproximate::None);
/// SiLU'(x) dx
Dual silu(const Dual& x);
/// SwiGLU's gate, x = [a | u] on the last dim: SiLU'(a) u da + silu(a) du
Dual swiglu(const Dual& x);
/// sigmoid(beta x) dx (dx where beta x > threshold)
Dual softplus(const Dual& x, double beta = 1, double threshold = 20);
/// dx where x > 0, negative_slope dx otherwise
Dual leaky_relu(const Dual& x, double negative_slope = 0.01);
/// dx where x > 0, alpha e^x dx otherwise
Dual elu(const Dual& x, double alpha = 1);

// ---- binary selections ----
/// max(a, b): the winner's tangent; a tie takes the mean of both (as the backward splits dy)
Dual maximum(const Dual& a, const Dual& b);
/// min(a, b), likewise
Dual minimum(const Dual& a, const Dual& b);
/// cond ? a : b, tangents alike
Dual where(const Tensor& cond, const Dual& a, const Dual& b);
/// value where mask, x elsewhere; tangent 0 where mask
Dual masked_fill(const Dual& x, const Tensor& mask, double value);

// ---- linear ops (the tangent goes through the same op) ----
/// sum over dims
Dual sum(const Dual& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// mean over dims
Dual mean(const Dual& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// dims d0 and d1 swapped, in both
Dual transpose(const Dual& x, int64_t d0, int64_t d1);
/// d(a @ b) = da @ b + a @ db
Dual matmul(const Dual& a, const Dual& b);

}  // namespace mg
