// Activation functions, each followed by the kernel of its derivative.
#include "minigrad/tensor/ops/activation.h"

#include <cmath>
#include <numbers>

#include "minigrad/tensor/fastmath.h"
#include "minigrad/tensor/loops.h"

namespace mg {
namespace {
using detail::backward_map;
using detail::unary_float;

constexpr double kSqrt2OverPi = 0.7978845608028654;    // sqrt(2/pi), GELU's tanh form
constexpr double kGeluCubic = 0.044715;                // the x^3 coefficient of the tanh form
constexpr double kInvSqrt2 = std::numbers::sqrt2 / 2;  // 1/sqrt(2): Phi(x) = (1 + erf(x/sqrt 2)) / 2
constexpr double kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;  // 1/sqrt(2 pi): phi(0)

void check_approximate(const std::string& approximate, std::string_view op) {
  MG_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "{}: approximate must be \"none\" or \"tanh\", got \"{}\"", op, approximate);
}
void check_finite(double v, const char* what, std::string_view op) {
  MG_CHECK(std::isfinite(v), ValueError, "{}: {} must be finite, got {}", op, what, v);
}
}  // namespace

Tensor relu(const Tensor& x) {
  return unary_float(x, "relu", [](auto v) { return v > 0 || v != v ? v : decltype(v)(0); });  // relu(NaN) = NaN
}
// dx = dy where x > 0, else 0
Tensor relu_backward(const Tensor& dy, const Tensor& x) {
  return backward_map(dy, x, "relu_backward", [](auto g, auto v) { return v > 0 ? g : decltype(v)(0); });
}

// GELU, erf form:   y = x Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2
//       tanh form:  y = x/2 (1 + tanh u),  u = c (x + k x^3),  c = sqrt(2/pi),  k = 0.044715
Tensor gelu(const Tensor& x, const std::string& approximate) {
  check_approximate(approximate, "gelu");
  if (approximate == "tanh")
    return unary_float(x, "gelu", [](auto v) {
      using T = decltype(v);
      return T(0.5) * v * (T(1) + std::tanh(T(kSqrt2OverPi) * (v + T(kGeluCubic) * v * v * v)));
    });
  return unary_float(x, "gelu", [](auto v) {
    using T = decltype(v);
    return T(0.5) * v * (T(1) + fast::erf(v * T(kInvSqrt2)));
  });
}

// erf form:  GELU'(x) = Phi(x) + x phi(x),  phi(x) = e^(-x^2/2) / sqrt(2 pi)
// tanh form: GELU'(x) = (1 + tanh u) / 2 + x/2 (1 - tanh^2 u) c (1 + 3 k x^2)
Tensor gelu_backward(const Tensor& dy, const Tensor& x, const std::string& approximate) {
  check_approximate(approximate, "gelu_backward");
  if (approximate == "tanh")
    return backward_map(dy, x, "gelu_backward", [](auto g, auto v) {
      using T = decltype(v);
      const T c = T(kSqrt2OverPi), k = T(kGeluCubic);
      const T t = std::tanh(c * (v + k * v * v * v));
      return g * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * c * (T(1) + T(3) * k * v * v));
    });
  return backward_map(dy, x, "gelu_backward", [](auto g, auto v) {
    using T = decltype(v);
    const T cdf = T(0.5) * (T(1) + fast::erf(v * T(kInvSqrt2)));
    const T pdf = fast::exp(T(-0.5) * v * v) * T(kInvSqrt2Pi);
    return g * (cdf + v * pdf);
  });
}

// y = x s,  s = sigmoid(x) = 1 / (1 + e^-x)
Tensor silu(const Tensor& x) {
  return unary_float(x, "silu", [](auto v) { return v / (decltype(v)(1) + fast::exp(-v)); });
}
// dx = dy (s + x s (1 - s)) = dy s (1 + x (1 - s))
Tensor silu_backward(const Tensor& dy, const Tensor& x) {
  return backward_map(dy, x, "silu_backward", [](auto g, auto v) {
    using T = decltype(v);
    const T s = T(1) / (T(1) + fast::exp(-v));
    return g * s * (T(1) + v * (T(1) - s));
  });
}

// y = log(1 + e^(b x)) / b, computed as log1p; where b x > threshold, y = x
Tensor softplus(const Tensor& x, double beta, double threshold) {
  check_finite(beta, "beta", "softplus"), check_finite(threshold, "threshold", "softplus");
  MG_CHECK(beta != 0, ValueError, "softplus: beta must be non-zero");
  return unary_float(x, "softplus", [beta, threshold](auto v) {
    using T = decltype(v);
    const T bx = v * T(beta);
    return bx > T(threshold) ? v : static_cast<T>(std::log1p(std::exp(bx)) / T(beta));
  });
}
// dx = dy sigmoid(b x) = dy e^(b x) / (e^(b x) + 1); where b x > threshold, dx = dy
Tensor softplus_backward(const Tensor& dy, const Tensor& x, double beta, double threshold) {
  check_finite(beta, "beta", "softplus_backward"), check_finite(threshold, "threshold", "softplus_backward");
  return backward_map(dy, x, "softplus_backward", [beta, threshold](auto g, auto v) {
    using T = decltype(v);
    const T bx = v * T(beta);
    if (bx > T(threshold)) return g;
    const T z = std::exp(bx);
    return g * z / (z + T(1));
  });
}

// y = x for x > 0, slope x otherwise
Tensor leaky_relu(const Tensor& x, double slope) {
  check_finite(slope, "negative_slope", "leaky_relu");
  return unary_float(x, "leaky_relu", [slope](auto v) { return v > 0 ? v : v * decltype(v)(slope); });
}
// dx = dy for x > 0, slope dy otherwise
Tensor leaky_relu_backward(const Tensor& dy, const Tensor& x, double slope) {
  check_finite(slope, "negative_slope", "leaky_relu_backward");
  return backward_map(dy, x, "leaky_relu_backward",
                      [slope](auto g, auto v) { return v > 0 ? g : g * decltype(v)(slope); });
}

// y = x for x > 0, alpha (e^x - 1) otherwise
Tensor elu(const Tensor& x, double alpha) {
  check_finite(alpha, "alpha", "elu");
  return unary_float(x, "elu", [alpha](auto v) {
    using T = decltype(v);
    return v > 0 ? v : static_cast<T>(T(alpha) * std::expm1(v));
  });
}
// dx = dy for x > 0, dy alpha e^x otherwise
Tensor elu_backward(const Tensor& dy, const Tensor& x, double alpha) {
  check_finite(alpha, "alpha", "elu_backward");
  return backward_map(dy, x, "elu_backward", [alpha](auto g, auto v) {
    using T = decltype(v);
    return v > 0 ? g : static_cast<T>(g * T(alpha) * std::exp(v));
  });
}

}  // namespace mg
