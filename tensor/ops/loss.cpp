// Loss kernels. Cross-entropy is fused with log_softmax: the forward keeps the log-probabilities,
// and the backward turns them into softmax - target in one pass over the rows. The pointwise
// losses (binary cross-entropy, with logits, KL divergence) compute per-element losses, then
// reduce_loss; their backwards give the gradient of input and target in one pass.
#include "minigrad/tensor/ops/loss.h"

#include <cmath>

#include "minigrad/tensor/fastmath.h"
#include "minigrad/tensor/loops.h"
#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/nn_functional.h"
#include "minigrad/tensor/ops/reduce.h"
#include "minigrad/tensor/parallel.h"

namespace mg {
namespace {
// Targets (N) int64 within [0, C) or equal to ignore_index; the weight (C) of logits' dtype.
void check_class_targets(const Tensor& scores, const Tensor& targets, const Tensor& weight, int64_t ignore_index,
                         std::string_view op) {
  MG_CHECK(scores.defined(), StateError, "{}: the input is undefined", op);
  MG_CHECK(is_floating(scores.dtype()), DTypeError, "{}: the input must be floating (float32 or float64), got {}", op,
           dtype_name(scores.dtype()));
  MG_CHECK(targets.defined() && targets.dtype() == DType::Int64, DTypeError,
           "{}: targets must be an int64 tensor of class indices, got {}", op,
           targets.defined() ? dtype_name(targets.dtype()) : "undefined");
  MG_CHECK(scores.dim() == 2 && targets.dim() == 1 && targets.size(0) == scores.size(0), ShapeError,
           "{}: expected input (N, C) and targets (N,), got input {} and targets {} "
           "(hint: flatten a (B, T, C) batch with reshape({{-1, C}}))",
           op, shape_str(scores.shape()), shape_str(targets.shape()));
  const int64_t N = scores.size(0), C = scores.size(1);
  if (weight.defined()) {
    MG_CHECK(weight.shape() == Shape{C}, ShapeError, "{}: weight must be (C,) = ({},), got {}", op, C,
             shape_str(weight.shape()));
    MG_CHECK(weight.dtype() == scores.dtype(), DTypeError, "{}: weight is {} but the input is {}", op,
             dtype_name(weight.dtype()), dtype_name(scores.dtype()));
  }
  const Tensor t = targets.contiguous();
  const int64_t* pt = t.data<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    MG_CHECK(pt[i] == ignore_index || (pt[i] >= 0 && pt[i] < C), IndexError,
             "{}: target {} at position {} is out of range for {} classes (expected 0 to {}, or ignore_index {})", op,
             pt[i], i, C, C - 1, ignore_index);
}

// Per row: the weight of its target (0 when ignored); the sum of those over the counted rows.
std::vector<double> target_weights(const Tensor& targets, const Tensor& weight, int64_t ignore_index) {
  const Tensor t = targets.contiguous(), w = weight.defined() ? weight.to(DType::Float64).contiguous() : Tensor();
  const int64_t* pt = t.data<int64_t>();
  std::vector<double> out(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    out[i] = pt[i] == ignore_index ? 0 : (w.defined() ? w.data<double>()[pt[i]] : 1.0);
  return out;
}

void check_reduction(Reduction r, std::string_view op) {
  MG_CHECK(r != Reduction::BatchMean, ValueError, "{}: reduction BatchMean is kl_div's; use Mean, Sum or None", op);
}

// The per-row factor a reduction puts on row i's loss: dloss / denominator (Mean), dloss (Sum),
// dloss_i (None), for a contiguous dloss.
template <class T>
T row_factor(const T* g, int64_t i, Reduction r, double denominator) {
  return r == Reduction::None ? g[i] : r == Reduction::Sum ? g[0] : static_cast<T>(g[0] / denominator);
}

// A pointwise loss's operands: input and target of one shape and floating dtype, an optional
// weight that broadcasts to them.
void check_pointwise(const Tensor& input, const Tensor& target, const Tensor& weight, std::string_view op) {
  MG_CHECK(input.defined() && target.defined(), StateError, "{}: an operand is undefined", op);
  MG_CHECK(is_floating(input.dtype()) && target.dtype() == input.dtype(), DTypeError,
           "{}: input and target must have one floating dtype, got {} and {}", op, dtype_name(input.dtype()),
           dtype_name(target.dtype()));
  MG_CHECK(input.shape() == target.shape(), ShapeError, "{}: input {} and target {} must have the same shape", op,
           shape_str(input.shape()), shape_str(target.shape()));
  if (weight.defined()) {
    MG_CHECK(weight.dtype() == input.dtype(), DTypeError, "{}: weight is {} but the input is {}", op,
             dtype_name(weight.dtype()), dtype_name(input.dtype()));
    MG_CHECK(broadcast_shapes(input.shape(), weight.shape(), op) == input.shape(), ShapeError,
             "{}: weight {} does not broadcast to the input {}", op, shape_str(weight.shape()),
             shape_str(input.shape()));
  }
}
}  // namespace

// ---------------------------------------------------------------- reductions of pointwise losses

Tensor reduce_loss(const Tensor& losses, Reduction reduction, std::string_view op) {
  switch (reduction) {
    case Reduction::None:
      return losses;
    case Reduction::Sum:
      return sum(losses);
    case Reduction::Mean:
      return mean(losses);  // an empty tensor's mean is 0/0 = NaN, as torch's
    case Reduction::BatchMean:
      MG_CHECK(losses.dim() >= 1, ShapeError, "{}: BatchMean needs a batch dim, got shape {}", op,
               shape_str(losses.shape()));
      return sum(losses) / static_cast<double>(losses.size(0));
  }
  return losses;
}

Tensor reduce_loss_backward(const Tensor& dloss, const Shape& shape, Reduction reduction) {
  switch (reduction) {
    case Reduction::None:
      return dloss;
    case Reduction::Sum:
      return dloss.expand(shape);
    case Reduction::Mean:
      return (dloss / static_cast<double>(numel_of(shape))).expand(shape);
    case Reduction::BatchMean:
      return (dloss / static_cast<double>(shape.empty() ? 1 : shape[0])).expand(shape);
  }
  return dloss;
}

// ---------------------------------------------------------------- cross-entropy

// logp_i = log_softmax(x_i)                          x: (N, C)   t: (N) int64   loss: () or (N)
// loss_i = (1 - s) w[t_i] (-logp_i[t_i]) + (s / C) sum_c w_c (-logp_i[c])       (0 for ignored rows)
// Mean: the sum divided by sum_i w[t_i] over the counted rows (their count without a weight),
// both terms alike, as PyTorch 1.13 does.
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& o) {
  check_class_targets(logits, targets, o.weight, o.ignore_index, "cross_entropy");
  check_reduction(o.reduction, "cross_entropy");
  MG_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1, ValueError,
           "cross_entropy: label_smoothing must be in [0, 1], got {}", o.label_smoothing);
  const int64_t N = logits.size(0), C = logits.size(1);
  const Tensor lp = log_softmax(logits, 1);  // (N, C)
  const std::vector<double> tw = target_weights(targets, o.weight, o.ignore_index);
  const Tensor t = targets.contiguous(), w = o.weight.defined() ? o.weight.to(DType::Float64).contiguous() : Tensor();
  double weight_sum = 0;
  for (double v : tw) weight_sum += v;
  const double s = o.label_smoothing;
  Tensor losses = zeros({N}, lp.dtype());
  visit_float(lp.dtype(), "cross_entropy", [&]<class T>() {
    const T* p = lp.data<T>();
    const int64_t* pt = t.data<int64_t>();
    T* out = losses.data<T>();
    for (int64_t i = 0; i < N; ++i) {
      if (pt[i] == o.ignore_index) continue;
      double smooth = 0;
      if (s > 0)
        for (int64_t c = 0; c < C; ++c) smooth -= (w.defined() ? w.data<double>()[c] : 1.0) * p[i * C + c];
      const double nll = -tw[i] * p[i * C + pt[i]];
      out[i] = static_cast<T>((1 - s) * nll + (s / C) * smooth);
    }
  });
  Tensor loss;
  if (o.reduction == Reduction::None)
    loss = losses;
  else if (o.reduction == Reduction::Sum)
    loss = sum(losses);
  else
    loss = sum(losses) / weight_sum;  // 0/0 = NaN when nothing counts, as torch
  return {loss, lp, weight_sum};
}

// Per row i, with q_ic = ((1 - s) w[t_i] [c = t_i] + (s / C) w_c) f_i, f_i the reduction's
// factor (dloss over the denominator, dloss, or dloss_i):
//   dx_ic = (sum_c q_ic) softmax_ic - q_ic          (0 for ignored rows)
// dloss: () or (N)   log_probs, dx: (N, C)   t: (N)
Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& targets, const CrossEntropyForward& fwd,
                              const CrossEntropyOptions& o) {
  MG_CHECK(dloss.defined() && fwd.log_probs.defined(), StateError, "cross_entropy_backward: an operand is undefined");
  check_class_targets(fwd.log_probs, targets, o.weight, o.ignore_index, "cross_entropy_backward");
  check_reduction(o.reduction, "cross_entropy_backward");
  const int64_t N = fwd.log_probs.size(0), C = fwd.log_probs.size(1);
  const Shape want = o.reduction == Reduction::None ? Shape{N} : Shape{};
  MG_CHECK(dloss.shape() == want, ShapeError, "cross_entropy_backward: dloss has shape {} but this reduction needs {}",
           shape_str(dloss.shape()), shape_str(want));
  MG_CHECK(dloss.dtype() == fwd.log_probs.dtype(), DTypeError,
           "cross_entropy_backward: dloss is {} and log_probs {}; both must be the same floating dtype",
           dtype_name(dloss.dtype()), dtype_name(fwd.log_probs.dtype()));
  Tensor dx = exp(fwd.log_probs);  // softmax
  const Tensor g = dloss.contiguous(), t = targets.contiguous();
  const Tensor w = o.weight.defined() ? o.weight.to(DType::Float64).contiguous() : Tensor();
  const std::vector<double> tw = target_weights(targets, o.weight, o.ignore_index);
  const double s = o.label_smoothing;
  double w_total = 0;  // sum_c w_c
  for (int64_t c = 0; c < C; ++c) w_total += w.defined() ? w.data<double>()[c] : 1.0;
  visit_float(dx.dtype(), "cross_entropy_backward", [&]<class T>() {
    T* d = dx.data<T>();
    const T* pg = g.data<T>();
    const int64_t* pt = t.data<int64_t>();
    parallel_for(0, N, grain_for(C), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        T* row = d + i * C;
        if (pt[i] == o.ignore_index) {
          for (int64_t c = 0; c < C; ++c) row[c] = 0;
          continue;
        }
        if (s == 0 && !w.defined()) {  // plain cross-entropy: (softmax - onehot) times the row's factor
          const T f = o.reduction == Reduction::None  ? pg[i]
                      : o.reduction == Reduction::Sum ? pg[0]
                                                      : pg[0] / static_cast<T>(fwd.denominator);
          row[pt[i]] -= 1;
          for (int64_t c = 0; c < C; ++c) row[c] *= f;
          continue;
        }
        const double f = row_factor(pg, i, o.reduction, fwd.denominator);
        const double target_q = (1 - s) * tw[i] * f,
                     smooth_q = (s / C) * f;  // q_ic = target_q [c = t_i] + smooth_q w_c
        const double q_sum = target_q + smooth_q * w_total;
        for (int64_t c = 0; c < C; ++c) {
          const double q = (c == pt[i] ? target_q : 0) + smooth_q * (w.defined() ? w.data<double>()[c] : 1.0);
          row[c] = static_cast<T>(q_sum * row[c] - q);
        }
      }
    });
  });
  return dx;
}

// ---------------------------------------------------------------- negative log-likelihood

// loss_i = -w[t_i] x[i, t_i]       x: (N, C) log-probabilities   t: (N)   Mean: / sum_i w[t_i]
Tensor nll_loss(const Tensor& input, const Tensor& targets, const NLLLossOptions& o) {
  check_class_targets(input, targets, o.weight, o.ignore_index, "nll_loss");
  check_reduction(o.reduction, "nll_loss");
  const int64_t N = input.size(0), C = input.size(1);
  const std::vector<double> tw = target_weights(targets, o.weight, o.ignore_index);
  const Tensor x = input.contiguous(), t = targets.contiguous();
  Tensor losses = zeros({N}, x.dtype());
  double weight_sum = 0;
  visit_float(x.dtype(), "nll_loss", [&]<class T>() {
    for (int64_t i = 0; i < N; ++i) {
      const int64_t ti = t.data<int64_t>()[i];
      if (ti == o.ignore_index) continue;
      losses.data<T>()[i] = static_cast<T>(-tw[i] * x.data<T>()[i * C + ti]);
      weight_sum += tw[i];
    }
  });
  if (o.reduction == Reduction::None) return losses;
  return o.reduction == Reduction::Sum ? sum(losses) : sum(losses) / weight_sum;
}

// dx[i, t_i] = -w[t_i] * (dloss / sum w (Mean), dloss (Sum), dloss_i (None)); 0 elsewhere
Tensor nll_loss_backward(const Tensor& dloss, const Tensor& input, const Tensor& targets, const NLLLossOptions& o) {
  check_class_targets(input, targets, o.weight, o.ignore_index, "nll_loss_backward");
  check_reduction(o.reduction, "nll_loss_backward");
  const int64_t N = input.size(0), C = input.size(1);
  MG_CHECK(dloss.defined() && dloss.shape() == (o.reduction == Reduction::None ? Shape{N} : Shape{}) &&
               dloss.dtype() == input.dtype(),
           ShapeError, "nll_loss_backward: dloss {} {} does not fit input {} with this reduction",
           dloss.defined() ? dtype_name(dloss.dtype()) : "undefined", dloss.defined() ? shape_str(dloss.shape()) : "",
           shape_str(input.shape()));
  const std::vector<double> tw = target_weights(targets, o.weight, o.ignore_index);
  double weight_sum = 0;
  for (double v : tw) weight_sum += v;
  Tensor dx = zeros({N, C}, input.dtype());
  const Tensor g = dloss.contiguous(), t = targets.contiguous();
  visit_float(input.dtype(), "nll_loss_backward", [&]<class T>() {
    for (int64_t i = 0; i < N; ++i) {
      const int64_t ti = t.data<int64_t>()[i];
      if (ti == o.ignore_index) continue;
      dx.data<T>()[i * C + ti] = static_cast<T>(-tw[i] * row_factor(g.data<T>(), i, o.reduction, weight_sum));
    }
  });
  return dx;
}

// ---------------------------------------------------------------- binary cross-entropy
// (float32 takes fast::log, log1p and exp, tensor/fastmath.h; float64 libm's.)

// loss = -w (t max(log x, -100) + (1 - t) max(log(1 - x), -100))       x, t: any shape, x in [0, 1]
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCELossOptions& o) {
  check_pointwise(input, target, o.weight, "binary_cross_entropy");
  check_reduction(o.reduction, "binary_cross_entropy");
  {
    const std::vector<double> v = input.to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i)
      MG_CHECK(v[i] >= 0 && v[i] <= 1, ValueError,
               "binary_cross_entropy: input {} at position {} is not a probability in [0, 1]", v[i], i);
  }
  Tensor l = visit_float(input.dtype(), "binary_cross_entropy", [&]<class T>() {
    return detail::map_binary<T, T>(
        input, target,
        [](T x, T t) {
          const T lx = std::max(fast::log(x), T(-100)), l1x = std::max(fast::log1p(-x), T(-100));
          return -(t * lx + (T(1) - t) * l1x);
        },
        "binary_cross_entropy");
  });
  if (o.weight.defined()) l = l * o.weight;
  return reduce_loss(l, o.reduction, "binary_cross_entropy");
}

// dx = w (x - t) / max(x (1 - x), 1e-12)      dt = w (max(log(1 - x), -100) - max(log x, -100))
std::pair<Tensor, Tensor> binary_cross_entropy_backward(const Tensor& dloss, const Tensor& input, const Tensor& target,
                                                        const BCELossOptions& o) {
  check_pointwise(input, target, o.weight, "binary_cross_entropy_backward");
  Tensor g = reduce_loss_backward(dloss, input.shape(), o.reduction);
  if (o.weight.defined()) g = g * o.weight;
  return visit_float(input.dtype(), "binary_cross_entropy_backward", [&]<class T>() {
    auto dx = detail::map_ternary<T, T, T, T>(
        g, input, target, [](T gi, T x, T t) { return gi * (x - t) / std::max(x * (T(1) - x), T(1e-12)); },
        "binary_cross_entropy_backward");
    auto dt = detail::map_binary<T, T>(
        g, input, [](T gi, T x) { return gi * (std::max(fast::log1p(-x), T(-100)) - std::max(fast::log(x), T(-100))); },
        "binary_cross_entropy_backward");
    return std::pair{dx, dt};
  });
}

// loss = w ((1 - t) x + l (log(1 + e^-|x|) + max(-x, 0))),  l = 1 + (pos_weight - 1) t
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const BCEWithLogitsLossOptions& o) {
  check_pointwise(input, target, o.weight, "binary_cross_entropy_with_logits");
  check_reduction(o.reduction, "binary_cross_entropy_with_logits");
  const Tensor pw = o.pos_weight.defined() ? o.pos_weight : ones({}, input.dtype());
  MG_CHECK(pw.dtype() == input.dtype() &&
               broadcast_shapes(input.shape(), pw.shape(), "binary_cross_entropy_with_logits") == input.shape(),
           ShapeError, "binary_cross_entropy_with_logits: pos_weight {} {} does not broadcast to the input {} {}",
           dtype_name(pw.dtype()), shape_str(pw.shape()), dtype_name(input.dtype()), shape_str(input.shape()));
  Tensor l = visit_float(input.dtype(), "binary_cross_entropy_with_logits", [&]<class T>() {
    return detail::map_ternary<T, T, T, T>(
        input, target, pw,
        [](T x, T t, T p) {
          const T lw = T(1) + (p - T(1)) * t;
          return (T(1) - t) * x + lw * (fast::log1p(fast::exp(-std::abs(x))) + std::max(-x, T(0)));
        },
        "binary_cross_entropy_with_logits");
  });
  if (o.weight.defined()) l = l * o.weight;
  return reduce_loss(l, o.reduction, "binary_cross_entropy_with_logits");
}

// dx = w (l sigmoid(x) - pos_weight t)      dt = w ((pos_weight - 1) softplus(-x) - x)
std::pair<Tensor, Tensor> binary_cross_entropy_with_logits_backward(const Tensor& dloss, const Tensor& input,
                                                                    const Tensor& target,
                                                                    const BCEWithLogitsLossOptions& o) {
  check_pointwise(input, target, o.weight, "binary_cross_entropy_with_logits_backward");
  Tensor g = reduce_loss_backward(dloss, input.shape(), o.reduction);
  if (o.weight.defined()) g = g * o.weight;
  const Tensor pw = (o.pos_weight.defined() ? o.pos_weight : ones({}, input.dtype())).expand(input.shape());
  return visit_float(input.dtype(), "binary_cross_entropy_with_logits_backward", [&]<class T>() {
    const Tensor gx = g.expand(input.shape()).contiguous(), x = input.contiguous(), t = target.contiguous(),
                 p = pw.contiguous();
    Tensor dx = empty(input.shape(), input.dtype()), dt = empty(input.shape(), input.dtype());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const T xi = x.data<T>()[i], ti = t.data<T>()[i], pi = p.data<T>()[i], gi = gx.data<T>()[i];
      const T sig = T(1) / (T(1) + fast::exp(-xi)),
              softplus_neg = fast::log1p(fast::exp(-std::abs(xi))) + std::max(-xi, T(0));
      dx.data<T>()[i] = gi * ((T(1) + (pi - T(1)) * ti) * sig - pi * ti);
      dt.data<T>()[i] = gi * ((pi - T(1)) * softplus_neg - xi);
    }
    return std::pair{dx, dt};
  });
}

// ---------------------------------------------------------------- KL divergence

// loss = t (log t - x)  (0 where t = 0)      log_target: e^t (t - x)
Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivLossOptions& o) {
  check_pointwise(input, target, Tensor(), "kl_div");
  Tensor l = visit_float(input.dtype(), "kl_div", [&]<class T>() {
    return detail::map_binary<T, T>(
        input, target,
        [log_target = o.log_target](T x, T t) {
          if (log_target) return fast::exp(t) * (t - x);
          return t > 0 ? t * (fast::log(t) - x) : (t == 0 ? T(0) : std::numeric_limits<T>::quiet_NaN());
        },
        "kl_div");
  });
  return reduce_loss(l, o.reduction, "kl_div");
}

// dx = -t   (-e^t)        dt = log t + 1 - x where t > 0, else 0   (e^t (t + 1 - x))
std::pair<Tensor, Tensor> kl_div_backward(const Tensor& dloss, const Tensor& input, const Tensor& target,
                                          const KLDivLossOptions& o) {
  check_pointwise(input, target, Tensor(), "kl_div_backward");
  const Tensor g = reduce_loss_backward(dloss, input.shape(), o.reduction);
  return visit_float(input.dtype(), "kl_div_backward", [&]<class T>() {
    const bool lt = o.log_target;
    auto dx = detail::map_binary<T, T>(
        g, target, [lt](T gi, T t) { return -gi * (lt ? fast::exp(t) : t); }, "kl_div_backward");
    auto dt = detail::map_ternary<T, T, T, T>(
        g, input, target,
        [lt](T gi, T x, T t) {
          if (lt) return gi * fast::exp(t) * (t + T(1) - x);
          return t > 0 ? gi * (fast::log(t) + T(1) - x) : T(0);
        },
        "kl_div_backward");
    return std::pair{dx, dt};
  });
}

}  // namespace mg
