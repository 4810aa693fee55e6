// The functions neural nets are built from. Softmax and layer norm are fused: one forward kernel,
// and a backward written as one rule instead of the chain of small ops the composition would record.
#include "minigrad/autograd/ops/nn_functional.h"

#include <cmath>

#include "minigrad/autograd/autocast.h"
#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/autograd/ops/reduce.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops.h"

namespace mg {
namespace record_impl {
// log_softmax's node for an output `y` already computed (by cross_entropy's kernel: how its rule
// under create_graph reaches the logits through log_softmax's rule); declared where it is used.
Variable record_log_softmax(const Variable& x, Tensor y, int64_t dim);
}  // namespace record_impl

// y = softmax(x) along dim
// dx = y * (dy - sum(dy * y, dim))       (the Jacobian diag(y) - y y^T applied to dy)
Variable softmax(const Variable& x, int64_t dim) {
  return record("softmax", mg::softmax(x.data(), dim), {x}, keep(kOutput),
                [dim]<class V>(const V& dy, const Saved<V, 1>& s, const Node&) -> Grads<V> {
                  const V& y = s[0];
                  const int64_t d = y.dim() == 0 ? 0 : wrap_dim(dim, y.dim(), "softmax");
                  const V dot = y.dim() == 0 ? dy * y : mg::sum(dy * y, {d}, true);
                  return {y * (dy - dot)};
                });
}

// y = x - logsumexp(x) along dim
// dx = dy - softmax(x) * sum(dy, dim) = dy - exp(y) * sum(dy, dim)
Variable log_softmax(const Variable& x, int64_t dim) {
  return record_impl::record_log_softmax(x, mg::log_softmax(x.data(), dim), dim);
}

Variable record_impl::record_log_softmax(const Variable& x, Tensor y, int64_t dim) {
  return record("log_softmax", std::move(y), {x}, keep(kOutput),
                [dim]<class V>(const V& dy, const Saved<V, 1>& s, const Node&) -> Grads<V> {
                  const V& y = s[0];
                  const int64_t d = y.dim() == 0 ? 0 : wrap_dim(dim, y.dim(), "log_softmax");
                  const V sum = y.dim() == 0 ? dy : mg::sum(dy, {d}, true);
                  return {dy - mg::exp(widened(y)) * sum};  // (exp of a bfloat16 y would round it)
                });
}

namespace {
// layer_norm's backward in differentiable ops (its rule under create_graph), xhat recomputed from x:
//   dx = rstd (g - mean(g) - xhat mean(g xhat)),  g = dy w      dw = dy xhat      db = dy
// (dw and db in x's shape: the engine sums them over the leading dims).
VariableList layer_norm_graph_backward(const Variable& dy, const Variable& x, const Variable& w, size_t norm_dims,
                                       double eps, const Node& n) {
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - static_cast<int64_t>(norm_dims); d < x.dim(); ++d) dims.push_back(d);
  const Variable xc = x - mean(x, dims, true);
  const Variable rstd = pow(mean(xc * xc, dims, true) + eps, -0.5);
  const Variable xhat = xc * rstd;
  const Variable g = w.defined() ? dy * w : dy;
  return {rstd * (g - mean(g, dims, true) - xhat * mean(g * xhat, dims, true)), n.needs(1) ? dy * xhat : Variable(),
          n.needs(2) ? dy : Variable()};
}
}  // namespace

// Per row r (the normalized dims flattened to N):   xhat = (x - mean_r) * rstd_r
//   y = xhat * w + b                    x: (..., N)  w, b: (N)  mean, rstd: (...)
// With g = dy * w:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      (means over the row)
//   dw = sum over rows of dy * xhat     db = sum over rows of dy
// The backward is one kernel; under create_graph, the same formulas in recorded ops.
Variable layer_norm(const Variable& x16, const Shape& normalized_shape, const Variable& weight, const Variable& bias,
                    double eps) {
  const Variable x = autocast_float32(x16);  // (itself but for a bfloat16 value under autocast)
  const Tensor w = weight.defined() ? weight.data() : Tensor(), b = bias.defined() ? bias.data() : Tensor();
  // under autocast the output's bfloat16 copy is made with it: the next product's operand
  LayerNormForward f = layer_norm_forward(x.data(), normalized_shape, w, b, eps, AutocastMode::is_enabled());
  LambdaNode::Backward fused = [x = x.data(), w, mean = f.mean, rstd = f.rstd, norm = normalized_shape](
                                   const Tensor& dy, const Node& n) -> TensorList {
    LayerNormGrads g = layer_norm_backward(dy, x, w, mean, rstd, norm, n.needs(1), n.needs(2));
    return {g.dx, g.dweight, g.dbias};
  };
  return record_fused(
      "layer_norm", f.y, {x, weight, bias}, keep(0, 1), std::move(fused),
      [k = normalized_shape.size(), eps](const Variable& dy, const Saved<Variable, 2>& s, const Node& n) {
        return layer_norm_graph_backward(dy, s[0], s[1], k, eps, n);
      });
}

namespace {
// rms_norm's backward in differentiable ops (its rule under create_graph), rstd recomputed from x:
//   dx = rstd (g - xhat mean(g xhat)),  g = dy w      dw = dy xhat (x's shape: the engine sums it)
VariableList rms_norm_graph_backward(const Variable& dy, const Variable& x, const Variable& w, size_t norm_dims,
                                     double eps, const Node& n) {
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - static_cast<int64_t>(norm_dims); d < x.dim(); ++d) dims.push_back(d);
  const Variable rstd = pow(mean(x * x, dims, true) + eps, -0.5);
  const Variable xhat = x * rstd;
  const Variable g = w.defined() ? dy * w : dy;
  return {rstd * (g - xhat * mean(g * xhat, dims, true)), n.needs(1) ? dy * xhat : Variable()};
}
}  // namespace

// Per row r: rstd_r = 1 / sqrt(mean(x_r^2) + eps), y = x * rstd * w. The backward is one kernel
// (tensor/ops/nn_functional.cpp); under create_graph, the same formulas in recorded ops.
Variable rms_norm(const Variable& x16, const Shape& normalized_shape, const Variable& weight,
                  std::optional<double> eps) {
  const Variable x = autocast_float32(x16);
  const Tensor w = weight.defined() ? weight.data() : Tensor();
  RMSNormForward f = rms_norm_forward(x.data(), normalized_shape, w, eps);
  LambdaNode::Backward fused = [x = x.data(), w, rstd = f.rstd, norm = normalized_shape](const Tensor& dy,
                                                                                         const Node& n) -> TensorList {
    RMSNormGrads g = rms_norm_backward(dy, x, w, rstd, norm, n.needs(1));
    return {g.dx, g.dweight};
  };
  return record_fused("rms_norm", f.y, {x, weight}, keep(0, 1), std::move(fused),
                      [k = normalized_shape.size(), e = rms_norm_eps(eps, x.dtype())](
                          const Variable& dy, const Saved<Variable, 2>& s, const Node& n) {
                        return rms_norm_graph_backward(dy, s[0], s[1], k, e, n);
                      });
}

namespace {
// (1, C, 1, ..., 1): a per-channel tensor's shape against x (N, C, *)
Shape channel_shape(const Variable& x) {
  Shape s(x.dim(), 1);
  s[1] = x.size(1);
  return s;
}
// The checks batch_norm and group_norm make before they call layer_norm, mul and add: a floating
// input, and weight and bias (C,) of its dtype, named in the op's own terms.
void check_channel_norm(const Variable& x, const Variable& weight, const Variable& bias, std::string_view op) {
  MG_CHECK(x.defined(), StateError, "{}: the input is undefined", op);
  MG_CHECK(is_floating(x.dtype()), DTypeError, "{}: expected a floating input, got {} {}", op, dtype_name(x.dtype()),
           shape_str(x.shape()));
  MG_CHECK(x.dim() >= 2, ShapeError, "{}: expected input (N, C, *), got shape {}", op, shape_str(x.shape()));
  for (const Variable* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    const char* what = p == &weight ? "weight" : "bias";
    MG_CHECK(p->dtype() == x.dtype(), DTypeError, "{}: {} is {} but the input is {}", op, what, dtype_name(p->dtype()),
             dtype_name(x.dtype()));
    MG_CHECK(p->shape() == Shape{x.size(1)}, ShapeError, "{}: {} has shape {} but the input has {} channels", op, what,
             shape_str(p->shape()), x.size(1));
  }
}
// y * w + b per channel, each when defined
Variable channel_affine(const Variable& y, const Variable& weight, const Variable& bias, std::string_view op) {
  const int64_t C = y.size(1);
  for (const Variable* p : {&weight, &bias})
    MG_CHECK(!p->defined() || p->shape() == Shape{C}, ShapeError, "{}: {} has shape {} but the input has {} channels",
             op, p == &weight ? "weight" : "bias", shape_str(p->shape()), C);
  Variable out = weight.defined() ? y * reshape(weight, channel_shape(y)) : y;
  return bias.defined() ? out + reshape(bias, channel_shape(y)) : out;
}
}  // namespace

// Training: batch norm is layer norm turned sideways. With x moved to (C, N * S), each channel is
// a row, and layer_norm's rule (above) normalizes it and gives its gradient:
//   xhat = (x - mean_c) * rstd_c,  mean and biased var over N and the trailing dims S
// Evaluation: y = (x - running_mean) / sqrt(running_var + eps), constants per channel, so
//   dx = dy / sqrt(running_var + eps)
// Then y * w + b per channel (dw, db: dy * xhat and dy summed over everything but C).
Variable batch_norm(const Variable& x16, const Tensor& running_mean, const Tensor& running_var, const Variable& weight,
                    const Variable& bias, bool training, double momentum, double eps) {
  const OpScope scope("batch_norm");
  const Variable x = autocast_float32(x16);  // (itself but for a bfloat16 value under autocast)
  check_channel_norm(x, weight, bias, "batch_norm");
  MG_CHECK(running_mean.defined() == running_var.defined(), StateError,
           "batch_norm: running_mean and running_var must both be defined or both undefined");
  MG_CHECK(eps >= 0 && std::isfinite(eps), ValueError, "batch_norm: eps must be finite and >= 0, got {}", eps);
  const int64_t C = x.size(1);
  for (const Tensor* r : {&running_mean, &running_var})
    MG_CHECK(!r->defined() || is_floating(r->dtype()), DTypeError,
             "batch_norm: {} is {}; running statistics must be floating",
             r == &running_mean ? "running_mean" : "running_var", dtype_name(r->dtype()));
  for (const Tensor* r : {&running_mean, &running_var})
    MG_CHECK(!r->defined() || r->shape() == Shape{C}, ShapeError,
             "batch_norm: {} has shape {} ({}) but the input has {} channels (a floating (C,) tensor expected)",
             r == &running_mean ? "running_mean" : "running_var", shape_str(r->shape()), dtype_name(r->dtype()), C);
  for (const Tensor* r : {&running_mean, &running_var})
    MG_CHECK(
        !training || !r->defined() || !has_internal_overlap(*r), ValueError,
        "batch_norm: {} {} (strides {}) has elements that share memory (an expanded view), so it cannot be updated in "
        "place; pass a tensor of its own (.contiguous())",
        r == &running_mean ? "running_mean" : "running_var", shape_str(r->shape()), shape_str(r->strides()));
  const bool batch_stats = training || !running_mean.defined();
  Variable y;
  if (batch_stats) {
    const int64_t M = C == 0 ? 0 : x.numel() / C;  // values per channel
    MG_CHECK(M > 1 || !training, ValueError,
             "batch_norm: expected more than 1 value per channel when training, got input {}", shape_str(x.shape()));
    MG_CHECK(M > 0, ValueError, "batch_norm: no values per channel to take statistics of, input {}",
             shape_str(x.shape()));
    const Variable rows = reshape(transpose(x, 0, 1), {C, M});  // (C, N * S)
    Shape moved = x.shape();
    std::swap(moved[0], moved[1]);
    y = transpose(reshape(layer_norm(rows, {M}, Variable(), Variable(), eps), moved), 0, 1);
    if (training && running_mean.defined()) {
      MG_CHECK(momentum >= 0 && momentum <= 1, ValueError, "batch_norm: momentum must be in [0, 1], got {}", momentum);
      const Tensor r = rows.data();
      const Tensor mean = mg::mean(r, {1}).to(running_mean.dtype()), var = mg::var(r, {1}, 1).to(running_var.dtype());
      running_mean.copy_(running_mean * (1 - momentum) + mean * momentum);
      running_var.copy_(running_var * (1 - momentum) + var * momentum);
    }
  } else {
    const Shape cs = channel_shape(x);
    const Tensor rm = running_mean.to(x.dtype()).reshape(cs);
    const Tensor v = running_var.to(x.dtype()) + eps;
    const Tensor scale = (ones_like(v) / mg::sqrt(v)).reshape(cs);  // 1 / sqrt(var + eps), as PyTorch
    y = (x - Variable(rm)) * Variable(scale);
  }
  return channel_affine(y, weight, bias, "batch_norm");
}

// Per sample n and group g (C / G channels and the trailing dims S, flattened to a row of
// M = C / G * S):  xhat = (x - mean_ng) * rstd_ng  by layer_norm's rule; then y = xhat * w_c + b_c.
Variable group_norm(const Variable& x16, int64_t num_groups, const Variable& weight, const Variable& bias, double eps) {
  const OpScope scope("group_norm");
  const Variable x = autocast_float32(x16);
  check_channel_norm(x, weight, bias, "group_norm");
  MG_CHECK(num_groups >= 1 && x.size(1) % num_groups == 0, ValueError,
           "group_norm: num_groups must be >= 1 and divide the {} channels, got {}", x.size(1), num_groups);
  MG_CHECK(eps >= 0 && std::isfinite(eps), ValueError, "group_norm: eps must be finite and >= 0, got {}", eps);
  const int64_t N = x.size(0), M = x.size(1) / num_groups * numel_of(Shape(x.shape().begin() + 2, x.shape().end()));
  const Variable rows = reshape(x, {N, num_groups, M});
  return channel_affine(reshape(layer_norm(rows, {M}, Variable(), Variable(), eps), x.shape()), weight, bias,
                        "group_norm");
}

// y = x * m / (1 - p), m ~ Bernoulli(1 - p)      dx = dy * m / (1 - p)
// The mask is in x's dtype, as PyTorch's: for a bfloat16 x, 0 or 1 / (1 - p) (1 divided by
// float32(1 - p), rounded to bfloat16), and y is bfloat16 (its gradient float32); the same draws,
// so the same elements dropped, as float32's.
Variable dropout(const Variable& x, double p, bool training, Generator& gen) {
  MG_CHECK(p >= 0 && p <= 1, ValueError, "dropout: probability must be in [0, 1], got {}", p);
  if (!training || p == 0) return x;
  Tensor mask = p == 1 ? zeros(x.shape(), x.dtype()) : bernoulli(x.shape(), 1 - p, gen, x.dtype()) / (1 - p);
  return record("dropout", mg::mul(x.data(), mask), {x}, keep(),
                [mask]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> { return {dy * V(mask)}; });
}

// y = x / max(n, eps),  n = (sum over dim |x|^p)^(1/p). Rows whose sum is 0 take n = 0 through a
// where(), so no 0^(1/p - 1) (infinite) derivative is ever formed: their gradient is 0, as PyTorch's.
Variable normalize(const Variable& x, double p, int64_t dim, double eps) {
  const OpScope scope("normalize");
  MG_CHECK(x.defined(), StateError, "normalize: the input is undefined");
  MG_CHECK(std::isfinite(p) && p > 0, ValueError, "normalize: p must be finite and positive, got {}", p);
  MG_CHECK(std::isfinite(eps) && eps >= 0, ValueError, "normalize: eps must be finite and >= 0, got {}", eps);
  const int64_t d = wrap_dim(dim, x.dim(), "normalize");
  const Variable s = p == 2 ? sum(x * x, {d}, true) : sum(pow(abs(x), p), {d}, true);
  const Tensor zero = eq(s.data(), zeros({}, s.dtype()));
  const Variable safe = where(zero, Variable(ones({}, s.dtype())), s);  // 1 where the row is all zeros
  Variable n = p == 2 ? sqrt(safe) : pow(safe, 1 / p);
  n = where(zero, Variable(zeros({}, s.dtype())), n);
  return x / clamp(n, eps);
}

// cos = sum over dim of (x1 / max(||x1||, eps)) (x2 / max(||x2||, eps))
Variable cosine_similarity(const Variable& x1, const Variable& x2, int64_t dim, double eps) {
  const OpScope scope("cosine_similarity");
  MG_CHECK(x1.defined() && x2.defined(), StateError, "cosine_similarity: an operand is undefined");
  const Shape shape = broadcast_shapes(x1.shape(), x2.shape(), "cosine_similarity");
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(shape.size()), "cosine_similarity");
  const Variable a = x1.expand(shape), b = x2.expand(shape);
  return sum(normalize(a, 2, d, eps) * normalize(b, 2, d, eps), {d});
}
}  // namespace mg
