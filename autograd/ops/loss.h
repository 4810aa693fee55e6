#pragma once
// Differentiable losses (autograd/ops/loss.cpp; kernels in tensor/ops/loss.cpp). Each takes the
// input, the target and an options struct with torch.nn.functional's keyword arguments and
// defaults: cross_entropy(logits, targets, {.label_smoothing = 0.1}).
#include "minigrad/autograd/variable.h"
#include "minigrad/tensor/ops/loss.h"

namespace mg {

/// The options of a loss whose only option is its reduction (mse_loss, l1_loss).
struct LossOptions {
  Reduction reduction = Reduction::Mean;
};
/// smooth_l1_loss's options.
struct SmoothL1LossOptions {
  Reduction reduction = Reduction::Mean;
  /// Below |x - t| < beta the loss is quadratic; beta 0 is l1_loss.
  double beta = 1.0;
};
/// huber_loss's options.
struct HuberLossOptions {
  Reduction reduction = Reduction::Mean;
  /// Below |x - t| <= delta the loss is quadratic.
  double delta = 1.0;
};

/// Cross-entropy of logits (N, C) (or (C) with a 0-dim target) against int64 class targets (N),
/// fused with log_softmax; class weights, ignore_index and label smoothing as in PyTorch.
Variable cross_entropy(const Variable& logits, const Tensor& targets, const CrossEntropyOptions& options = {});
/// Negative log-likelihood of log-probabilities (N, C) (or (C) with a 0-dim target).
Variable nll_loss(const Variable& input, const Tensor& targets, const NLLLossOptions& options = {});
/// nll_loss's backward as an op (linear in dy, differentiable again): what makes nll_loss
/// differentiable twice
Variable nll_loss_backward(const Variable& dy, const Variable& input, const Tensor& targets,
                           const NLLLossOptions& options = {});
/// Binary cross-entropy of probabilities and targets in [0, 1] (same shape).
Variable binary_cross_entropy(const Variable& input, const Variable& target, const BCELossOptions& options = {});
/// Binary cross-entropy on logits, stable for any logit; pos_weight weighs the positive targets.
Variable binary_cross_entropy_with_logits(const Variable& input, const Variable& target,
                                          const BCEWithLogitsLossOptions& options = {});
/// KL divergence of the target distribution from input log-probabilities (same shape).
Variable kl_div(const Variable& input, const Variable& target, const KLDivLossOptions& options = {});
/// (x - t)^2, reduced; input and target must have the same shape.
Variable mse_loss(const Variable& input, const Variable& target, const LossOptions& options = {});
/// |x - t|, reduced.
Variable l1_loss(const Variable& input, const Variable& target, const LossOptions& options = {});
/// 0.5 (x - t)^2 / beta where |x - t| < beta, |x - t| - 0.5 beta beyond, reduced.
Variable smooth_l1_loss(const Variable& input, const Variable& target, const SmoothL1LossOptions& options = {});
/// 0.5 (x - t)^2 where |x - t| <= delta, delta (|x - t| - 0.5 delta) beyond, reduced.
Variable huber_loss(const Variable& input, const Variable& target, const HuberLossOptions& options = {});

}  // namespace mg
