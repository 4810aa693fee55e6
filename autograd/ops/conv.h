#pragma once
// Convolutions on Variables (autograd/ops/conv.cpp), with F.conv1d's and F.conv2d's keywords.
// The kernels are tensor/ops/conv.cpp's; Conv1d is a Conv2d on images one row high.
#include <concepts>
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

/// A convolution's padding: zeros on both sides of every spatial dim (`1`, or `{1, 2}` in 2-D), or
/// "valid" (no padding) or "same" (the output as large as the input; stride 1 only, and an even
/// window pads one more zero after than before, as PyTorch does).
struct ConvPadding {
  template <std::integral I>
  ConvPadding(I v) : h(v), w(v) {}  // NOLINT: implicit, as Size2 (a template, so that 0 is not a null string)
  ConvPadding(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  ConvPadding(const char* m) : mode(m) {}  // NOLINT
  int64_t h = 0, w = 0;
  std::string mode;  // "" for sizes, else "same" or "valid"
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
  ConvPadding padding = 0;  // a number, "same" or "valid"
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

}  // namespace mg
