#pragma once
// Loss kernels (tensor/ops/loss.cpp), each forward above its backward. The options follow
// torch.nn.functional's keyword arguments, with its defaults.
#include "minigrad/tensor/tensor.h"

namespace mg {

/// How a loss over many elements is reduced: the mean, the sum, or none (one value per element).
/// BatchMean (the sum divided by the batch size) is kl_div's alone, as in PyTorch.
enum class Reduction { Mean, Sum, None, BatchMean };

/// cross_entropy's options (F.cross_entropy's keywords).
struct CrossEntropyOptions {
  /// (C): a weight per class, or undefined for all 1.
  Tensor weight;
  /// Targets equal to it add nothing and are not counted.
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  /// In [0, 1]: the target becomes (1 - s) onehot + s / C.
  double label_smoothing = 0;
};

/// What cross_entropy_forward returns, and its backward needs.
struct CrossEntropyForward {
  Tensor loss;         // () for Mean and Sum, (N) for None
  Tensor log_probs;    // (N, C) log_softmax of the logits
  double denominator;  // Mean: sum_i w[t_i] over the counted rows (their count without a weight)
};
/// Cross-entropy of logits (N, C) against int64 class targets (N), fused with log_softmax:
///   loss_i = (1 - s) w[t_i] (-logp_i[t_i]) + (s / C) sum_c w_c (-logp_i[c])
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                          const CrossEntropyOptions& options = {});
/// d loss / d logits (N, C) = (sum_c q_ic) softmax_i - q_i per row, q_i the row's target weights.
Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& targets, const CrossEntropyForward& fwd,
                              const CrossEntropyOptions& options = {});

/// nll_loss's options (F.nll_loss's keywords).
struct NLLLossOptions {
  /// (C), or undefined.
  Tensor weight;
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};
/// Negative log-likelihood of log-probabilities (N, C) at int64 targets (N): -w[t_i] input[i, t_i];
/// the mean divides by the sum of the counted targets' weights.
Tensor nll_loss(const Tensor& input, const Tensor& targets, const NLLLossOptions& options = {});
/// d loss / d input: -w[t_i] times the reduction's factor at [i, t_i], 0 elsewhere.
Tensor nll_loss_backward(const Tensor& dloss, const Tensor& input, const Tensor& targets,
                         const NLLLossOptions& options = {});

/// binary_cross_entropy's options.
struct BCELossOptions {
  /// Broadcast to the input, or undefined.
  Tensor weight;
  Reduction reduction = Reduction::Mean;
};
/// -w (t log x + (1 - t) log(1 - x)) for probabilities x in [0, 1], each log clamped at -100 as
/// PyTorch does (so x = 0 or 1 gives a large finite loss, not inf).
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCELossOptions& options = {});
/// Gradients of input and target: dx = w (x - t) / max(x (1 - x), 1e-12),
/// dt = w (log(1 - x) - log x) (logs clamped as in the forward). Scaled by the reduction.
std::pair<Tensor, Tensor> binary_cross_entropy_backward(const Tensor& dloss, const Tensor& input, const Tensor& target,
                                                        const BCELossOptions& options = {});

/// binary_cross_entropy_with_logits' options.
struct BCEWithLogitsLossOptions {
  /// Broadcast to the input, or undefined.
  Tensor weight;
  /// (C), broadcast along the last dim: the weight of positive targets.
  Tensor pos_weight;
  Reduction reduction = Reduction::Mean;
};
/// Binary cross-entropy on logits x, stably: with l = 1 + (pos_weight - 1) t,
///   loss = w ((1 - t) x + l (log(1 + e^-|x|) + max(-x, 0)))
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsLossOptions& options = {});
/// dx = w (l sigmoid(x) - pos_weight t),  dt = w ((pos_weight - 1) softplus(-x) - x). Scaled by the reduction.
std::pair<Tensor, Tensor> binary_cross_entropy_with_logits_backward(const Tensor& dloss, const Tensor& input,
                                                                    const Tensor& target,
                                                                    const BCEWithLogitsLossOptions& options = {});

/// kl_div's options.
struct KLDivLossOptions {
  /// BatchMean is the mathematically right one, as PyTorch warns.
  Reduction reduction = Reduction::Mean;
  /// Whether the target is given as log-probabilities.
  bool log_target = false;
};
/// Kullback-Leibler divergence of log-probabilities `input` from `target`, pointwise:
///   t (log t - x) (0 where t = 0), or e^t (t - x) for log targets.
Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivLossOptions& options = {});
/// dx = -t (or -e^t), dt = log t + 1 - x where t > 0, else 0 (or e^t (t + 1 - x)). Scaled by the reduction.
std::pair<Tensor, Tensor> kl_div_backward(const Tensor& dloss, const Tensor& input, const Tensor& target,
                                          const KLDivLossOptions& options = {});

/// A pointwise loss reduced: the mean, the sum, or the tensor itself (losses of x's shape).
/// batch_size divides the sum for BatchMean.
Tensor reduce_loss(const Tensor& losses, Reduction reduction, std::string_view op);
/// The gradient of reduce_loss for losses of shape `shape`: dloss broadcast, divided by the count
/// for Mean (by shape[0] for BatchMean).
Tensor reduce_loss_backward(const Tensor& dloss, const Shape& shape, Reduction reduction);

}  // namespace mg
