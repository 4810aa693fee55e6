#pragma once
// Kernels that neural nets call often enough to deserve one pass each (tensor/ops/nn_functional.cpp):
// softmax, log_softmax and layer norm, each over "lines" or "rows" of a tensor.
#include "minigrad/tensor/tensor.h"

namespace mg {

/// exp(x) / sum(exp(x)) along `dim`, computed stably (the row max is subtracted first).
Tensor softmax(const Tensor& x, int64_t dim);
/// x - logsumexp(x) along `dim`.
Tensor log_softmax(const Tensor& x, int64_t dim);

/// What layer_norm_forward returns: the output and the per-row statistics the backward reuses.
struct LayerNormForward {
  Tensor y;     // x's shape
  Tensor mean;  // x.shape() without the normalized dims
  Tensor rstd;  // 1 / sqrt(var + eps), same shape as mean
};
/// Layer norm over the trailing dims `normalized_shape`: y = (x - mean) * rstd * weight + bias,
/// with the biased variance. weight and bias (normalized_shape) may be undefined (no affine).
LayerNormForward layer_norm_forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                    const Tensor& bias, double eps);
/// Just the output of layer_norm_forward.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps = 1e-5);

/// The gradients layer_norm_backward returns (undefined where not asked for).
struct LayerNormGrads {
  Tensor dx;       // x's shape
  Tensor dweight;  // normalized_shape
  Tensor dbias;    // normalized_shape
};
/// Layer norm's backward from the forward's mean and rstd. weight may be undefined.
LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd, const Shape& normalized_shape, bool need_dweight,
                                   bool need_dbias);

}  // namespace mg
