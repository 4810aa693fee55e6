#pragma once
// The normalization layers: nn::LayerNorm and nn::RMSNorm (over each token's features), nn::BatchNorm1d and
// nn::BatchNorm2d (over the batch, per channel), nn::GroupNorm (over groups of channels), with
// PyTorch's options, parameter and buffer names (weight, bias, running_mean, running_var,
// num_batches_tracked), so a PyTorch state_dict loads.
#include <optional>

#include "minigrad/nn/module.h"

namespace mg::nn {

/// LayerNorm's optional settings (PyTorch's defaults).
struct LayerNormOptions {
  /// Added to the variance.
  double eps = 1e-5;
  /// Learn a weight and a bias.
  bool elementwise_affine = true;
};

/// Layer norm over the trailing dims `normalized_shape`; weight ones, bias zeros (PyTorch's init).
class LayerNorm : public Callable<LayerNorm> {
 public:
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});
  /// Over the last dim, of `size` features: LayerNorm(64), as torch.nn.LayerNorm(64).
  explicit LayerNorm(int64_t size, LayerNormOptions options = {}) : LayerNorm(Shape{size}, options) {}
  /// x: (..., *normalized_shape) -> same shape.
  Variable forward(const Variable& x) const { return layer_norm(x, normalized_shape, weight, bias, eps); }
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

  const Shape normalized_shape;
  const double eps;
  Variable weight, bias;  // normalized_shape each; undefined without affine
};

/// RMSNorm's optional settings (PyTorch's defaults).
struct RMSNormOptions {
  /// Added to mean(x^2); absent: the input dtype's machine epsilon.
  std::optional<double> eps;
  /// Learn a weight (no bias: RMS norm has none)
  bool elementwise_affine = true;
};

/// RMS norm over the trailing dims `normalized_shape` (PyTorch 2.4's torch.nn.RMSNorm, the norm of
/// LLaMA-style decoders): y = x / sqrt(mean(x^2) + eps) * weight. Unlike LayerNorm it subtracts no
/// mean and adds no bias: it only rescales each token's features to unit root-mean-square.
/// weight starts at ones.
class RMSNorm : public Callable<RMSNorm> {
 public:
  explicit RMSNorm(Shape normalized_shape, RMSNormOptions options = {});
  /// Over the last dim, of `size` features: RMSNorm(64), as torch.nn.RMSNorm(64).
  explicit RMSNorm(int64_t size, RMSNormOptions options = {}) : RMSNorm(Shape{size}, options) {}
  /// x: (..., *normalized_shape) -> same shape.
  Variable forward(const Variable& x) const { return rms_norm(x, normalized_shape, weight, eps); }
  std::string type_name() const override { return "RMSNorm"; }
  std::string extra_repr() const override;

  const Shape normalized_shape;
  const std::optional<double> eps;
  Variable weight;  // normalized_shape; undefined without affine
};

/// BatchNorm's optional settings (PyTorch's defaults).
struct BatchNormOptions {
  double eps = 1e-5;
  std::optional<double> momentum =
      /// running = (1 - m) running + m batch; nullopt: the plain average of all batches.
      0.1;
  /// Learn weight (ones) and bias (zeros)
  bool affine = true;
  /// Keep running statistics (as buffers) for evaluation.
  bool track_running_stats = true;
};

/// What BatchNorm1d and BatchNorm2d share (PyTorch's _BatchNorm). In training mode each channel
/// is normalized by the batch's statistics and the running ones are updated; in evaluation mode
/// the running statistics are used, so one example's output does not depend on the others.
class BatchNorm : public Callable<BatchNorm> {
 public:
  /// x: (N, C, *) with the dims the subclass expects. Updates the running statistics in training.
  Variable forward(const Variable& x);
  /// Reset the running statistics: mean 0, variance 1, no batches seen.
  void reset_running_stats();
  /// The running mean (C), as saved and loaded; undefined without track_running_stats.
  Tensor running_mean() const;
  /// The running variance (C), unbiased.
  Tensor running_var() const;
  /// How many training batches have updated the running statistics (an int64 scalar).
  Tensor num_batches_tracked() const;
  std::string extra_repr() const override;

  const int64_t num_features;
  const BatchNormOptions options;
  Variable weight, bias;  // (C) each; undefined without affine

 protected:
  BatchNorm(int64_t num_features, BatchNormOptions options, const char* layer);
  /// A ShapeError unless x has a shape this layer takes.
  virtual void check_input(const Variable& x) const = 0;
};

/// Batch norm over (N, C) or (N, C, L) inputs.
class BatchNorm1d : public Callable<BatchNorm1d, BatchNorm> {
 public:
  explicit BatchNorm1d(int64_t num_features, BatchNormOptions options = {});
  std::string type_name() const override { return "BatchNorm1d"; }

 protected:
  void check_input(const Variable& x) const override;
};

/// Batch norm over (N, C, H, W) inputs: one mean and variance per channel, over N, H and W.
class BatchNorm2d : public Callable<BatchNorm2d, BatchNorm> {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions options = {});
  std::string type_name() const override { return "BatchNorm2d"; }

 protected:
  void check_input(const Variable& x) const override;
};

/// GroupNorm's optional settings (PyTorch's defaults).
struct GroupNormOptions {
  double eps = 1e-5;
  /// Learn weight (ones) and bias (zeros), one per channel.
  bool affine = true;
};

/// Group norm: each sample's channels split into num_groups groups, each normalized over its
/// channels and positions; no batch statistics, so training and evaluation agree.
class GroupNorm : public Callable<GroupNorm> {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, GroupNormOptions options = {});
  /// x: (N, num_channels, *).
  Variable forward(const Variable& x) const;
  std::string type_name() const override { return "GroupNorm"; }
  std::string extra_repr() const override;

  const int64_t num_groups, num_channels;
  const GroupNormOptions options;
  Variable weight, bias;  // (num_channels) each; undefined without affine
};

}  // namespace mg::nn
