// Forward-mode rules, one per op: (f(x), f'(x) t). Elementwise ops reuse the backward kernels of
// tensor/ops/ (a diagonal Jacobian is its own transpose).
#include "minigrad/autograd/dual.h"

#include "minigrad/tensor/ops.h"
#include "minigrad/tensor/ops/activation.h"

namespace mg {

Dual make_dual(Tensor primal, Tensor tangent) {
  MG_CHECK(primal.defined() && tangent.defined(), StateError, "make_dual: the primal or the tangent is undefined");
  MG_CHECK(is_floating(primal.dtype()) && tangent.dtype() == primal.dtype(), DTypeError,
           "make_dual: primal and tangent must be one floating dtype, got {} and {}", dtype_name(primal.dtype()),
           dtype_name(tangent.dtype()));
  MG_CHECK(primal.shape() == tangent.shape(), ShapeError, "make_dual: the tangent has shape {} but the primal {}",
           shape_str(tangent.shape()), shape_str(primal.shape()));
  return Dual(std::move(primal), std::move(tangent));
}

Dual constant_dual(const Tensor& value) {
  MG_CHECK(value.defined() && is_floating(value.dtype()), DTypeError,
           "constant_dual: expected a floating tensor, got {}",
           value.defined() ? dtype_name(value.dtype()) : "an undefined one");
  return make_dual(value, zeros(value.shape(), value.dtype()));
}

Dual operator+(const Dual& a, const Dual& b) { return make_dual(a.primal() + b.primal(), a.tangent() + b.tangent()); }
Dual operator-(const Dual& a, const Dual& b) { return make_dual(a.primal() - b.primal(), a.tangent() - b.tangent()); }
Dual operator*(const Dual& a, const Dual& b) {
  return make_dual(a.primal() * b.primal(), a.tangent() * b.primal() + a.primal() * b.tangent());
}
Dual operator/(const Dual& a, const Dual& b) {
  return make_dual(a.primal() / b.primal(),
                   a.tangent() / b.primal() - a.primal() * b.tangent() / (b.primal() * b.primal()));
}
Dual operator-(const Dual& x) { return make_dual(-x.primal(), -x.tangent()); }
Dual operator+(const Dual& x, double c) { return make_dual(x.primal() + c, x.tangent()); }
Dual operator-(const Dual& x, double c) { return make_dual(x.primal() - c, x.tangent()); }
Dual operator*(const Dual& x, double c) { return make_dual(x.primal() * c, x.tangent() * c); }
Dual operator/(const Dual& x, double c) { return make_dual(x.primal() / c, x.tangent() / c); }
Dual operator+(double c, const Dual& x) { return x + c; }
Dual operator-(double c, const Dual& x) { return -x + c; }
Dual operator*(double c, const Dual& x) { return x * c; }
Dual operator/(double c, const Dual& x) {
  return make_dual(ones_like(x.primal()) * c / x.primal(), -(x.tangent() * c) / (x.primal() * x.primal()));
}

Dual exp(const Dual& x) {
  const Tensor y = mg::exp(x.primal());
  return make_dual(y, x.tangent() * y);
}
Dual log(const Dual& x) { return make_dual(mg::log(x.primal()), x.tangent() / x.primal()); }
Dual sqrt(const Dual& x) {
  const Tensor y = mg::sqrt(x.primal());
  return make_dual(y, x.tangent() / (y * 2.0));
}
Dual abs(const Dual& x) { return make_dual(mg::abs(x.primal()), x.tangent() * mg::sign(x.primal())); }
Dual sign(const Dual& x) { return make_dual(mg::sign(x.primal()), zeros(x.primal().shape(), x.primal().dtype())); }
Dual pow(const Dual& x, double p) {
  if (p == 0) return make_dual(mg::pow(x.primal(), p), zeros(x.primal().shape(), x.primal().dtype()));
  return make_dual(mg::pow(x.primal(), p), x.tangent() * mg::pow(x.primal(), p - 1) * p);
}
Dual tanh(const Dual& x) {
  const Tensor y = mg::tanh(x.primal());
  return make_dual(y, tanh_backward(x.tangent(), y));
}
Dual sigmoid(const Dual& x) {
  const Tensor y = mg::sigmoid(x.primal());
  return make_dual(y, sigmoid_backward(x.tangent(), y));
}
Dual sin(const Dual& x) { return make_dual(mg::sin(x.primal()), x.tangent() * mg::cos(x.primal())); }
Dual cos(const Dual& x) { return make_dual(mg::cos(x.primal()), -(x.tangent() * mg::sin(x.primal()))); }
Dual log1p(const Dual& x) { return make_dual(mg::log1p(x.primal()), x.tangent() / (x.primal() + 1.0)); }
Dual expm1(const Dual& x) {
  const Tensor y = mg::expm1(x.primal());
  return make_dual(y, x.tangent() * (y + 1.0));
}
Dual clamp(const Dual& x, std::optional<double> min, std::optional<double> max) {
  return make_dual(mg::clamp(x.primal(), min, max), clamp_backward(x.tangent(), x.primal(), min, max));
}
Dual relu(const Dual& x) { return make_dual(mg::relu(x.primal()), relu_backward(x.tangent(), x.primal())); }
Dual gelu(const Dual& x, GeluApproximate approximate) {
  return make_dual(mg::gelu(x.primal(), approximate), gelu_backward(x.tangent(), x.primal(), approximate));
}
Dual silu(const Dual& x) { return make_dual(mg::silu(x.primal()), silu_backward(x.tangent(), x.primal())); }
Dual swiglu(const Dual& x) {
  Tensor y = mg::swiglu(x.primal());  // (checks the shape first)
  const int64_t h = x.primal().size(-1) / 2;
  const Tensor &p = x.primal(), &t = x.tangent();
  const Tensor a = p.narrow(-1, 0, h), u = p.narrow(-1, h, h);
  return make_dual(std::move(y), silu_backward(t.narrow(-1, 0, h) * u, a) + mg::silu(a) * t.narrow(-1, h, h));
}
Dual softplus(const Dual& x, double beta, double threshold) {
  return make_dual(mg::softplus(x.primal(), beta, threshold),
                   softplus_backward(x.tangent(), x.primal(), beta, threshold));
}
Dual leaky_relu(const Dual& x, double negative_slope) {
  return make_dual(mg::leaky_relu(x.primal(), negative_slope),
                   leaky_relu_backward(x.tangent(), x.primal(), negative_slope));
}
Dual elu(const Dual& x, double alpha) {
  return make_dual(mg::elu(x.primal(), alpha), elu_backward(x.tangent(), x.primal(), alpha));
}

namespace {
// The tangent of a selection between a and b: a's where a wins, b's where b wins, their mean at a tie.
Tensor pick_tangent(const Tensor& a_wins, const Tensor& tie, const Dual& a, const Dual& b) {
  return mg::where(tie, (a.tangent() + b.tangent()) * 0.5, mg::where(a_wins, a.tangent(), b.tangent()));
}
}  // namespace

Dual maximum(const Dual& a, const Dual& b) {
  return make_dual(mg::maximum(a.primal(), b.primal()),
                   pick_tangent(gt(a.primal(), b.primal()), eq(a.primal(), b.primal()), a, b));
}
Dual minimum(const Dual& a, const Dual& b) {
  return make_dual(mg::minimum(a.primal(), b.primal()),
                   pick_tangent(lt(a.primal(), b.primal()), eq(a.primal(), b.primal()), a, b));
}
Dual where(const Tensor& cond, const Dual& a, const Dual& b) {
  return make_dual(mg::where(cond, a.primal(), b.primal()), mg::where(cond, a.tangent(), b.tangent()));
}
Dual masked_fill(const Dual& x, const Tensor& mask, double value) {
  return make_dual(mg::masked_fill(x.primal(), mask, value), mg::masked_fill(x.tangent(), mask, 0.0));
}

Dual sum(const Dual& x, const std::vector<int64_t>& dims, bool keepdim) {
  return make_dual(mg::sum(x.primal(), dims, keepdim), mg::sum(x.tangent(), dims, keepdim));
}
Dual mean(const Dual& x, const std::vector<int64_t>& dims, bool keepdim) {
  return make_dual(mg::mean(x.primal(), dims, keepdim), mg::mean(x.tangent(), dims, keepdim));
}
Dual transpose(const Dual& x, int64_t d0, int64_t d1) {
  return make_dual(x.primal().transpose(d0, d1), x.tangent().transpose(d0, d1));
}
Dual matmul(const Dual& a, const Dual& b) {
  return make_dual(mg::matmul(a.primal(), b.primal()),
                   mg::matmul(a.tangent(), b.primal()) + mg::matmul(a.primal(), b.tangent()));
}

}  // namespace mg
