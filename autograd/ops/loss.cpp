// Losses. Cross-entropy, nll, the binary cross-entropies and KL divergence are fused ops with
// kernels of their own (tensor/ops/loss.cpp); mse, l1, smooth l1 and huber are composed of
// differentiable ops, so their gradients come out of the chain rule.
#include "minigrad/autograd/ops/loss.h"
#include "minigrad/autograd/autocast.h"

#include <cmath>

#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/autograd/ops/nn_functional.h"
#include "minigrad/autograd/ops/reduce.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops.h"
#include "minigrad/tensor/ops/elementwise.h"

namespace mg {
namespace record_impl {
// log_softmax's node for log-probabilities already computed (autograd/ops/nn_functional.cpp).
Variable record_log_softmax(const Variable& x, Tensor y, int64_t dim);
}  // namespace record_impl
namespace {
// One (C) sample with a 0-dim target as a batch of one (N = 1), and the loss back to its shape.
template <class F>
Variable as_batch_of_one(const Variable& input, const Tensor& targets, Reduction reduction, const char* op, F f) {
  MG_CHECK(targets.defined() && targets.dim() == 0, ShapeError,
           "{}: input of shape {} needs a 0-dim target, got shape {}", op, shape_str(input.shape()),
           targets.defined() ? shape_str(targets.shape()) : "undefined");
  Variable l = f(unsqueeze(input, 0), targets.reshape({1}));
  return reduction == Reduction::None ? reshape(l, {}) : l;
}

// The reduction of a composed pointwise loss.
Variable reduce(const Variable& losses, Reduction r, const char* op) {
  MG_CHECK(r != Reduction::BatchMean, ValueError, "{}: reduction BatchMean is kl_div's; use Mean, Sum or None", op);
  if (r == Reduction::None) return losses;
  return r == Reduction::Sum ? sum(losses) : mean(losses);
}

void check_same_shape(const Variable& input, const Variable& target, const char* op) {
  MG_CHECK(input.defined() && target.defined(), StateError, "{}: an operand is undefined", op);
  MG_CHECK(is_floating(input.dtype()) && input.dtype() == target.dtype(), DTypeError,
           "{}: input and target must be one floating dtype, got {} and {}", op, dtype_name(input.dtype()),
           dtype_name(target.dtype()));
  MG_CHECK(input.shape() == target.shape(), ShapeError, "{}: input {} and target {} must have the same shape", op,
           shape_str(input.shape()), shape_str(target.shape()));
}
}  // namespace

// loss_i = -sum_c q_ic log softmax(x_i)_c,  q_i = (1 - s) w[t_i] onehot(t_i) + (s / C) w
// dx_i = (sum_c q_ic) softmax(x_i) - q_i, times the reduction's factor; 0 for ignored rows
// Under create_graph the same formula in recorded ops, with the kernel's log-probabilities as the
// output of a log_softmax node on the logits (so no copy of the logits is kept) and the target
// weights q (times the factors) read from the kernel itself: run on log-probabilities of -inf
// (softmax 0) it returns exactly -q.
Variable cross_entropy(const Variable& logits16, const Tensor& targets, const CrossEntropyOptions& o) {
  const Variable logits = autocast_float32(logits16);  // (itself but for a bfloat16 value under autocast)
  if (logits.dim() == 1)
    return as_batch_of_one(logits, targets, o.reduction, "cross_entropy",
                           [&](const Variable& x, const Tensor& t) { return cross_entropy(x, t, o); });
  CrossEntropyForward f = cross_entropy_forward(logits.data(), targets, o);
  LambdaNode::Backward fused = [f, targets, o](const Tensor& dy, const Node&) -> TensorList {
    return {cross_entropy_backward(dy, targets, f, o)};
  };
  return record_fused("cross_entropy", f.loss, {logits}, keep(), std::move(fused),
                      [f, targets, o](const Variable& dy, const Saved<Variable, 0>&, const Node& n) -> VariableList {
                        const Variable logp = record_impl::record_log_softmax(
                            Variable::from_edge(f.log_probs, n.next[0]), f.log_probs, 1);
                        CrossEntropyForward none = f;
                        none.log_probs = full(f.log_probs.shape(), -INFINITY, f.log_probs.dtype());
                        const Tensor q = -cross_entropy_backward(ones_like(dy.data()), targets, none, o);
                        const Variable row = o.reduction == Reduction::None ? reshape(dy, {-1, 1}) : dy;
                        return {row * (Variable(mg::sum(q, {1}, true)) * exp(logp) - Variable(q))};
                      },
                      {targets});
}

// loss_i = -w[t_i] x[i, t_i]          dx[i, t_i] = -w[t_i] times the reduction's factor
Variable nll_loss(const Variable& input16, const Tensor& targets, const NLLLossOptions& o) {
  const Variable input = autocast_float32(input16);
  if (input.dim() == 1)
    return as_batch_of_one(input, targets, o.reduction, "nll_loss",
                           [&](const Variable& x, const Tensor& t) { return nll_loss(x, t, o); });
  return record("nll_loss", mg::nll_loss(input.data(), targets, o), {input}, keep(0),
                [targets, o]<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> {
                  return {nll_loss_backward(dy, x[0], targets, o)};
                },
                {targets});
}

// z = nll_loss's dx (linear in dy; x only gives the shape)     d(dy) = nll_loss(dz) (the adjoint)   dx = 0
Variable nll_loss_backward(const Variable& dy, const Variable& input, const Tensor& targets, const NLLLossOptions& o) {
  return record("nll_loss_backward", mg::nll_loss_backward(dy.data(), input.data(), targets, o), {dy, input}, keep(),
                [targets, o]<class V>(const V& dz, const Saved<V, 0>&, const Node& n) -> Grads<V> {
                  return {n.needs(0) ? nll_loss(dz, targets, o) : V(), V()};
                },
                {targets});
}

// loss = -w (t log x + (1 - t) log(1 - x))
// dx = w (x - t) / (x (1 - x))      dt = w (log(1 - x) - log x)
Variable binary_cross_entropy(const Variable& input16, const Variable& target16, const BCELossOptions& o) {
  const Variable input = autocast_float32(input16), target = autocast_float32(target16);
  check_same_shape(input, target, "binary_cross_entropy");
  return record("binary_cross_entropy", mg::binary_cross_entropy(input.data(), target.data(), o), {input, target},
                keep(0, 1), [x = input.data(), t = target.data(), o](const Tensor& dy, const Node&) -> TensorList {
                  auto [dx, dt] = binary_cross_entropy_backward(dy, x, t, o);
                  return {dx, dt};
                });
}

// loss = w ((1 - t) x + l softplus(-x)),  l = 1 + (pos_weight - 1) t
// dx = w (l sigmoid(x) - pos_weight t)      dt = w ((pos_weight - 1) softplus(-x) - x)
Variable binary_cross_entropy_with_logits(const Variable& input16, const Variable& target16,
                                          const BCEWithLogitsLossOptions& o) {
  const Variable input = autocast_float32(input16), target = autocast_float32(target16);
  check_same_shape(input, target, "binary_cross_entropy_with_logits");
  return record("binary_cross_entropy_with_logits",
                mg::binary_cross_entropy_with_logits(input.data(), target.data(), o), {input, target}, keep(0, 1),
                [x = input.data(), t = target.data(), o](const Tensor& dy, const Node&) -> TensorList {
                  auto [dx, dt] = binary_cross_entropy_with_logits_backward(dy, x, t, o);
                  return {dx, dt};
                });
}

// loss = t (log t - x)       dx = -t      dt = log t + 1 - x  (t > 0)
// log_target: loss = e^t (t - x)      dx = -e^t      dt = e^t (t + 1 - x)
Variable kl_div(const Variable& input16, const Variable& target16, const KLDivLossOptions& o) {
  const Variable input = autocast_float32(input16), target = autocast_float32(target16);
  check_same_shape(input, target, "kl_div");
  return record("kl_div", mg::kl_div(input.data(), target.data(), o), {input, target}, keep(0, 1),
                [x = input.data(), t = target.data(), o](const Tensor& dy, const Node&) -> TensorList {
                  auto [dx, dt] = kl_div_backward(dy, x, t, o);
                  return {dx, dt};
                });
}

// loss = (x - t)^2: through sub, pow and the reduction, d/dx = 2 (x - t) / n
Variable mse_loss(const Variable& input, const Variable& target, const LossOptions& o) {
  const OpScope scope("mse_loss");  // sub's, pow's and mean's errors name mse_loss
  const Variable x = autocast_float32(input), t = autocast_float32(target);
  check_same_shape(x, t, "mse_loss");
  return reduce(pow(sub(x, t), 2.0), o.reduction, "mse_loss");
}

// loss = |x - t|: d/dx = sign(x - t) (0 at 0, as PyTorch's)
Variable l1_loss(const Variable& input16, const Variable& target16, const LossOptions& o) {
  const OpScope scope("l1_loss");  // sub's, pow's and mean's errors name l1_loss
  const Variable input = autocast_float32(input16), target = autocast_float32(target16);
  check_same_shape(input, target, "l1_loss");
  return reduce(abs(sub(input, target)), o.reduction, "l1_loss");
}

// d = x - t:  0.5 d^2 / beta  where |d| < beta,  |d| - 0.5 beta  beyond     d/dx = d / beta, or sign(d)
Variable smooth_l1_loss(const Variable& input16, const Variable& target16, const SmoothL1LossOptions& o) {
  const OpScope scope("smooth_l1_loss");
  const Variable input = autocast_float32(input16), target = autocast_float32(target16);
  check_same_shape(input, target, "smooth_l1_loss");
  MG_CHECK(o.beta >= 0 && std::isfinite(o.beta), ValueError, "smooth_l1_loss: beta must be finite and >= 0, got {}",
           o.beta);
  if (o.beta == 0) return l1_loss(input, target, {o.reduction});  // PyTorch's own special case: no quadratic part
  const Variable d = sub(input, target), a = abs(d);
  const Tensor quadratic = lt(a.data(), scalar_tensor(o.beta, a.dtype()));
  return reduce(where(quadratic, pow(d, 2.0) * (0.5 / o.beta), a - 0.5 * o.beta), o.reduction, "smooth_l1_loss");
}

// d = x - t:  0.5 d^2  where |d| <= delta,  delta (|d| - 0.5 delta)  beyond     d/dx = d, or delta sign(d)
Variable huber_loss(const Variable& input16, const Variable& target16, const HuberLossOptions& o) {
  const OpScope scope("huber_loss");
  const Variable input = autocast_float32(input16), target = autocast_float32(target16);
  check_same_shape(input, target, "huber_loss");
  MG_CHECK(o.delta > 0 && std::isfinite(o.delta), ValueError, "huber_loss: delta must be finite and > 0, got {}",
           o.delta);
  const Variable d = sub(input, target), a = abs(d);
  const Tensor quadratic = le(a.data(), scalar_tensor(o.delta, a.dtype()));
  return reduce(where(quadratic, pow(d, 2.0) * 0.5, (a - 0.5 * o.delta) * o.delta), o.reduction, "huber_loss");
}

}  // namespace mg
