// Convolution's derivative rules: the three gradients come from one backward kernel,
// tensor/ops/conv.cpp:conv2d_backward. An unbatched input (no N) and conv1d (no H) are the same
// op on reshaped views, so they need no rules of their own.
#include "minigrad/autograd/ops/conv.h"

#include "minigrad/autograd/autocast.h"
#include "minigrad/autograd/engine.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/reduce.h"

namespace mg {

Conv2dArgs conv2d_args(int64_t kh, int64_t kw, const Conv2dFuncOptions& o, std::string_view op) {
  Conv2dArgs a;
  a.stride_h = o.stride.h, a.stride_w = o.stride.w;
  a.dilation_h = o.dilation.h, a.dilation_w = o.dilation.w;
  a.groups = o.groups;
  if (!o.padding.mode) {
    a.pad_top = a.pad_bottom = o.padding.h;
    a.pad_left = a.pad_right = o.padding.w;
  } else if (*o.padding.mode == PaddingMode::Same) {
    MG_CHECK(a.stride_h == 1 && a.stride_w == 1, ValueError,
             "{}: padding=PaddingMode::Same needs stride 1, got ({}, {})", op, a.stride_h, a.stride_w);
    MG_CHECK(a.dilation_h >= 1 && a.dilation_w >= 1, ValueError, "{}: dilation must be >= 1, got ({}, {})", op,
             a.dilation_h, a.dilation_w);
    const int64_t th = checked_mul(a.dilation_h, kh - 1, op), tw = checked_mul(a.dilation_w, kw - 1, op);
    a.pad_top = th / 2, a.pad_bottom = th - th / 2;
    a.pad_left = tw / 2, a.pad_right = tw - tw / 2;
  }  // PaddingMode::Valid: no padding
  return a;
}

namespace {
// records the op on 4-D x with the kernel's arguments already worked out, as `name` (conv1d records
// itself through this: its node, and the error when differentiated twice, say conv1d)
Variable conv2d_recorded(const Variable& x16, const Variable& weight, const Variable& bias, const Conv2dArgs& a,
                         const char* name = "conv2d") {
  // (convolutions run in float32 under autocast: a bfloat16 input, a product's output, is widened)
  const Variable x = autocast_float32(x16);
  return record(name, mg::conv2d(x.data(), weight.data(), bias.defined() ? bias.data() : Tensor(), a),
                {x, weight, bias}, keep(0, 1),
                [x = x.data(), w = weight.data(), a](const Tensor& dy, const Node& n) -> TensorList {
                  Conv2dGrads g = conv2d_backward(dy, x, w, a, n.needs(0), n.needs(1), n.needs(2));
                  return {g.dx, g.dweight, g.dbias};
                });
}
}  // namespace

// y = conv(x, W) + b                x (N, C, H, W)   W (O, C/g, kH, kW)   b (O)   y (N, O, Ho, Wo)
// dx = col2im(W^T dy)   dW = sum_n dy cols(x)^T   db = sum_{n,i,j} dy      (tensor/ops/conv.cpp)
Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias, const Conv2dFuncOptions& o) {
  MG_CHECK(x.defined() && weight.defined(), StateError, "conv2d: an operand is undefined");
  if (x.dim() == 3) return squeeze(conv2d(unsqueeze(x, 0), weight, bias, o), 0);  // one unbatched image
  MG_CHECK(weight.dim() == 4, ShapeError,
           "conv2d: expected weight (out_channels, in_channels / groups, kH, kW), got shape {}",
           shape_str(weight.shape()));
  return conv2d_recorded(x, weight, bias, conv2d_args(weight.size(2), weight.size(3), o, "conv2d"));
}

// conv1d(x, W) = conv2d on (N, C, 1, L) with W (O, C/g, 1, k), the height dim dropped after
// conv1d checks its arguments in its own (3-D) terms before handing them, reshaped, to conv2d,
// whose messages would show 4-D shapes the user never made; anything left names conv1d (OpScope).
Variable conv1d(const Variable& x16, const Variable& weight, const Variable& bias, const Conv1dFuncOptions& o) {
  const OpScope scope("conv1d");
  MG_CHECK(x16.defined() && weight.defined(), StateError, "conv1d: an operand is undefined");
  const Variable x = autocast_float32(x16);  // (float32 under autocast, as conv2d)
  if (x.dim() == 2) return squeeze(conv1d(unsqueeze(x, 0), weight, bias, o), 0);
  MG_CHECK(x.dim() == 3, ShapeError, "conv1d: expected input (N, C, L) or (C, L), got shape {}", shape_str(x.shape()));
  MG_CHECK(weight.dim() == 3, ShapeError,
           "conv1d: expected weight (out_channels, in_channels / groups, k), got shape {}", shape_str(weight.shape()));
  MG_CHECK(o.padding.mode.has_value() || o.padding.h == o.padding.w, ValueError,
           "conv1d: padding is one number, got ({}, {})", o.padding.h, o.padding.w);
  MG_CHECK(is_floating(x.dtype()) && x.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == x.dtype()),
           DTypeError, "conv1d: input {}, weight {}{} must be one floating dtype", dtype_name(x.dtype()),
           dtype_name(weight.dtype()), bias.defined() ? fmt::format(" and bias {}", dtype_name(bias.dtype())) : "");
  MG_CHECK(weight.size(2) >= 1, ShapeError, "conv1d: the kernel size must be >= 1, got weight {}",
           shape_str(weight.shape()));
  MG_CHECK(o.groups >= 1, ValueError, "conv1d: groups must be >= 1, got {}", o.groups);
  MG_CHECK(weight.size(0) % o.groups == 0, ValueError, "conv1d: out_channels {} is not divisible by groups {}",
           weight.size(0), o.groups);
  MG_CHECK(!bias.defined() || bias.shape() == Shape{weight.size(0)}, ShapeError,
           "conv1d: bias has shape {} but weight {} needs ({},)", shape_str(bias.shape()), shape_str(weight.shape()),
           weight.size(0));
  MG_CHECK(x.size(1) == checked_mul(weight.size(1), o.groups, "conv1d"), ShapeError,
           "conv1d: input has {} channels but weight {} with groups={} expects {}", x.size(1),
           shape_str(weight.shape()), o.groups, weight.size(1) * o.groups);
  const Conv2dArgs a = conv2d_args(1, weight.size(2),
                                   {.stride = {1, o.stride},
                                    .padding = !o.padding.mode ? ConvPadding(0, o.padding.w) : o.padding,
                                    .dilation = {1, o.dilation},
                                    .groups = o.groups},
                                   "conv1d");
  MG_CHECK(a.stride_w >= 1 && a.dilation_w >= 1 && a.pad_left >= 0, ValueError,
           "conv1d: stride and dilation must be >= 1 and padding >= 0, got {}, {} and {}", a.stride_w, a.dilation_w,
           a.pad_left);
  conv_output_size(x.size(2), weight.size(2), a.stride_w, a.pad_left, a.pad_right, a.dilation_w, "conv1d");
  return squeeze(conv2d_recorded(unsqueeze(x, 2), unsqueeze(weight, 2), bias, a, "conv1d"), 2);
}

namespace {
// The conv2d whose input gradient is this transposed convolution: its input would be the output
// (N, C_out, Ho, Wo), its weight the same (C_in, C_out / groups, kH, kW) tensor.
struct Transposed {
  Conv2dArgs a;
  int64_t Ho, Wo;
};
Transposed transposed_geometry(const Variable& x, const Variable& w, const Variable& b,
                               const ConvTranspose2dFuncOptions& o, std::string_view op) {
  MG_CHECK(x.dim() == 4, ShapeError, "{}: expected input (N, C_in, H, W), got shape {}", op, shape_str(x.shape()));
  MG_CHECK(w.dim() == 4, ShapeError, "{}: expected weight (C_in, C_out / groups, kH, kW), got shape {}", op,
           shape_str(w.shape()));
  MG_CHECK(is_floating(x.dtype()) && x.dtype() == w.dtype() && (!b.defined() || b.dtype() == x.dtype()), DTypeError,
           "{}: input {}, weight {}{} must be one floating dtype", op, dtype_name(x.dtype()), dtype_name(w.dtype()),
           b.defined() ? fmt::format(" and bias {}", dtype_name(b.dtype())) : "");
  MG_CHECK(o.groups >= 1 && w.size(0) % o.groups == 0, ValueError, "{}: groups {} must be >= 1 and divide C_in {}", op,
           o.groups, w.size(0));
  MG_CHECK(x.size(1) == w.size(0), ShapeError, "{}: input has {} channels but weight {} expects {} (its dim 0)", op,
           x.size(1), shape_str(w.shape()), w.size(0));
  const int64_t cout = checked_mul(w.size(1), o.groups, op);
  MG_CHECK(!b.defined() || b.shape() == Shape{cout}, ShapeError, "{}: bias has shape {} but the output has {} channels",
           op, shape_str(b.shape()), cout);
  MG_CHECK(o.stride.h >= 1 && o.stride.w >= 1 && o.dilation.h >= 1 && o.dilation.w >= 1 && o.padding.h >= 0 &&
               o.padding.w >= 0,
           ValueError, "{}: stride and dilation must be >= 1 and padding >= 0", op);
  MG_CHECK(o.output_padding.h >= 0 && o.output_padding.w >= 0 &&
               (o.output_padding.h < o.stride.h || o.output_padding.h < o.dilation.h) &&
               (o.output_padding.w < o.stride.w || o.output_padding.w < o.dilation.w),
           ValueError, "{}: output_padding ({}, {}) must be smaller than the stride or the dilation", op,
           o.output_padding.h, o.output_padding.w);
  auto out = [&](int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t op_) {
    return checked_add(checked_add(checked_mul(in - 1, s, op), checked_mul(d, k - 1, op), op), op_ + 1 - 2 * p, op);
  };
  Transposed t;
  t.Ho = out(x.size(2), w.size(2), o.stride.h, o.padding.h, o.dilation.h, o.output_padding.h);
  t.Wo = out(x.size(3), w.size(3), o.stride.w, o.padding.w, o.dilation.w, o.output_padding.w);
  MG_CHECK(t.Ho > 0 && t.Wo > 0 && x.size(2) > 0 && x.size(3) > 0, ShapeError,
           "{}: input {} with weight {} gives an output of {} x {}", op, shape_str(x.shape()), shape_str(w.shape()),
           t.Ho, t.Wo);
  t.a.stride_h = o.stride.h, t.a.stride_w = o.stride.w;
  t.a.pad_top = t.a.pad_bottom = o.padding.h;
  t.a.pad_left = t.a.pad_right = o.padding.w;
  t.a.dilation_h = o.dilation.h, t.a.dilation_w = o.dilation.w;
  t.a.groups = o.groups;
  return t;
}
}  // namespace

namespace {
// y = conv2d's input gradient for "output gradient" x: y = col2im(W^T x) + b
// dx = conv2d(dy, W)   dW = conv2d's weight gradient with input dy and output gradient x   db = sum dy
// Recorded as `name`: conv_transpose1d records itself through this.
Variable conv_transpose2d_named(const Variable& x16, const Variable& weight, const Variable& bias,
                                const ConvTranspose2dFuncOptions& o, const char* name) {
  MG_CHECK(x16.defined() && weight.defined(), StateError, "{}: an operand is undefined", name);
  if (x16.dim() == 3) return squeeze(conv_transpose2d_named(unsqueeze(x16, 0), weight, bias, o, name), 0);  // unbatched
  const Variable x = autocast_float32(x16);  // (float32 under autocast, as conv2d)
  const Transposed t = transposed_geometry(x, weight, bias, o, name);
  const int64_t N = x.size(0), cout = weight.size(1) * o.groups;
  // conv2d_backward reads only the shape of its input argument for dx: one zero, broadcast (no memory)
  const Tensor shape_only = zeros({}, x.dtype()).expand({N, cout, t.Ho, t.Wo});
  Tensor y = conv2d_backward(x.data(), shape_only, weight.data(), t.a, true, false, false).dx;
  if (bias.defined()) y = y + bias.data().reshape({1, cout, 1, 1});
  return record(name, std::move(y), {x, weight, bias}, keep(0, 1),
                [x = x.data(), w = weight.data(), a = t.a](const Tensor& dy, const Node& n) -> TensorList {
                  return {n.needs(0) ? conv2d(dy, w, Tensor(), a) : Tensor(),
                          n.needs(1) ? conv2d_backward(x, dy, w, a, false, true, false).dweight : Tensor(),
                          n.needs(2) ? sum(dy, {0, 2, 3}) : Tensor()};
                });
}
}  // namespace

// y = the input gradient of the conv2d whose transpose this is   x (N, Cin, H, W)  w (Cin, Cout/g, kh, kw)
// dx = conv2d(dy, w)    dw = conv2d_backward's weight gradient with x and dy swapped    db = dy summed over N, H, W
Variable conv_transpose2d(const Variable& x, const Variable& weight, const Variable& bias,
                          const ConvTranspose2dFuncOptions& o) {
  return conv_transpose2d_named(x, weight, bias, o, "conv_transpose2d");
}

// conv_transpose1d = conv_transpose2d on (N, C, 1, L) with W (C_in, C_out/g, 1, k)
Variable conv_transpose1d(const Variable& x, const Variable& weight, const Variable& bias,
                          const ConvTranspose1dFuncOptions& o) {
  const OpScope scope("conv_transpose1d");
  MG_CHECK(x.defined() && weight.defined(), StateError, "conv_transpose1d: an operand is undefined");
  if (x.dim() == 2) return squeeze(conv_transpose1d(unsqueeze(x, 0), weight, bias, o), 0);
  MG_CHECK(x.dim() == 3, ShapeError, "conv_transpose1d: expected input (N, C_in, L) or (C_in, L), got shape {}",
           shape_str(x.shape()));
  MG_CHECK(weight.dim() == 3, ShapeError, "conv_transpose1d: expected weight (C_in, C_out / groups, k), got shape {}",
           shape_str(weight.shape()));
  return squeeze(conv_transpose2d_named(unsqueeze(x, 2), unsqueeze(weight, 2), bias,
                                        {.stride = {1, o.stride},
                                         .padding = {0, o.padding},
                                         .output_padding = {0, o.output_padding},
                                         .groups = o.groups,
                                         .dilation = {1, o.dilation}},
                                        "conv_transpose1d"),
                 2);
}

}  // namespace mg
