#pragma once
// Optimizer update kernels (tensor/ops/optim.cpp): one fused pass over a parameter's elements.
// The optimizers in optim/ keep the state and the schedule; the arithmetic is here.
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg {

/// The numbers of one Adam/AdamW update.
struct AdamStepArgs {
  double lr, beta1, beta2, eps, weight_decay;
  /// T, counted from 1.
  int64_t step;
  /// AdamW: decay the weights directly; Adam: add weight_decay * p to the gradient.
  bool decoupled;
};
/// One Adam or AdamW step in place, in torch.optim's order of operations, per element:
///   Adam:  g = grad + wd p        AdamW: p = p (1 - lr wd), g = grad
///   m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2
///   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// param, grad, exp_avg (m) and exp_avg_sq (v) share one shape and floating dtype; exp_avg and
/// exp_avg_sq are contiguous (the optimizer made them).
void adam_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const AdamStepArgs& args);

/// One parameter's tensors and numbers for adam_step_many_.
struct AdamTensors {
  Tensor param, grad, exp_avg, exp_avg_sq;
  AdamStepArgs args;
};
/// adam_step_ on every item in one parallel pass over all their elements (PyTorch's "foreach"
/// Adam): the same bits as one call per item, the work of all of them shared out together (items
/// that share memory are updated one after another, in order). Every item is checked before any
/// is updated.
void adam_step_many_(const std::vector<AdamTensors>& items);

}  // namespace mg
