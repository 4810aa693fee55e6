// Activation functions. Each rule calls the derivative kernel of tensor/ops/activation.cpp, through
// an overload: on Tensors the kernel itself, on Variables (create_graph) the kernel recorded as an op
// of its own, whose rule below holds the second derivative f''.
#include "minigrad/autograd/ops/activation.h"

#include <cmath>
#include <numbers>

#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops/activation.h"
#include "minigrad/tensor/ops/elementwise.h"

namespace mg {
namespace {
// 0 where cond, else v (a rule's value on the side of a kink where f'' is 0)
template <class V>
V zero_where(const Tensor& cond, const V& v) {
  return mg::where(cond, V(zeros({}, v.dtype())), v);
}
// A floating 0-dim constant of x's dtype, for comparisons.
Tensor scalar_like(double v, const Tensor& x) { return scalar_tensor(v, x.dtype()); }
}  // namespace

// y = max(x, 0)        dx = dy where x > 0, else 0
Variable relu(const Variable& x) {
  return record(
      "relu", mg::relu(x.data()), {x}, keep(0),
      []<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> { return {relu_backward(dy, x[0])}; });
}

// z = dy where x > 0       d(dy) = dz where x > 0       dx = 0 (f'' = 0 away from the kink)
Variable relu_backward(const Variable& dy, const Variable& x) {
  return record("relu_backward", mg::relu_backward(dy.data(), x.data()), {dy, x}, keep(1),
                []<class V>(const V& dz, const Saved<V, 1>& x, const Node& n) -> Grads<V> {
                  return {n.needs(0) ? relu_backward(dz, x[0]) : V(), V()};
                });
}

// erf form:  y = x Phi(x)                  dx = dy * (Phi(x) + x phi(x)),   phi = Phi' the normal density
// tanh form: y = x/2 (1 + tanh u),  u = c (x + 0.044715 x^3),  c = sqrt(2/pi)
//            dx = dy * ((1 + tanh u) / 2 + x/2 (1 - tanh^2 u) c (1 + 3 * 0.044715 x^2))
Variable gelu(const Variable& x, GeluApproximate approximate) {
  return record(approximate == GeluApproximate::Tanh ? "gelu_tanh" : "gelu", mg::gelu(x.data(), approximate), {x},
                keep(0), [approximate]<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> {
                  return {gelu_backward(dy, x[0], approximate)};
                });
}

// z = dy GELU'(x)      d(dy) = dz GELU'(x)      dx = dz dy GELU''(x), with
//   erf form:  GELU'' = phi(x) (2 - x^2)
//   tanh form: GELU'' = (1 - t^2) (u' - x t u'^2 + 3 c 0.044715 x^2),  t = tanh u,  u' = c (1 + 3 * 0.044715 x^2)
Variable gelu_backward(const Variable& dy, const Variable& x, GeluApproximate approximate) {
  return record(approximate == GeluApproximate::Tanh ? "gelu_tanh_backward" : "gelu_backward",
                mg::gelu_backward(dy.data(), x.data(), approximate), {dy, x}, keep(0, 1),
                [approximate]<class V>(const V& dz, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
                  const auto& [dy, x] = s;
                  if (!n.needs(1)) return {gelu_backward(dz, x, approximate), V()};
                  V f2;
                  if (approximate == GeluApproximate::Tanh) {
                    const double c = std::sqrt(2.0 / std::numbers::pi), k = 0.044715;
                    const V x2 = x * x, t = mg::tanh((x + x2 * x * k) * c), du = (x2 * (3 * k) + 1.0) * c;
                    f2 = (t * t * -1.0 + 1.0) * (du - x * t * du * du + x2 * (3 * c * k));
                  } else {
                    const V phi = mg::exp(x * x * -0.5) * (1.0 / std::sqrt(2.0 * std::numbers::pi));
                    f2 = phi * (x * x * -1.0 + 2.0);
                  }
                  return {n.needs(0) ? gelu_backward(dz, x, approximate) : V(), dz * dy * f2};
                });
}

// y = x s, s = sigmoid(x)          dx = dy s (1 + x (1 - s))
Variable silu(const Variable& x) {
  return record(
      "silu", mg::silu(x.data()), {x}, keep(0),
      []<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> { return {silu_backward(dy, x[0])}; });
}

// z = dy SiLU'(x)      d(dy) = dz SiLU'(x)      dx = dz dy s (1 - s) (2 + x (1 - 2 s))
Variable silu_backward(const Variable& dy, const Variable& x) {
  return record("silu_backward", mg::silu_backward(dy.data(), x.data()), {dy, x}, keep(0, 1),
                []<class V>(const V& dz, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
                  const auto& [dy, x] = s;
                  if (!n.needs(1)) return {silu_backward(dz, x), V()};
                  const V sg = mg::sigmoid(x);
                  const V f2 = sg * (sg * -1.0 + 1.0) * (x * (sg * -2.0 + 1.0) + 2.0);
                  return {n.needs(0) ? silu_backward(dz, x) : V(), dz * dy * f2};
                });
}

// x = [a | u] (..., 2h), y = silu(a) u (..., h)       dx = [dy u SiLU'(a) | dy silu(a)] (..., 2h)
// On Tensors the rule is the fused kernel; on Variables (create_graph) the same values from narrow,
// silu, silu_backward, mul and concat, whose own rules then give the second derivatives.
Variable swiglu(const Variable& x) {
  return record("swiglu", mg::swiglu(x.data()), {x}, keep(0),
                []<class V>(const V& dy, const Saved<V, 1>& s, const Node&) -> Grads<V> {
                  if constexpr (std::is_same_v<V, Tensor>) {
                    return {mg::swiglu_backward(dy, s[0])};
                  } else {
                    const int64_t h = s[0].data().size(-1) / 2;
                    const V a = narrow(s[0], -1, 0, h), u = narrow(s[0], -1, h, h);
                    return {concat({silu_backward(dy * u, a), dy * silu(a)}, -1)};
                  }
                });
}

// y = log(1 + e^(b x)) / b         dx = dy sigmoid(b x)       (y = x, dx = dy where b x > threshold)
Variable softplus(const Variable& x, double beta, double threshold) {
  return record("softplus", mg::softplus(x.data(), beta, threshold), {x}, keep(0),
                [beta, threshold]<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> {
                  return {softplus_backward(dy, x[0], beta, threshold)};
                });
}

// z = dy sigmoid(b x)      d(dy) = dz sigmoid(b x)      dx = dz dy b s (1 - s), s = sigmoid(b x)
// (where b x > threshold: z = dy, so d(dy) = dz and dx = 0)
Variable softplus_backward(const Variable& dy, const Variable& x, double beta, double threshold) {
  return record("softplus_backward", mg::softplus_backward(dy.data(), x.data(), beta, threshold), {dy, x}, keep(0, 1),
                [beta, threshold]<class V>(const V& dz, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
                  const auto& [dy, x] = s;
                  if (!n.needs(1)) return {softplus_backward(dz, x, beta, threshold), V()};
                  const V sg = mg::sigmoid(x * beta);
                  const Tensor linear = gt(tensor_of(x) * beta, scalar_like(threshold, tensor_of(x)));
                  return {n.needs(0) ? softplus_backward(dz, x, beta, threshold) : V(),
                          zero_where(linear, dz * dy * sg * (sg * -1.0 + 1.0) * beta)};
                });
}

// y = x (x > 0), s x otherwise     dx = dy (x > 0), s dy otherwise
Variable leaky_relu(const Variable& x, double negative_slope) {
  return record("leaky_relu", mg::leaky_relu(x.data(), negative_slope), {x}, keep(0),
                [negative_slope]<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> {
                  return {leaky_relu_backward(dy, x[0], negative_slope)};
                });
}

// z = dy (x > 0), s dy otherwise       d(dy) = the same on dz       dx = 0
Variable leaky_relu_backward(const Variable& dy, const Variable& x, double negative_slope) {
  return record("leaky_relu_backward", mg::leaky_relu_backward(dy.data(), x.data(), negative_slope), {dy, x}, keep(1),
                [negative_slope]<class V>(const V& dz, const Saved<V, 1>& x, const Node& n) -> Grads<V> {
                  return {n.needs(0) ? leaky_relu_backward(dz, x[0], negative_slope) : V(), V()};
                });
}

// y = x (x > 0), a (e^x - 1) otherwise     dx = dy (x > 0), dy a e^x otherwise
Variable elu(const Variable& x, double alpha) {
  return record("elu", mg::elu(x.data(), alpha), {x}, keep(0),
                [alpha]<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> {
                  return {elu_backward(dy, x[0], alpha)};
                });
}

// z = dy (x > 0), dy a e^x otherwise       d(dy) = the same on dz       dx = 0 (x > 0), dz dy a e^x otherwise
Variable elu_backward(const Variable& dy, const Variable& x, double alpha) {
  return record("elu_backward", mg::elu_backward(dy.data(), x.data(), alpha), {dy, x}, keep(0, 1),
                [alpha]<class V>(const V& dz, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
                  const auto& [dy, x] = s;
                  const Tensor positive = gt(tensor_of(x), scalar_like(0, tensor_of(x)));
                  return {n.needs(0) ? elu_backward(dz, x, alpha) : V(),
                          n.needs(1) ? zero_where(positive, dz * dy * mg::exp(x) * alpha) : V()};
                });
}

}  // namespace mg
