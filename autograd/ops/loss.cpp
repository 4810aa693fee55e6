// Losses. Cross-entropy is one fused op (its kernels are tensor/ops/loss.cpp); mse_loss is
// composed of differentiable ops, so its backward comes out of the chain rule.
#include "autograd/ops/loss.h"

#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"

namespace mg {

// loss_i = -log softmax(x_i)[t_i]                x: (N, C)  t: (N) int64  loss: () or (N)
// dx_i = (softmax(x_i) - onehot(t_i)) * w_i      w_i = dy / count (mean), dy (sum), dy_i (none);
//                                                0 for rows whose target is ignore_index
Variable cross_entropy(const Variable& logits, const Tensor& targets, Reduction reduction, int64_t ignore_index) {
  if (logits.dim() == 1) {  // one sample: (C) logits, 0-dim target
    MG_CHECK(targets.defined() && targets.dim() == 0, ShapeError,
             "cross_entropy: logits of shape {} need a 0-dim target, got shape {}", shape_str(logits.shape()),
             targets.defined() ? shape_str(targets.shape()) : "undefined");
    Variable l = cross_entropy(unsqueeze(logits, 0), targets.reshape({1}), reduction, ignore_index);
    return reduction == Reduction::None ? reshape(l, {}) : l;
  }
  CrossEntropyForward f = cross_entropy_forward(logits.data(), targets, reduction, ignore_index);
  return record("cross_entropy", f.loss, {logits},
                [lp = f.log_probs, targets, reduction, ignore_index, count = f.count](const Tensor& dy, const Node&) -> TensorList {
                  return {cross_entropy_backward(dy, lp, targets, reduction, ignore_index, count)};
                });
}

// loss = mean((x - t)^2), composed from differentiable ops: its gradient 2 (x - t) / n comes out
// of the chain rule through sub, pow and mean.
Variable mse_loss(const Variable& input, const Variable& target, Reduction reduction) {
  MG_CHECK(input.shape() == target.shape(), ShapeError,
           "mse_loss: input {} and target {} must have the same shape", shape_str(input.shape()),
           shape_str(target.shape()));
  Variable sq = pow(sub(input, target), 2.0);
  if (reduction == Reduction::None) return sq;
  return reduction == Reduction::Sum ? sum(sq) : mean(sq);
}

}  // namespace mg
