#pragma once
// Differentiable losses (autograd/ops/loss.cpp), with PyTorch's reductions.
#include "autograd/variable.h"
#include "tensor/ops/loss.h"

namespace mg {

/// Cross-entropy of logits (N, C) (or (C) with a 0-dim target) against int64 class targets (N),
/// fused with log_softmax. Targets equal to ignore_index add nothing and are not counted in the
/// mean.
Variable cross_entropy(const Variable& logits, const Tensor& targets, Reduction reduction = Reduction::Mean,
                       int64_t ignore_index = -100);
/// Mean (or sum, or elementwise) squared error; input and target must have the same shape.
Variable mse_loss(const Variable& input, const Variable& target, Reduction reduction = Reduction::Mean);

}  // namespace mg
