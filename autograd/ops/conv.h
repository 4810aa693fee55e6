#pragma once
// Convolutions on Variables (autograd/ops/conv.cpp), with F.conv1d's and F.conv2d's keywords.
// The kernels are tensor/ops/conv.cpp's; Conv1d is a Conv2d on images one row high.
#include <concepts>
#include <optional>
#include <string>

#include "minigrad/autograd/variable.h"
#include "minigrad/tensor/ops/conv.h"

namespace mg {

/// A size per spatial dim: one number for every dim (`3`) or one each (`{3, 5}` in 2-D).
struct Size2 {
  Size2(int64_t v) : h(v), w(v) {}  // NOLINT: implicit, so that `.stride = 2` reads as in PyTorch
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  int64_t h, w;
};

/// Padding by rule instead of by size (PyTorch's padding="valid" and padding="same").
enum class PaddingMode {
  /// No padding.
  Valid,
  /// The output as large as the input: stride 1 only, and an even window pads one more zero
  /// after than before, as PyTorch does.
  Same,
};

/// A convolution's padding: zeros on both sides of every spatial dim (`1`, or `{1, 2}` in 2-D), or
/// a PaddingMode (`.padding = PaddingMode::Same`).
struct ConvPadding {
  template <std::integral I>
  ConvPadding(I v) : h(v), w(v) {}  // NOLINT: implicit, as Size2
  ConvPadding(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  ConvPadding(PaddingMode m) : mode(m) {}  // NOLINT: implicit, so that `.padding = PaddingMode::Same` reads
  /// The zeros on each side, when padding by size.
  int64_t h = 0, w = 0;
  /// The rule, when padding by rule (then h and w are unused).
  std::optional<PaddingMode> mode;
};

/// F.conv2d's keywords (PyTorch's defaults).
struct Conv2dFuncOptions {
  Size2 stride = 1;
  ConvPadding padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
};
/// F.conv1d's keywords (PyTorch's defaults).
struct Conv1dFuncOptions {
  int64_t stride = 1;
  /// A number or a PaddingMode.
  ConvPadding padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
};

/// The kernel's geometry for a (kH, kW) window with these options; errors name `op`.
Conv2dArgs conv2d_args(int64_t kernel_h, int64_t kernel_w, const Conv2dFuncOptions& options, std::string_view op);

/// 2-D convolution: x (N, C, H, W) or (C, H, W), weight (O, C / groups, kH, kW), bias (O) or
/// undefined -> (N, O, Ho, Wo) (or (O, Ho, Wo)).
Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias = Variable(),
                const Conv2dFuncOptions& options = {});
/// 1-D convolution: x (N, C, L) or (C, L), weight (O, C / groups, k), bias (O) -> (N, O, Lo).
Variable conv1d(const Variable& x, const Variable& weight, const Variable& bias = Variable(),
                const Conv1dFuncOptions& options = {});

/// F.conv_transpose2d's keywords (PyTorch's defaults; note PyTorch's order of arguments puts
/// groups before dilation).
struct ConvTranspose2dFuncOptions {
  Size2 stride = 1;
  /// Removed from both sides of the output.
  Size2 padding = 0;
  /// Added to one side (bottom, right): picks among the sizes a strided conv maps to one.
  Size2 output_padding = 0;
  int64_t groups = 1;
  Size2 dilation = 1;
};
/// F.conv_transpose1d's keywords.
struct ConvTranspose1dFuncOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t output_padding = 0;
  int64_t groups = 1;
  int64_t dilation = 1;
};
/// Transposed 2-D convolution (the gradient of conv2d with respect to its input, as a layer):
///   x (N, C_in, H, W) or (C_in, H, W), weight (C_in, C_out / groups, kH, kW), bias (C_out)
///   -> (N, C_out, Ho, Wo),  Ho = (H - 1) stride - 2 padding + dilation (kH - 1) + output_padding + 1
/// Each input pixel adds weight[c, :, :, :] times its value into a kH x kW window of the output,
/// the windows `stride` apart. Derivatives: dx = conv2d(dy, weight) with the same geometry,
/// dweight = conv2d's weight gradient with the roles of x and dy swapped, dbias = dy summed over
/// (N, Ho, Wo). Differentiable once (as conv2d).
Variable conv_transpose2d(const Variable& x, const Variable& weight, const Variable& bias = Variable(),
                          const ConvTranspose2dFuncOptions& options = {});
/// Transposed 1-D convolution: x (N, C_in, L) or (C_in, L), weight (C_in, C_out / groups, k) ->
/// (N, C_out, Lo), Lo = (L - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1.
Variable conv_transpose1d(const Variable& x, const Variable& weight, const Variable& bias = Variable(),
                          const ConvTranspose1dFuncOptions& options = {});

}  // namespace mg
