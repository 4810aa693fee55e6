#pragma once
// Pooling kernels (tensor/ops/pool.cpp): max, average and adaptive average over 2-D windows, each
// forward above its backward. Inputs are (N, C, H, W) or (C, H, W): every leading index is one
// plane, pooled on its own.
#include <optional>

#include "minigrad/tensor/tensor.h"
#include <string>
#include <vector>

namespace mg {

/// The window of a 2-D pooling: kernel, stride, zero-or-minus-infinity padding on both sides,
/// dilation (max pooling only) and ceil_mode (PyTorch's: the last window may hang over the edge,
/// as long as it starts inside the input or its left padding).
struct Pool2dArgs {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool ceil_mode = false;
};

/// Output size of a pooling along one dim, PyTorch's formula:
///   floor_or_ceil((in + 2 pad - dilation (k - 1) - 1) / stride) + 1, less one if ceil_mode made the
///   last window start past the input. A ShapeError or ValueError naming `op` when it does not fit.
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode,
                         std::string_view op);

/// What max_pool2d returns: the maxima and where each came from.
struct MaxPool2dForward {
  Tensor y;        // (..., Ho, Wo)
  Tensor indices;  // (..., Ho, Wo) int64: the flat position h W + w in the plane, as torch's return_indices
};
/// y[.., i, j] = max over the window's positions inside the input (NaN wins, as in PyTorch).
MaxPool2dForward max_pool2d(const Tensor& x, const Pool2dArgs& args);
/// dx (x_shape) = dy added at the positions `indices` names (windows may overlap).
Tensor max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Shape& x_shape);

/// y[.., i, j] = sum over the window / divisor. The divisor is the window's size counting the
/// padding (count_include_pad), or only its positions inside the input, or divisor_override.
Tensor avg_pool2d(const Tensor& x, const Pool2dArgs& args, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
/// dx[.., h, w] = sum over the windows containing (h, w) of dy / that window's divisor.
Tensor avg_pool2d_backward(const Tensor& dy, const Shape& x_shape, const Pool2dArgs& args,
                           bool count_include_pad = true, std::optional<int64_t> divisor_override = std::nullopt);

/// Average over (out_h, out_w) windows that tile the input: window i along H spans
/// [floor(i H / out_h), ceil((i + 1) H / out_h)), as torch's adaptive_avg_pool2d.
Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w);
/// dx[.., h, w] = sum over the windows containing (h, w) of dy / that window's size.
Tensor adaptive_avg_pool2d_backward(const Tensor& dy, const Shape& x_shape);

/// How interpolate resamples (PyTorch's mode="nearest", "linear", "bilinear", "bicubic",
/// "nearest-exact", "area").
enum class InterpolateMode {
  /// The nearest input position, in any number of spatial dims: floor(i * scale) (PyTorch's old,
  /// shifted rule, kept for compatibility).
  Nearest,
  /// Between the two nearest positions, input (N, C, L).
  Linear,
  /// Linear along both dims, input (N, C, H, W).
  Bilinear,
  /// Keys' cubic convolution (a = -0.75) over 4 positions along both dims, input (N, C, H, W);
  /// it may overshoot the input's range, as PyTorch's does.
  Bicubic,
  /// The nearest input position to the output pixel's centre: floor((i + 0.5) * scale) (what
  /// nearest should have been; PIL's and scikit-image's rule), any number of spatial dims.
  NearestExact,
  /// The mean of the input positions each output position covers (adaptive average pooling), any
  /// number of spatial dims.
  Area,
};
/// "nearest", "linear", "bilinear", "bicubic", "nearest-exact" or "area", as PyTorch spells the mode.
const char* interpolate_mode_name(InterpolateMode mode);

/// interpolate's settings (torch.nn.functional.interpolate's keywords): give `size` or
/// `scale_factor`, one value for every spatial dim or one per spatial dim.
struct InterpolateOptions {
  std::vector<int64_t> size;
  std::vector<double> scale_factor;
  /// The resampling (InterpolateMode).
  InterpolateMode mode = InterpolateMode::Nearest;
  /// Linear modes only (linear, bilinear, bicubic); unset: false.
  std::optional<bool> align_corners;
  /// With scale_factor: true computes the output size from it, then resamples by in / out, as if
  /// that size had been given; false or unset uses 1 / scale_factor itself (PyTorch's keyword).
  std::optional<bool> recompute_scale_factor;
};
/// The (out, in) matrix that resamples one spatial dim, as PyTorch indexes it: row i holds the
/// weights output position i gives the input positions (one 1 for nearest, two weights summing
/// to 1 for linear, four for cubic, 1/n on a window of n for area). `scale` is the user's scale factor, if one was
/// given (PyTorch then uses 1 / scale rather than in / out). Computed in `dtype`'s arithmetic, as PyTorch's kernels.
Tensor interpolation_matrix(int64_t in, int64_t out, InterpolateMode mode, bool align_corners,
                            std::optional<double> scale, DType dtype);
/// The output's spatial sizes for input `shape` (N, C, *spatial) and the options; checks them.
std::vector<int64_t> interpolate_sizes(const Shape& shape, const InterpolateOptions& options);
/// A_d^T for each spatial dim d of an input (N, C, *spatial) of `dtype`: what interpolate
/// multiplies by (the checks of interpolate's arguments are here).
std::vector<Tensor> interpolation_matrices(const Shape& shape, DType dtype, const InterpolateOptions& options);
/// x (N, C, *spatial) resampled to the options' size (torch.nn.functional.interpolate): each
/// spatial dim multiplied by its interpolation_matrix.
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

}  // namespace mg
