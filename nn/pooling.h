#pragma once
// Pooling layers: nn::MaxPool2d, nn::AvgPool2d, nn::AdaptiveAvgPool2d (no parameters; the ops
// are autograd/ops/pool.h's).
#include "minigrad/nn/module.h"

namespace mg::nn {

/// The maximum of each kernel_size window: MaxPool2d(2) halves H and W.
class MaxPool2d : public Callable<MaxPool2d> {
 public:
  explicit MaxPool2d(Size2 kernel_size, MaxPool2dOptions options = {});
  /// x: (N, C, H, W) or (C, H, W).
  Variable forward(const Variable& x) const { return max_pool2d(x, kernel_size, options); }
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override {
    const Pool2dArgs a = pool2d_args(kernel_size, options.stride, options.padding, options.dilation, options.ceil_mode);
    return fmt::format("kernel_size=({}, {}), stride=({}, {}), padding=({}, {}), dilation=({}, {}), ceil_mode={}",
                       a.kernel_h, a.kernel_w, a.stride_h, a.stride_w, a.pad_h, a.pad_w, a.dilation_h, a.dilation_w,
                       a.ceil_mode);
  }
  const Size2 kernel_size;
  const MaxPool2dOptions options;
};

/// The mean of each kernel_size window.
class AvgPool2d : public Callable<AvgPool2d> {
 public:
  explicit AvgPool2d(Size2 kernel_size, AvgPool2dOptions options = {});
  /// x: (N, C, H, W) or (C, H, W).
  Variable forward(const Variable& x) const { return avg_pool2d(x, kernel_size, options); }
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override {
    const Pool2dArgs a = pool2d_args(kernel_size, options.stride, options.padding, 1, options.ceil_mode);
    return fmt::format("kernel_size=({}, {}), stride=({}, {}), padding=({}, {})", a.kernel_h, a.kernel_w, a.stride_h,
                       a.stride_w, a.pad_h, a.pad_w);
  }
  const Size2 kernel_size;
  const AvgPool2dOptions options;
};

/// The mean over output_size windows tiling the input, whatever its size: AdaptiveAvgPool2d(1) is
/// global average pooling.
class AdaptiveAvgPool2d : public Callable<AdaptiveAvgPool2d> {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  /// x: (N, C, H, W) or (C, H, W) -> (..., out_h, out_w).
  Variable forward(const Variable& x) const { return adaptive_avg_pool2d(x, output_size); }
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override { return fmt::format("output_size=({}, {})", output_size.h, output_size.w); }
  const Size2 output_size;
};

/// Resamples (N, C, *spatial) inputs to a size or by a factor (torch.nn.Upsample):
/// Upsample({.scale_factor = {2}}) doubles every spatial dim by nearest neighbour;
/// Upsample({.size = {8, 8}, .mode = InterpolateMode::Bilinear}). The work is interpolate()'s.
class Upsample : public Callable<Upsample> {
 public:
  explicit Upsample(InterpolateOptions options);
  /// x (N, C, *spatial) -> (N, C, *resized).
  Variable forward(const Variable& x) const { return interpolate(x, options); }
  std::string type_name() const override { return "Upsample"; }
  std::string extra_repr() const override;

  const InterpolateOptions options;
};

}  // namespace mg::nn
