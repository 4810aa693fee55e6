#include "minigrad/nn/pooling.h"

namespace mg::nn {

MaxPool2d::MaxPool2d(Size2 kernel_size, MaxPool2dOptions options) : kernel_size(kernel_size), options(options) {}

AvgPool2d::AvgPool2d(Size2 kernel_size, AvgPool2dOptions options) : kernel_size(kernel_size), options(options) {}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 output_size) : output_size(output_size) {
  MG_CHECK(output_size.h >= 1 && output_size.w >= 1, ValueError,
           "AdaptiveAvgPool2d: output_size must be >= 1, got ({}, {})", output_size.h, output_size.w);
}

}  // namespace mg::nn
