// Pooling's derivative rules. Each backward is a loop of its own in tensor/ops/pool.cpp: the
// gradient goes to the position each maximum came from, or is spread evenly over each window.
#include "minigrad/autograd/ops/pool.h"

#include "minigrad/autograd/autocast.h"
#include "minigrad/autograd/engine.h"
#include "minigrad/autograd/ops/matmul.h"
#include "minigrad/autograd/ops/shape.h"

namespace mg {

Pool2dArgs pool2d_args(Size2 k, Size2 stride, Size2 padding, Size2 dilation, bool ceil_mode) {
  const Size2 s(stride.h == 0 ? k.h : stride.h, stride.w == 0 ? k.w : stride.w);
  return {.kernel_h = k.h,
          .kernel_w = k.w,
          .stride_h = s.h,
          .stride_w = s.w,
          .pad_h = padding.h,
          .pad_w = padding.w,
          .dilation_h = dilation.h,
          .dilation_w = dilation.w,
          .ceil_mode = ceil_mode};
}

// y = max over each window            x (.., H, W)   y, idx (.., Ho, Wo)
// dx = dy added at the position of each window's maximum (idx); 0 elsewhere
std::pair<Variable, Tensor> max_pool2d_with_indices(const Variable& x, Size2 kernel_size, const MaxPool2dOptions& o) {
  MG_CHECK(x.defined(), StateError, "max_pool2d: the tensor is undefined");
  MaxPool2dForward f = mg::max_pool2d(x.data(), pool2d_args(kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode));
  Variable y = record("max_pool2d", f.y, {x}, keep(),
                      [idx = f.indices, shape = x.shape()](const Tensor& dy, const Node&) -> TensorList {
                        return {max_pool2d_backward(dy, idx, shape)};
                      });
  return {y, f.indices};
}

// y = max over each window (max_pool2d_with_indices without the indices)
// dx = dy added at the position of each window's maximum; 0 elsewhere
Variable max_pool2d(const Variable& x, Size2 kernel_size, const MaxPool2dOptions& o) {
  return max_pool2d_with_indices(x, kernel_size, o).first;
}

// y = sum over each window / divisor       dx[h, w] = sum over the windows holding (h, w) of dy / divisor
Variable avg_pool2d(const Variable& x, Size2 kernel_size, const AvgPool2dOptions& o) {
  MG_CHECK(x.defined(), StateError, "avg_pool2d: the tensor is undefined");
  const Pool2dArgs a = pool2d_args(kernel_size, o.stride, o.padding, 1, o.ceil_mode);
  return record("avg_pool2d", mg::avg_pool2d(x.data(), a, o.count_include_pad, o.divisor_override), {x}, keep(),
                [a, o, shape = x.shape()](const Tensor& dy, const Node&) -> TensorList {
                  return {avg_pool2d_backward(dy, shape, a, o.count_include_pad, o.divisor_override)};
                });
}

// y = the mean of each of the windows tiling the input; dx likewise spread back over them
Variable adaptive_avg_pool2d(const Variable& x, Size2 output_size) {
  MG_CHECK(x.defined(), StateError, "adaptive_avg_pool2d: the tensor is undefined");
  return record("adaptive_avg_pool2d", mg::adaptive_avg_pool2d(x.data(), output_size.h, output_size.w), {x}, keep(),
                [shape = x.shape()](const Tensor& dy, const Node&) -> TensorList {
                  return {adaptive_avg_pool2d_backward(dy, shape)};
                });
}

// y = x with each spatial dim d resampled: x.transpose(d, -1) @ A_d^T, transposed back. A_d is a
// constant (interpolation_matrix); the matmuls carry the derivative (and the second one).
Variable interpolate(const Variable& x16, const InterpolateOptions& o) {
  const OpScope scope("interpolate");
  MG_CHECK(x16.defined(), StateError, "interpolate: the input is undefined");
  // Resampling runs in float32 under autocast, as PyTorch's: its products are not autocast, and a
  // bfloat16 input (a product's output under AutocastOptions::bfloat16_outputs) is widened.
  const Variable x = autocast_float32(x16);
  const AutocastGuard full_precision(false);
  const std::vector<Tensor> m = interpolation_matrices(x.shape(), x.dtype(), o);
  Variable y = x;
  for (size_t k = 0; k < m.size(); ++k) {
    const int64_t d = static_cast<int64_t>(2 + k);
    y = matmul(y.transpose(d, -1), Variable(m[k])).transpose(d, -1);
  }
  return y;
}

}  // namespace mg
