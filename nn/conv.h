#pragma once
// Convolution layers: nn::Conv1d and nn::Conv2d, with PyTorch's arguments, defaults, parameter
// names and initialisation. The ops are autograd/ops/conv.h's.
#include "minigrad/nn/module.h"

namespace mg::nn {

/// Conv2d's optional settings (PyTorch's defaults).
struct Conv2dOptions {
  Size2 stride = 1;
  /// Sizes, or a PaddingMode.
  ConvPadding padding = 0;
  Size2 dilation = 1;
  /// in_channels and out_channels split into this many separate convolutions.
  int64_t groups = 1;
  bool bias = true;
};

/// 2-D convolution: (N, in_channels, H, W) -> (N, out_channels, Ho, Wo). weight
/// (out_channels, in_channels / groups, kH, kW) and bias (out_channels), both
/// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels / groups * kH * kW, as PyTorch.
class Conv2d : public Callable<Conv2d> {
 public:
  /// Conv2d(1, 16, 3, {.padding = 1}): 16 filters of 3x3 over one input channel.
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Conv2dOptions options = {},
         Generator& gen = default_generator());
  /// x: (N, C, H, W) or (C, H, W).
  Variable forward(const Variable& x) const;
  /// Draw new initial values.
  void reset_parameters(Generator& gen = default_generator());
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;

  const int64_t in_channels, out_channels;
  const Size2 kernel_size;
  const Conv2dOptions options;
  Variable weight;  // (out_channels, in_channels / groups, kH, kW)
  Variable bias;    // (out_channels), undefined when bias=false
};

/// Conv1d's optional settings (PyTorch's defaults).
struct Conv1dOptions {
  int64_t stride = 1;
  /// A size, or a PaddingMode.
  ConvPadding padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

/// 1-D convolution: (N, in_channels, L) -> (N, out_channels, Lo); weight
/// (out_channels, in_channels / groups, kernel_size), initialised as Conv2d's.
class Conv1d : public Callable<Conv1d> {
 public:
  /// Conv1d(8, 16, 5, {.padding = 2}).
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv1dOptions options = {},
         Generator& gen = default_generator());
  /// x: (N, C, L) or (C, L).
  Variable forward(const Variable& x) const;
  /// Draw new initial values.
  void reset_parameters(Generator& gen = default_generator());
  std::string type_name() const override { return "Conv1d"; }
  std::string extra_repr() const override;

  const int64_t in_channels, out_channels, kernel_size;
  const Conv1dOptions options;
  Variable weight;  // (out_channels, in_channels / groups, kernel_size)
  Variable bias;    // (out_channels), undefined when bias=false
};

/// ConvTranspose2d's optional settings (PyTorch's defaults and order).
struct ConvTranspose2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 output_padding = 0;
  int64_t groups = 1;
  bool bias = true;
  Size2 dilation = 1;
};

/// Transposed 2-D convolution (conv_transpose2d): (N, in_channels, H, W) -> (N, out_channels, Ho, Wo),
/// the layer that upsamples in decoders and GAN generators. weight (in_channels, out_channels /
/// groups, kH, kW), bias (out_channels), both U(-1/sqrt(fan_in)..) with PyTorch's fan_in =
/// out_channels / groups * kH * kW (its dim 1, as PyTorch computes it).
class ConvTranspose2d : public Callable<ConvTranspose2d> {
 public:
  /// ConvTranspose2d(16, 8, 4, {.stride = 2, .padding = 1}): doubles H and W.
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, ConvTranspose2dOptions options = {},
                  Generator& gen = default_generator());
  /// x: (N, C, H, W) or (C, H, W).
  Variable forward(const Variable& x) const;
  std::string type_name() const override { return "ConvTranspose2d"; }
  std::string extra_repr() const override;

  const int64_t in_channels, out_channels;
  const Size2 kernel_size;
  const ConvTranspose2dOptions options;
  Variable weight;  // (in_channels, out_channels / groups, kH, kW)
  Variable bias;    // (out_channels), undefined when bias=false
};

/// ConvTranspose1d's optional settings (PyTorch's defaults and order).
struct ConvTranspose1dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t output_padding = 0;
  int64_t groups = 1;
  bool bias = true;
  int64_t dilation = 1;
};

/// Transposed 1-D convolution: (N, in_channels, L) -> (N, out_channels, Lo); weight
/// (in_channels, out_channels / groups, kernel_size).
class ConvTranspose1d : public Callable<ConvTranspose1d> {
 public:
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, ConvTranspose1dOptions options = {},
                  Generator& gen = default_generator());
  /// x: (N, C, L) or (C, L).
  Variable forward(const Variable& x) const;
  std::string type_name() const override { return "ConvTranspose1d"; }
  std::string extra_repr() const override;

  const int64_t in_channels, out_channels, kernel_size;
  const ConvTranspose1dOptions options;
  Variable weight;  // (in_channels, out_channels / groups, kernel_size)
  Variable bias;    // (out_channels), undefined when bias=false
};

}  // namespace mg::nn
