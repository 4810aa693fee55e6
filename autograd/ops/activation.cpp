// Activation functions. Each rule calls the derivative kernel of tensor/ops/activation.cpp.
#include "minigrad/autograd/ops/activation.h"

#include "minigrad/tensor/ops/activation.h"

namespace mg {

// y = max(x, 0)        dx = dy where x > 0, else 0
Variable relu(const Variable& x) {
  return record("relu", mg::relu(x.data()), {x},
                [x = x.data()](const Tensor& dy, const Node&) -> TensorList { return {relu_backward(dy, x)}; });
}

// erf form:  y = x Phi(x)                  dx = dy * (Phi(x) + x phi(x)),   phi = Phi' the normal density
// tanh form: y = x/2 (1 + tanh u),  u = c (x + 0.044715 x^3),  c = sqrt(2/pi)
//            dx = dy * ((1 + tanh u) / 2 + x/2 (1 - tanh^2 u) c (1 + 3 * 0.044715 x^2))
Variable gelu(const Variable& x, const std::string& approximate) {
  Tensor y = mg::gelu(x.data(), approximate);
  return record(approximate == "tanh" ? "gelu_tanh" : "gelu", y, {x},
                [x = x.data(), approximate](const Tensor& dy, const Node&) -> TensorList {
                  return {gelu_backward(dy, x, approximate)};
                });
}

// y = x s, s = sigmoid(x)          dx = dy s (1 + x (1 - s))
Variable silu(const Variable& x) {
  return record("silu", mg::silu(x.data()), {x},
                [x = x.data()](const Tensor& dy, const Node&) -> TensorList { return {silu_backward(dy, x)}; });
}

// y = log(1 + e^(b x)) / b         dx = dy sigmoid(b x)       (y = x, dx = dy where b x > threshold)
Variable softplus(const Variable& x, double beta, double threshold) {
  return record("softplus", mg::softplus(x.data(), beta, threshold), {x},
                [x = x.data(), beta, threshold](const Tensor& dy, const Node&) -> TensorList {
                  return {softplus_backward(dy, x, beta, threshold)};
                });
}

// y = x (x > 0), s x otherwise     dx = dy (x > 0), s dy otherwise
Variable leaky_relu(const Variable& x, double negative_slope) {
  return record("leaky_relu", mg::leaky_relu(x.data(), negative_slope), {x},
                [x = x.data(), negative_slope](const Tensor& dy, const Node&) -> TensorList {
                  return {leaky_relu_backward(dy, x, negative_slope)};
                });
}

// y = x (x > 0), a (e^x - 1) otherwise     dx = dy (x > 0), dy a e^x otherwise
Variable elu(const Variable& x, double alpha) {
  return record(
      "elu", mg::elu(x.data(), alpha), {x},
      [x = x.data(), alpha](const Tensor& dy, const Node&) -> TensorList { return {elu_backward(dy, x, alpha)}; });
}

}  // namespace mg
