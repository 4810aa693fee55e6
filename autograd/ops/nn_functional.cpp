// The functions neural nets are built from. Softmax and layer norm are fused: one forward kernel,
// and a backward written as one rule instead of the chain of small ops the composition would record.
#include "autograd/ops/nn_functional.h"

#include "tensor/ops.h"

namespace mg {

// y = softmax(x) along dim
// dx = y * (dy - sum(dy * y, dim))       (the Jacobian diag(y) - y y^T applied to dy)
Variable softmax(const Variable& x, int64_t dim) {
  Tensor y = mg::softmax(x.data(), dim);
  return record("softmax", y, {x}, [y, dim](const Tensor& dy, const Node&) -> TensorList {
    const int64_t d = y.dim() == 0 ? 0 : wrap_dim(dim, y.dim(), "softmax");
    Tensor dot = y.dim() == 0 ? dy * y : mg::sum(dy * y, {d}, true);
    return {y * (dy - dot)};
  });
}

// y = x - logsumexp(x) along dim
// dx = dy - softmax(x) * sum(dy, dim) = dy - exp(y) * sum(dy, dim)
Variable log_softmax(const Variable& x, int64_t dim) {
  Tensor y = mg::log_softmax(x.data(), dim);
  return record("log_softmax", y, {x}, [y, dim](const Tensor& dy, const Node&) -> TensorList {
    const int64_t d = y.dim() == 0 ? 0 : wrap_dim(dim, y.dim(), "log_softmax");
    Tensor s = y.dim() == 0 ? dy : mg::sum(dy, {d}, true);
    return {dy - mg::exp(y) * s};
  });
}

// Per row r (the normalized dims flattened to N):   xhat = (x - mean_r) * rstd_r
//   y = xhat * w + b                    x: (..., N)  w, b: (N)  mean, rstd: (...)
// With g = dy * w:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      (means over the row)
//   dw = sum over rows of dy * xhat     db = sum over rows of dy
Variable layer_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight,
                    const Variable& bias, double eps) {
  const Tensor w = weight.defined() ? weight.data() : Tensor(), b = bias.defined() ? bias.data() : Tensor();
  LayerNormForward f = layer_norm_forward(x.data(), normalized_shape, w, b, eps);
  std::vector<Variable> inputs{x};
  if (weight.defined()) inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  const bool has_w = weight.defined(), has_b = bias.defined();
  return record("layer_norm", f.y, inputs,
                [x = x.data(), w, mean = f.mean, rstd = f.rstd, has_w, has_b, norm = normalized_shape](
                    const Tensor& dy, const Node& n) -> TensorList {
                  const size_t ib = has_w ? 2 : 1;  // the bias's input slot
                  LayerNormGrads g = layer_norm_backward(dy, x, w, mean, rstd, norm, has_w && n.needs(1), has_b && n.needs(ib));
                  TensorList out{g.dx};
                  if (has_w) out.push_back(g.dweight);
                  if (has_b) out.push_back(g.dbias);
                  return out;
                });
}

// y = x * m / (1 - p), m ~ Bernoulli(1 - p)      dx = dy * m / (1 - p)
Variable dropout(const Variable& x, double p, bool training, Generator& gen) {
  MG_CHECK(p >= 0 && p <= 1, ValueError, "dropout: probability must be in [0, 1], got {}", p);
  if (!training || p == 0) return x;
  Tensor mask = p == 1 ? zeros(x.shape(), x.dtype()) : bernoulli(x.shape(), 1 - p, gen, x.dtype()) / (1 - p);
  return record("dropout", mg::mul(x.data(), mask), {x}, [mask](const Tensor& dy, const Node&) -> TensorList {
    return {dy * mask};
  });
}

}  // namespace mg
