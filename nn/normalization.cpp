#include "minigrad/nn/normalization.h"

#include <cmath>
#include <limits>

namespace mg::nn {

LayerNorm::LayerNorm(Shape shape, LayerNormOptions o) : normalized_shape(std::move(shape)), eps(o.eps) {
  MG_CHECK(!normalized_shape.empty(), ValueError, "LayerNorm: normalized_shape must not be empty");
  MG_CHECK(std::isfinite(o.eps) && o.eps >= 0, ValueError, "LayerNorm: eps must be finite and >= 0, got {}", o.eps);
  if (o.elementwise_affine) {
    register_parameter("weight", weight, ones(normalized_shape));
    register_parameter("bias", bias, zeros(normalized_shape));
  }
}

std::string LayerNorm::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine={}", shape_str(normalized_shape), eps,
                     weight.defined() ? "True" : "False");
}

RMSNorm::RMSNorm(Shape shape, RMSNormOptions o) : normalized_shape(std::move(shape)), eps(o.eps) {
  MG_CHECK(!normalized_shape.empty(), ValueError, "RMSNorm: normalized_shape must not be empty");
  for (int64_t n : normalized_shape)
    MG_CHECK(n >= 0, ValueError, "RMSNorm: normalized_shape must not be negative, got {}", shape_str(normalized_shape));
  MG_CHECK(!eps || (std::isfinite(*eps) && *eps >= 0), ValueError, "RMSNorm: eps must be finite and >= 0, got {}",
           eps.value_or(0));
  if (o.elementwise_affine) register_parameter("weight", weight, ones(normalized_shape));
}

std::string RMSNorm::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine={}", shape_str(normalized_shape),
                     eps ? fmt::format("{}", *eps) : std::string("None"), weight.defined() ? "True" : "False");
}

BatchNorm::BatchNorm(int64_t c, BatchNormOptions o, const char* layer) : num_features(c), options(o) {
  MG_CHECK(c > 0, ValueError, "{}: num_features must be positive, got {}", layer, c);
  MG_CHECK(o.eps >= 0 && std::isfinite(o.eps), ValueError, "{}: eps must be finite and >= 0, got {}", layer, o.eps);
  MG_CHECK(!o.momentum || (*o.momentum >= 0 && *o.momentum <= 1), ValueError, "{}: momentum must be in [0, 1], got {}",
           layer, o.momentum.value_or(0));
  if (o.affine) {
    register_parameter("weight", weight, ones({c}));
    register_parameter("bias", bias, zeros({c}));
  }
  if (o.track_running_stats) {
    register_buffer("running_mean", zeros({c}));
    register_buffer("running_var", ones({c}));
    register_buffer("num_batches_tracked", scalar_tensor(0, DType::Int64));
  }
}

Tensor BatchNorm::running_mean() const { return options.track_running_stats ? buffer("running_mean") : Tensor(); }
Tensor BatchNorm::running_var() const { return options.track_running_stats ? buffer("running_var") : Tensor(); }
Tensor BatchNorm::num_batches_tracked() const {
  return options.track_running_stats ? buffer("num_batches_tracked") : Tensor();
}

void BatchNorm::reset_running_stats() {
  if (!options.track_running_stats) return;
  running_mean().fill_(0);  // fill_, not copy_ of a float32 tensor: the buffers may have been moved to float64
  running_var().fill_(1);
  num_batches_tracked().fill_(0);
}

// PyTorch's _BatchNorm.forward: count the batch, pick the momentum (or 1 / batches for the plain
// average), use batch statistics in training or when nothing is tracked.
Variable BatchNorm::forward(const Variable& x) {
  check_input(x);
  MG_CHECK(x.size(1) == num_features, ShapeError, "{}: expected {} channels (dim 1), got input {}", type_name(),
           num_features, shape_str(x.shape()));
  double momentum = options.momentum.value_or(0);
  if (is_training() && options.track_running_stats) {
    Tensor n = num_batches_tracked();
    const int64_t count = n.to_vector<int64_t>()[0];
    MG_CHECK(count < std::numeric_limits<int64_t>::max(), StateError,
             "{}: num_batches_tracked is {}, which cannot count on", type_name(), count);
    n.copy_(n + scalar_tensor(1, DType::Int64));
    if (!options.momentum) momentum = 1.0 / static_cast<double>(n.item());
  }
  const bool use_batch = is_training() || !options.track_running_stats;
  // In evaluation without tracked statistics there are none to use: the batch's, as PyTorch.
  const Tensor rm = is_training() || options.track_running_stats ? running_mean() : Tensor();
  const Tensor rv = is_training() || options.track_running_stats ? running_var() : Tensor();
  return batch_norm(x, rm, rv, weight, bias, use_batch, momentum, options.eps);
}

std::string BatchNorm::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features, options.eps,
                     options.momentum ? fmt::format("{}", *options.momentum) : "None", options.affine,
                     options.track_running_stats);
}

void BatchNorm1d::check_input(const Variable& x) const {
  MG_CHECK(x.defined() && (x.dim() == 2 || x.dim() == 3), ShapeError,
           "BatchNorm1d: expected input (N, C) or (N, C, L), got {}",
           x.defined() ? shape_str(x.shape()) : "an undefined variable");
}

void BatchNorm2d::check_input(const Variable& x) const {
  MG_CHECK(x.defined() && x.dim() == 4, ShapeError, "BatchNorm2d: expected input (N, C, H, W), got {}",
           x.defined() ? shape_str(x.shape()) : "an undefined variable");
}

GroupNorm::GroupNorm(int64_t g, int64_t c, GroupNormOptions o) : num_groups(g), num_channels(c), options(o) {
  MG_CHECK(g > 0 && c > 0 && c % g == 0, ValueError,
           "GroupNorm: num_groups={} must be positive and divide num_channels={}", g, c);
  MG_CHECK(o.eps >= 0 && std::isfinite(o.eps), ValueError, "GroupNorm: eps must be finite and >= 0, got {}", o.eps);
  if (o.affine) {
    register_parameter("weight", weight, ones({c}));
    register_parameter("bias", bias, zeros({c}));
  }
}

Variable GroupNorm::forward(const Variable& x) const {
  MG_CHECK(x.defined() && x.dim() >= 2 && x.size(1) == num_channels, ShapeError,
           "GroupNorm: expected input (N, {}, *), got {}", num_channels,
           x.defined() ? shape_str(x.shape()) : "an undefined variable");
  return group_norm(x, num_groups, weight, bias, options.eps);
}

std::string GroupNorm::extra_repr() const {
  return fmt::format("{}, {}, eps={}, affine={}", num_groups, num_channels, options.eps, options.affine);
}

BatchNorm1d::BatchNorm1d(int64_t num_features, BatchNormOptions options)
    : Callable(num_features, options, "BatchNorm1d") {}

BatchNorm2d::BatchNorm2d(int64_t num_features, BatchNormOptions options)
    : Callable(num_features, options, "BatchNorm2d") {}

}  // namespace mg::nn
