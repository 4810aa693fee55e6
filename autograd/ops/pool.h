#pragma once
// Pooling on Variables (autograd/ops/pool.cpp), with F.max_pool2d's, F.avg_pool2d's and
// F.adaptive_avg_pool2d's arguments. The kernels are tensor/ops/pool.cpp's.
#include <optional>
#include <utility>

#include "minigrad/autograd/ops/conv.h"  // Size2
#include "minigrad/tensor/ops/pool.h"

namespace mg {

/// max_pool2d's keywords (PyTorch's defaults).
struct MaxPool2dOptions {
  /// 0: the kernel size, PyTorch's default.
  Size2 stride = 0;
  /// -inf on both sides, at most half the kernel.
  Size2 padding = 0;
  Size2 dilation = 1;
  bool ceil_mode = false;
};
/// avg_pool2d's keywords (PyTorch's defaults).
struct AvgPool2dOptions {
  /// 0: the kernel size, PyTorch's default.
  Size2 stride = 0;
  /// Zeros on both sides, at most half the kernel.
  Size2 padding = 0;
  bool ceil_mode = false;
  /// Divide by the window's size with its padding.
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override;
};

/// The kernel's window for this kernel size and these options (a stride of 0: the kernel size).
Pool2dArgs pool2d_args(Size2 kernel_size, Size2 stride, Size2 padding, Size2 dilation, bool ceil_mode);

/// The maximum of each window: x (N, C, H, W) or (C, H, W) -> (..., Ho, Wo).
Variable max_pool2d(const Variable& x, Size2 kernel_size, const MaxPool2dOptions& options = {});
/// max_pool2d and the int64 position (h W + w in its plane) each maximum came from.
std::pair<Variable, Tensor> max_pool2d_with_indices(const Variable& x, Size2 kernel_size,
                                                    const MaxPool2dOptions& options = {});
/// The mean of each window: x (N, C, H, W) or (C, H, W) -> (..., Ho, Wo).
Variable avg_pool2d(const Variable& x, Size2 kernel_size, const AvgPool2dOptions& options = {});
/// The mean over output_size windows that tile the input: (..., H, W) -> (..., out_h, out_w).
Variable adaptive_avg_pool2d(const Variable& x, Size2 output_size);

/// x (N, C, *spatial) resampled (torch.nn.functional.interpolate; tensor/ops/pool.h has the
/// options): each spatial dim multiplied by its interpolation matrix A (out, in), so the
/// derivative is dy multiplied by A^T, each input position receiving the weights it gave.
Variable interpolate(const Variable& x, const InterpolateOptions& options);

}  // namespace mg
