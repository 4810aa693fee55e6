#pragma once
// Kernels that neural nets call often enough to deserve one pass each (tensor/ops/nn_functional.cpp):
// softmax, log_softmax, layer norm and RMS norm, each over "lines" or "rows" of a tensor.
#include <optional>

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
/// bf16_copy: for a float32 x, also round each row of y to bfloat16 right after writing it and keep
/// that beside y (Storage::bf16_copy), the operand the next product reads under autocast.
LayerNormForward layer_norm_forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                    const Tensor& bias, double eps, bool bf16_copy = false);
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

/// What rms_norm_forward returns: the output and the per-row statistic the backward reuses.
struct RMSNormForward {
  Tensor y;     // x's shape
  Tensor rstd;  // x.shape() without the normalized dims: 1 / sqrt(mean(x^2) + eps)
};
/// RMS norm over the trailing dims `normalized_shape` (PyTorch 2.4's torch.nn.functional.rms_norm):
///   y = x * rstd * weight,   rstd = 1 / sqrt(mean(x^2) + eps)   (mean over the normalized dims)
/// No mean is subtracted and there is no bias. weight (normalized_shape) may be undefined; eps
/// absent means the dtype's machine epsilon (torch.finfo(dtype).eps), as PyTorch's default.
RMSNormForward rms_norm_forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                std::optional<double> eps);
/// The eps rms_norm uses: `eps`, or when absent the machine epsilon of `dtype` (float32's 1.19e-7,
/// float64's 2.22e-16).
double rms_norm_eps(std::optional<double> eps, DType dtype);
/// Just the output of rms_norm_forward.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);
/// The gradients rms_norm_backward returns (dweight undefined when not asked for).
struct RMSNormGrads {
  Tensor dx;       // x's shape
  Tensor dweight;  // normalized_shape
};
/// RMS norm's backward from the forward's rstd, per row with xhat = x * rstd and g = dy * w:
///   dx = rstd * (g - xhat * mean(g * xhat))      dw = sum over rows of dy * xhat
RMSNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                               const Shape& normalized_shape, bool need_dweight);

}  // namespace mg
