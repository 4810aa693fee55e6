#pragma once
// Convolution kernels (tensor/ops/conv.cpp): a 2-D convolution as im2col and one GEMM per image
// and group, forward and backward. Conv1d is the same kernel on images one row high.
#include "minigrad/tensor/tensor.h"

namespace mg {

/// The geometry of a 2-D convolution: stride, zero padding on each side (top and bottom may
/// differ, as padding="same" with an even kernel needs), dilation and groups.
struct Conv2dArgs {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};

/// Output size along one dim: floor((in + pad_before + pad_after - dilation (k - 1) - 1) / stride) + 1.
/// A ShapeError naming `op` when the window does not fit once (or the sum overflows).
int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_before, int64_t pad_after,
                         int64_t dilation, std::string_view op);

/// 2-D convolution (cross-correlation, as PyTorch's):
///   x (N, C, H, W), weight (O, C / groups, kH, kW), bias (O) or undefined -> y (N, O, Ho, Wo)
///   y[n, o, i, j] = bias[o] + sum_{c in o's group, a, b} weight[o, c, a, b] x[n, c, i sh - pt + a dh, j sw - pl + b
///   dw]
/// (x is zero outside the image).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dArgs& args = {});

/// The gradients conv2d_backward returns (undefined where not asked for).
struct Conv2dGrads {
  Tensor dx;       // (N, C, H, W)
  Tensor dweight;  // (O, C / groups, kH, kW)
  Tensor dbias;    // (O)
};
/// conv2d's backward from dy (N, O, Ho, Wo): dx = col2im(W^T dy), dweight = sum_n dy cols^T,
/// dbias = dy summed over n, i, j.
Conv2dGrads conv2d_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Conv2dArgs& args,
                            bool need_dx, bool need_dweight, bool need_dbias);

}  // namespace mg
