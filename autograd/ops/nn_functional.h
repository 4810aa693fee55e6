#pragma once
// The functions neural nets are built from (autograd/ops/nn_functional.cpp): softmax, layer norm,
// RMS norm, batch norm, group norm, dropout.
#include <optional>

#include "minigrad/autograd/variable.h"

namespace mg {

/// Softmax along dim.
Variable softmax(const Variable& x, int64_t dim);
/// Log-softmax along dim.
Variable log_softmax(const Variable& x, int64_t dim);
/// Layer norm over the trailing dims `normalized_shape`, with optional affine weight and bias.
Variable layer_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight = Variable(),
                    const Variable& bias = Variable(), double eps = 1e-5);
/// RMS norm over the trailing dims `normalized_shape` (torch.nn.functional.rms_norm):
///   y = x / sqrt(mean(x^2) + eps) * weight      x: (..., *normalized_shape)  weight: normalized_shape
/// eps absent: the dtype's machine epsilon, as PyTorch. Derivative, with xhat = x * rstd, g = dy w:
///   dx = rstd (g - xhat mean(g xhat))      dweight = sum over rows of dy xhat
Variable rms_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight = Variable(),
                  std::optional<double> eps = std::nullopt);
/// Batch norm over x (N, C, *): each channel normalized by its mean and biased variance over N and
/// the trailing dims (training, or when the running statistics are undefined), else by
/// running_mean and running_var; then scaled by weight (C) and shifted by bias (C) if defined.
/// In training, defined running statistics are updated in place:
///   running = (1 - momentum) running + momentum batch,  the variance's batch value unbiased.
Variable batch_norm(const Variable& x, const Tensor& running_mean, const Tensor& running_var,
                    const Variable& weight = Variable(), const Variable& bias = Variable(), bool training = false,
                    double momentum = 0.1, double eps = 1e-5);
/// Group norm over x (N, C, *): the C channels split into num_groups groups, each (sample, group)
/// normalized over its channels and trailing dims, then weight (C) and bias (C) per channel.
Variable group_norm(const Variable& x, int64_t num_groups, const Variable& weight = Variable(),
                    const Variable& bias = Variable(), double eps = 1e-5);
/// In training: zero each element with probability p and scale the rest by 1/(1-p); the mask
/// comes from `gen`. Identity when !training or p == 0.
Variable dropout(const Variable& x, double p, bool training, Generator& gen = default_generator());

/// x / max(||x||_p, eps) along `dim` (torch.nn.functional.normalize; p > 0). A row of zeros
/// stays zeros, with gradient 0. Composed of differentiable ops.
Variable normalize(const Variable& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);
/// sum over `dim` of (x1 / max(||x1||, eps)) (x2 / max(||x2||, eps)), x1 and x2 broadcast
/// together (torch.nn.functional.cosine_similarity, PyTorch 1.12 and later: each normalised
/// first, then the dot product).
Variable cosine_similarity(const Variable& x1, const Variable& x2, int64_t dim = 1, double eps = 1e-8);

}  // namespace mg
