#pragma once
// Loss kernels (tensor/ops/loss.cpp).
#include "tensor/tensor.h"

namespace mg {

/// How a loss over many elements is reduced: "mean", "sum" or "none" (one value per element).
enum class Reduction { Mean, Sum, None };

/// What cross_entropy_forward returns.
struct CrossEntropyForward {
  Tensor loss;       // () for Mean and Sum, (N) for None
  Tensor log_probs;  // (N, C) log_softmax of the logits, kept for the backward
  int64_t count;     // targets that were not ignore_index (the mean's denominator)
};
/// Cross-entropy of logits (N, C) against int64 class targets (N), fused with log_softmax.
/// Targets equal to ignore_index add nothing and are not counted in the mean.
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& targets, Reduction reduction,
                                          int64_t ignore_index);
/// d loss / d logits (N, C) = (softmax - onehot(target)) * w per row, from the forward's
/// log_probs; w is dloss / count (mean), dloss (sum) or dloss_i (none), and 0 for ignored rows.
Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& log_probs, const Tensor& targets, Reduction reduction,
                              int64_t ignore_index, int64_t count);

}  // namespace mg
