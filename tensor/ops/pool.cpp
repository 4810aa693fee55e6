// Pooling over 2-D windows. Every plane (one (n, c) of an (N, C, H, W) input) is pooled on its
// own, so planes split across threads, and each output and each input gradient is summed in a
// fixed order within its plane: the bits do not depend on the thread count.
//
// A window of output (i, j) starts at (i sh - ph, j sw - pw); positions outside the input are the
// padding, which max pooling never picks and average pooling counts as zeros (or not at all).
#include "minigrad/tensor/ops/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "minigrad/tensor/ops/matmul.h"
#include "minigrad/tensor/parallel.h"

namespace mg {
namespace {

struct Planes {
  Shape lead;  // the dims before (H, W)
  int64_t P, H, W;
};

Planes planes_of(const Tensor& x, std::string_view op) {
  MG_CHECK(x.defined(), StateError, "{}: the tensor is undefined", op);
  MG_CHECK(x.dim() == 3 || x.dim() == 4, ShapeError, "{}: expected input (N, C, H, W) or (C, H, W), got shape {}", op,
           shape_str(x.shape()));
  MG_CHECK(is_floating(x.dtype()), DTypeError, "{}: expected a floating tensor, got {}", op, dtype_name(x.dtype()));
  Shape lead(x.shape().begin(), x.shape().end() - 2);
  return {lead, numel_of(lead), x.size(-2), x.size(-1)};
}

Shape with_plane(Shape lead, int64_t h, int64_t w) {
  lead.push_back(h);
  lead.push_back(w);
  return lead;
}

void check_window(const Pool2dArgs& a, bool dilation_allowed, std::string_view op) {
  MG_CHECK(a.kernel_h >= 1 && a.kernel_w >= 1, ValueError, "{}: kernel_size must be >= 1, got ({}, {})", op, a.kernel_h,
           a.kernel_w);
  MG_CHECK(a.stride_h >= 1 && a.stride_w >= 1, ValueError, "{}: stride must be >= 1, got ({}, {})", op, a.stride_h,
           a.stride_w);
  MG_CHECK(a.dilation_h >= 1 && a.dilation_w >= 1, ValueError, "{}: dilation must be >= 1, got ({}, {})", op,
           a.dilation_h, a.dilation_w);
  MG_CHECK(dilation_allowed || (a.dilation_h == 1 && a.dilation_w == 1), ValueError,
           "{}: has no dilation, got ({}, {})", op, a.dilation_h, a.dilation_w);
  MG_CHECK(a.pad_h >= 0 && a.pad_w >= 0 && a.pad_h <= a.kernel_h / 2 && a.pad_w <= a.kernel_w / 2, ValueError,
           "{}: padding must be >= 0 and at most half the kernel size, got padding ({}, {}) for kernel ({}, {})", op,
           a.pad_h, a.pad_w, a.kernel_h, a.kernel_w);
}

// avg_pool2d's window of output (i, j), clipped to the input, and its divisor
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  double divisor;
};
AvgWindow avg_window(int64_t i, int64_t j, int64_t H, int64_t W, const Pool2dArgs& a, bool count_include_pad,
                     std::optional<int64_t> divisor_override) {
  int64_t h0 = i * a.stride_h - a.pad_h, w0 = j * a.stride_w - a.pad_w;
  int64_t h1 = std::min(h0 + a.kernel_h, H + a.pad_h), w1 = std::min(w0 + a.kernel_w, W + a.pad_w);
  const int64_t with_pad = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0), h1 = std::min(h1, H), w1 = std::min(w1, W);
  const double divisor = divisor_override    ? static_cast<double>(*divisor_override)
                         : count_include_pad ? static_cast<double>(with_pad)
                                             : static_cast<double>((h1 - h0) * (w1 - w0));
  return {h0, h1, w0, w1, divisor};
}

int64_t adaptive_start(int64_t i, int64_t out, int64_t in) { return (i * in) / out; }
int64_t adaptive_end(int64_t i, int64_t out, int64_t in) { return ((i + 1) * in + out - 1) / out; }

}  // namespace

int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode,
                         std::string_view op) {
  const int64_t span =
      checked_add(checked_add(in, checked_mul(2, pad, op), op), -checked_mul(dilation, kernel - 1, op) - 1, op);
  int64_t out = span >= 0 ? span / stride + 1 : 0;
  // ceil_mode: one more window over the end, if it starts inside the input or the left padding
  // (out * stride < in + pad, written as a division so that no product can overflow)
  if (ceil_mode && span >= 0 && span % stride != 0 && out <= (checked_add(in, pad, op) - 1) / stride) ++out;
  MG_CHECK(
      out >= 1, ShapeError,
      "{}: the window (kernel {}, dilation {}, padding {}) does not fit an input of size {}: the output would be empty",
      op, kernel, dilation, pad, in);
  return out;
}

// y = max over the window, idx = where (h W + w); NaN wins          x (.., H, W)   y, idx (.., Ho, Wo)
MaxPool2dForward max_pool2d(const Tensor& x0, const Pool2dArgs& a) {
  const Planes p = planes_of(x0, "max_pool2d");
  check_window(a, true, "max_pool2d");
  const int64_t Ho = pool_output_size(p.H, a.kernel_h, a.stride_h, a.pad_h, a.dilation_h, a.ceil_mode, "max_pool2d");
  const int64_t Wo = pool_output_size(p.W, a.kernel_w, a.stride_w, a.pad_w, a.dilation_w, a.ceil_mode, "max_pool2d");
  const Tensor x = x0.contiguous();
  MaxPool2dForward out{empty(with_plane(p.lead, Ho, Wo), x.dtype()), empty(with_plane(p.lead, Ho, Wo), DType::Int64)};
  visit_float(x.dtype(), "max_pool2d", [&]<class T>() {
    const T* px = x.data<T>();
    T* py = out.y.data<T>();
    int64_t* pi = out.indices.data<int64_t>();
    parallel_for(0, p.P, grain_for(Ho * Wo * a.kernel_h * a.kernel_w), [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q) {
        const T* plane = px + q * p.H * p.W;
        for (int64_t i = 0; i < Ho; ++i)
          for (int64_t j = 0; j < Wo; ++j) {
            T best = -std::numeric_limits<T>::infinity();
            int64_t where = -1, first = -1;
            for (int64_t u = 0; u < a.kernel_h; ++u) {
              const int64_t h = i * a.stride_h - a.pad_h + u * a.dilation_h;
              if (h < 0 || h >= p.H) continue;
              for (int64_t v = 0; v < a.kernel_w; ++v) {
                const int64_t w = j * a.stride_w - a.pad_w + v * a.dilation_w;
                if (w < 0 || w >= p.W) continue;
                const T val = plane[h * p.W + w];
                if (first < 0) first = h * p.W + w;
                if (val > best || std::isnan(val)) best = val, where = h * p.W + w;
              }
            }
            py[(q * Ho + i) * Wo + j] = best;
            pi[(q * Ho + i) * Wo + j] = where >= 0 ? where : first;  // all -inf: the first position
          }
      }
    });
  });
  return out;
}

// dx[.., idx[.., i, j]] += dy[.., i, j]                     dy, idx (.., Ho, Wo)   dx (x_shape)
Tensor max_pool2d_backward(const Tensor& dy0, const Tensor& indices, const Shape& x_shape) {
  MG_CHECK(dy0.defined() && indices.defined(), StateError, "max_pool2d_backward: an operand is undefined");
  MG_CHECK(indices.dtype() == DType::Int64 && dy0.shape() == indices.shape(), ShapeError,
           "max_pool2d_backward: dy {} and indices {} ({}) must have one shape, indices int64", shape_str(dy0.shape()),
           shape_str(indices.shape()), dtype_name(indices.dtype()));
  MG_CHECK(x_shape.size() == dy0.shape().size() && x_shape.size() >= 2 &&
               std::equal(x_shape.begin(), x_shape.end() - 2, dy0.shape().begin()),
           ShapeError, "max_pool2d_backward: dy {} does not fit the input {}", shape_str(dy0.shape()),
           shape_str(x_shape));
  MG_CHECK(is_floating(dy0.dtype()), DTypeError, "max_pool2d_backward: expected a floating dy, got {}",
           dtype_name(dy0.dtype()));
  const int64_t HW = x_shape[x_shape.size() - 2] * x_shape.back(), per = dy0.size(-2) * dy0.size(-1);
  const int64_t P = numel_of(Shape(x_shape.begin(), x_shape.end() - 2));
  const Tensor dy = dy0.contiguous(), idx = indices.contiguous();
  Tensor dx = zeros(x_shape, dy.dtype());
  visit_float(dy.dtype(), "max_pool2d_backward", [&]<class T>() {
    const T* pg = dy.data<T>();
    const int64_t* pi = idx.data<int64_t>();
    T* pdx = dx.data<T>();
    parallel_for(0, P, grain_for(per), [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q)
        for (int64_t k = 0; k < per; ++k) {
          const int64_t at = pi[q * per + k];
          MG_CHECK(at >= 0 && at < HW, IndexError, "max_pool2d_backward: index {} is outside a plane of {} elements",
                   at, HW);
          pdx[q * HW + at] += pg[q * per + k];
        }
    });
  });
  return dx;
}

// y = sum over the window / divisor                         x (.., H, W)   y (.., Ho, Wo)
Tensor avg_pool2d(const Tensor& x0, const Pool2dArgs& a, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  const Planes p = planes_of(x0, "avg_pool2d");
  check_window(a, false, "avg_pool2d");
  MG_CHECK(!divisor_override || *divisor_override != 0, ValueError, "avg_pool2d: divisor_override must not be 0");
  const int64_t Ho = pool_output_size(p.H, a.kernel_h, a.stride_h, a.pad_h, 1, a.ceil_mode, "avg_pool2d");
  const int64_t Wo = pool_output_size(p.W, a.kernel_w, a.stride_w, a.pad_w, 1, a.ceil_mode, "avg_pool2d");
  const Tensor x = x0.contiguous();
  Tensor y = empty(with_plane(p.lead, Ho, Wo), x.dtype());
  visit_float(x.dtype(), "avg_pool2d", [&]<class T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    parallel_for(0, p.P, grain_for(Ho * Wo * a.kernel_h * a.kernel_w), [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q)
        for (int64_t i = 0; i < Ho; ++i)
          for (int64_t j = 0; j < Wo; ++j) {
            const AvgWindow win = avg_window(i, j, p.H, p.W, a, count_include_pad, divisor_override);
            double s = 0;
            for (int64_t h = win.h0; h < win.h1; ++h)
              for (int64_t w = win.w0; w < win.w1; ++w) s += px[(q * p.H + h) * p.W + w];
            py[(q * Ho + i) * Wo + j] = static_cast<T>(win.h0 < win.h1 && win.w0 < win.w1 ? s / win.divisor : 0.0);
          }
    });
  });
  return y;
}

// dx[.., h, w] = sum over the windows (i, j) holding (h, w) of dy[.., i, j] / divisor(i, j)
Tensor avg_pool2d_backward(const Tensor& dy0, const Shape& x_shape, const Pool2dArgs& a, bool count_include_pad,
                           std::optional<int64_t> divisor_override) {
  MG_CHECK(dy0.defined(), StateError, "avg_pool2d_backward: dy is undefined");
  MG_CHECK(x_shape.size() == 3 || x_shape.size() == 4, ShapeError,
           "avg_pool2d_backward: expected an input shape (N, C, H, W) or "
           "(C, H, W), got {}",
           shape_str(x_shape));
  check_window(a, false, "avg_pool2d_backward");
  const int64_t H = x_shape[x_shape.size() - 2], W = x_shape.back();
  const int64_t Ho = pool_output_size(H, a.kernel_h, a.stride_h, a.pad_h, 1, a.ceil_mode, "avg_pool2d_backward");
  const int64_t Wo = pool_output_size(W, a.kernel_w, a.stride_w, a.pad_w, 1, a.ceil_mode, "avg_pool2d_backward");
  const Shape lead(x_shape.begin(), x_shape.end() - 2);
  MG_CHECK(dy0.shape() == with_plane(lead, Ho, Wo), ShapeError,
           "avg_pool2d_backward: dy has shape {} but the output is {}", shape_str(dy0.shape()),
           shape_str(with_plane(lead, Ho, Wo)));
  MG_CHECK(is_floating(dy0.dtype()), DTypeError, "avg_pool2d_backward: expected a floating dy, got {}",
           dtype_name(dy0.dtype()));
  const Tensor dy = dy0.contiguous();
  Tensor dx = zeros(x_shape, dy.dtype());
  visit_float(dy.dtype(), "avg_pool2d_backward", [&]<class T>() {
    const T* pg = dy.data<T>();
    T* pdx = dx.data<T>();
    parallel_for(0, numel_of(lead), grain_for(Ho * Wo * a.kernel_h * a.kernel_w), [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q)
        for (int64_t i = 0; i < Ho; ++i)
          for (int64_t j = 0; j < Wo; ++j) {
            const AvgWindow win = avg_window(i, j, H, W, a, count_include_pad, divisor_override);
            const T g = static_cast<T>(pg[(q * Ho + i) * Wo + j] / win.divisor);
            for (int64_t h = win.h0; h < win.h1; ++h)
              for (int64_t w = win.w0; w < win.w1; ++w) pdx[(q * H + h) * W + w] += g;
          }
    });
  });
  return dx;
}

// y[.., i, j] = mean of x over rows [h0(i), h1(i)) and columns [w0(j), w1(j))
Tensor adaptive_avg_pool2d(const Tensor& x0, int64_t Ho, int64_t Wo) {
  const Planes p = planes_of(x0, "adaptive_avg_pool2d");
  MG_CHECK(Ho >= 1 && Wo >= 1, ValueError, "adaptive_avg_pool2d: output_size must be >= 1, got ({}, {})", Ho, Wo);
  MG_CHECK(p.H >= 1 && p.W >= 1, ShapeError,
           "adaptive_avg_pool2d: the input's height and width must be >= 1, got shape {}", shape_str(x0.shape()));
  checked_numel(with_plane(p.lead, Ho, Wo), "adaptive_avg_pool2d");
  const Tensor x = x0.contiguous();
  Tensor y = empty(with_plane(p.lead, Ho, Wo), x.dtype());
  visit_float(x.dtype(), "adaptive_avg_pool2d", [&]<class T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    parallel_for(0, p.P, grain_for(p.H * p.W), [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q)
        for (int64_t i = 0; i < Ho; ++i)
          for (int64_t j = 0; j < Wo; ++j) {
            const int64_t h0 = adaptive_start(i, Ho, p.H), h1 = adaptive_end(i, Ho, p.H);
            const int64_t w0 = adaptive_start(j, Wo, p.W), w1 = adaptive_end(j, Wo, p.W);
            double s = 0;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) s += px[(q * p.H + h) * p.W + w];
            py[(q * Ho + i) * Wo + j] = static_cast<T>(s / static_cast<double>((h1 - h0) * (w1 - w0)));
          }
    });
  });
  return y;
}

// dx[.., h, w] = sum over the windows (i, j) holding (h, w) of dy[.., i, j] / their size
Tensor adaptive_avg_pool2d_backward(const Tensor& dy0, const Shape& x_shape) {
  MG_CHECK(dy0.defined(), StateError, "adaptive_avg_pool2d_backward: dy is undefined");
  MG_CHECK((x_shape.size() == 3 || x_shape.size() == 4) && dy0.dim() == static_cast<int64_t>(x_shape.size()) &&
               std::equal(x_shape.begin(), x_shape.end() - 2, dy0.shape().begin()),
           ShapeError, "adaptive_avg_pool2d_backward: dy {} does not fit the input {}", shape_str(dy0.shape()),
           shape_str(x_shape));
  MG_CHECK(is_floating(dy0.dtype()), DTypeError, "adaptive_avg_pool2d_backward: expected a floating dy, got {}",
           dtype_name(dy0.dtype()));
  const int64_t H = x_shape[x_shape.size() - 2], W = x_shape.back(), Ho = dy0.size(-2), Wo = dy0.size(-1);
  const Tensor dy = dy0.contiguous();
  Tensor dx = zeros(x_shape, dy.dtype());
  visit_float(dy.dtype(), "adaptive_avg_pool2d_backward", [&]<class T>() {
    const T* pg = dy.data<T>();
    T* pdx = dx.data<T>();
    parallel_for(0, numel_of(Shape(x_shape.begin(), x_shape.end() - 2)), grain_for(H * W), [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q)
        for (int64_t i = 0; i < Ho; ++i)
          for (int64_t j = 0; j < Wo; ++j) {
            const int64_t h0 = adaptive_start(i, Ho, H), h1 = adaptive_end(i, Ho, H);
            const int64_t w0 = adaptive_start(j, Wo, W), w1 = adaptive_end(j, Wo, W);
            const T g = static_cast<T>(pg[(q * Ho + i) * Wo + j] / static_cast<double>((h1 - h0) * (w1 - w0)));
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) pdx[(q * H + h) * W + w] += g;
          }
    });
  });
  return dx;
}

// ---- interpolate ----

namespace {
// Row i of the matrix for `out` positions read from `in`, in T's arithmetic (float for float32
// inputs, as PyTorch's opmath). With ratio = in / out (or 1 / scale, or (in - 1) / (out - 1) with
// align_corners):
//   nearest        floor(i * ratio)
//   nearest-exact  floor((i + 0.5) * ratio)
//   linear         source s = align_corners ? i ratio : max((i + 0.5) ratio - 0.5, 0); weights
//                  1 - frac(s), frac(s) on floor(s) and the next position (the same one at the edge)
//   cubic          s as linear but not clamped at 0; weights W(t + 1), W(t), W(1 - t), W(2 - t) on
//                  floor(s) - 1 .. floor(s) + 2, t = frac(s), indices clamped to [0, in - 1], with Keys'
//                  kernel W(x) = (a+2)|x|^3 - (a+3)|x|^2 + 1 for |x| <= 1, a|x|^3 - 5a|x|^2 + 8a|x| - 4a
//                  for 1 < |x| < 2, a = -0.75
//   area           the mean over [floor(i in / out), ceil((i + 1) in / out))
template <class T>
void fill_interpolation(double* a, int64_t in, int64_t out, InterpolateMode mode, bool align,
                        std::optional<double> scale) {
  if (mode == InterpolateMode::Area) {
    for (int64_t i = 0; i < out; ++i) {
      const int64_t lo = (i * in) / out, hi = ((i + 1) * in + out - 1) / out;  // (sizes checked: no overflow)
      for (int64_t j = lo; j < hi; ++j) a[i * in + j] = 1.0 / static_cast<double>(hi - lo);
    }
    return;
  }
  const T ratio = align ? (out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0))
                        : (scale ? static_cast<T>(1.0 / *scale) : static_cast<T>(in) / static_cast<T>(out));
  const T A = T(-0.75);
  auto near = [&](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [&](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  for (int64_t i = 0; i < out; ++i) {
    double* row = a + i * in;
    if (mode == InterpolateMode::Nearest || mode == InterpolateMode::NearestExact) {
      const T pos = mode == InterpolateMode::Nearest ? static_cast<T>(i) * ratio : (static_cast<T>(i) + T(0.5)) * ratio;
      const int64_t j = in == out ? i : std::min(static_cast<int64_t>(std::floor(pos)), in - 1);
      row[j] = 1;
      continue;
    }
    if (in == out) {
      row[i] = 1;
      continue;
    }
    T src = align ? ratio * static_cast<T>(i) : ratio * (static_cast<T>(i) + T(0.5)) - T(0.5);
    if (mode == InterpolateMode::Bicubic) {
      const T f = std::floor(src), t = src - f;
      const T w[4] = {far(t + 1), near(t), near(1 - t), far((1 - t) + 1)};  // (PyTorch's roundings)
      for (int k = 0; k < 4; ++k) {
        const int64_t j = std::clamp<int64_t>(static_cast<int64_t>(f) - 1 + k, 0, in - 1);
        row[j] += static_cast<double>(w[k]);
      }
      continue;
    }
    if (src < 0) src = 0;
    const int64_t j0 = std::min(static_cast<int64_t>(src), in - 1), j1 = j0 < in - 1 ? j0 + 1 : j0;
    const T l1 = std::min(std::max(src - static_cast<T>(j0), T(0)), T(1)), l0 = T(1) - l1;
    row[j0] += static_cast<double>(l0);
    row[j1] += static_cast<double>(l1);
  }
}
}  // namespace

const char* interpolate_mode_name(InterpolateMode mode) {
  switch (mode) {
    case InterpolateMode::Nearest:
      return "nearest";
    case InterpolateMode::Linear:
      return "linear";
    case InterpolateMode::Bilinear:
      return "bilinear";
    case InterpolateMode::Bicubic:
      return "bicubic";
    case InterpolateMode::NearestExact:
      return "nearest-exact";
    case InterpolateMode::Area:
      return "area";
  }
  return "?";
}

Tensor interpolation_matrix(int64_t in, int64_t out, InterpolateMode mode, bool align_corners,
                            std::optional<double> scale, DType dtype) {
  MG_CHECK(in >= 0 && out >= 0 && (in > 0 || out == 0), ShapeError,
           "interpolate: cannot resample {} input positions to {}", in, out);
  MG_CHECK(is_floating(dtype), DTypeError, "interpolate: expected float32 or float64, got {}", dtype_name(dtype));
  MG_CHECK(!scale || (std::isfinite(*scale) && *scale > 0), ValueError,
           "interpolate: scale factors must be finite and positive, got {}", scale.value_or(0));
  // The resampling is a dense (out, in) matrix per dim: checked before it is allocated.
  check_fits_in_memory(
      static_cast<double>(out) * static_cast<double>(in) * 8,
      fmt::format("interpolate: resampling {} positions to {} (a dense {} x {} matrix)", in, out, out, in));
  Tensor a = zeros({out, in}, DType::Float64);
  if (dtype == DType::Float64)
    fill_interpolation<double>(a.data<double>(), in, out, mode, align_corners, scale);
  else
    fill_interpolation<float>(a.data<double>(), in, out, mode, align_corners, scale);
  return a.to(dtype);
}

std::vector<int64_t> interpolate_sizes(const Shape& shape, const InterpolateOptions& o) {
  const InterpolateMode m = o.mode;
  const int64_t spatial = static_cast<int64_t>(shape.size()) - 2;
  MG_CHECK(spatial >= 1, ShapeError, "interpolate: expected an input (N, C, *spatial), got {}", shape_str(shape));
  MG_CHECK(m != InterpolateMode::Linear || spatial == 1, ShapeError, "interpolate: linear takes (N, C, L), got {}",
           shape_str(shape));
  MG_CHECK((m != InterpolateMode::Bilinear && m != InterpolateMode::Bicubic) || spatial == 2, ShapeError,
           "interpolate: {} takes (N, C, H, W), got {}", interpolate_mode_name(m), shape_str(shape));
  MG_CHECK(!o.align_corners ||
               (m == InterpolateMode::Linear || m == InterpolateMode::Bilinear || m == InterpolateMode::Bicubic),
           ValueError, "interpolate: align_corners only applies to linear, bilinear and bicubic, not \"{}\"",
           interpolate_mode_name(m));
  MG_CHECK(o.size.empty() != o.scale_factor.empty(), ValueError,
           "interpolate: give either size or scale_factor, not {}", o.size.empty() ? "neither" : "both");
  MG_CHECK(!o.recompute_scale_factor.value_or(false) || o.size.empty(), ValueError,
           "interpolate: recompute_scale_factor applies to a scale_factor, not to an explicit size");
  const size_t given = o.size.empty() ? o.scale_factor.size() : o.size.size();
  MG_CHECK(given == 1 || given == static_cast<size_t>(spatial), ShapeError,
           "interpolate: {} values for {} spatial dims of input {} (give one, or one per dim)", given, spatial,
           shape_str(shape));
  std::vector<int64_t> out;
  for (int64_t k = 0; k < spatial; ++k) {
    const int64_t in = shape[static_cast<size_t>(2 + k)];
    if (!o.size.empty()) {
      const int64_t s = o.size[given == 1 ? 0 : static_cast<size_t>(k)];
      MG_CHECK(s > 0, ValueError, "interpolate: output sizes must be positive, got {}", s);
      out.push_back(s);
    } else {
      const double f = o.scale_factor[given == 1 ? 0 : static_cast<size_t>(k)];
      MG_CHECK(std::isfinite(f) && f > 0, ValueError, "interpolate: scale factors must be finite and positive, got {}",
               f);
      const double s = std::floor(static_cast<double>(in) * f);
      MG_CHECK(s >= 1 && s < 9e15, ValueError, "interpolate: scale factor {} turns size {} into {}", f, in, s);
      out.push_back(static_cast<int64_t>(s));
    }
    MG_CHECK(in > 0, ShapeError, "interpolate: spatial dim {} of input {} is empty", 2 + k, shape_str(shape));
  }
  return out;
}

std::vector<Tensor> interpolation_matrices(const Shape& shape, DType dtype, const InterpolateOptions& o) {
  MG_CHECK(is_floating(dtype), DTypeError, "interpolate: expected a float32 or float64 input, got {}",
           dtype_name(dtype));
  const std::vector<int64_t> out = interpolate_sizes(shape, o);
  std::vector<Tensor> m;
  for (size_t k = 0; k < out.size(); ++k) {
    // the user's scale, unless recompute_scale_factor (then in / out, as for a given size); area
    // mode only ever uses the sizes
    const bool use_scale =
        !o.scale_factor.empty() && !o.recompute_scale_factor.value_or(false) && o.mode != InterpolateMode::Area;
    const std::optional<double> scale =
        use_scale ? std::optional(o.scale_factor[o.scale_factor.size() == 1 ? 0 : k]) : std::nullopt;
    m.push_back(interpolation_matrix(shape[2 + k], out[k], o.mode, o.align_corners.value_or(false), scale, dtype)
                    .transpose(0, 1));
  }
  return m;
}

// y = x resampled along each spatial dim d: x.transpose(d, -1) @ A_d^T, transposed back
Tensor interpolate(const Tensor& x, const InterpolateOptions& o) {
  const OpScope scope("interpolate");  // matmul's and the allocator's errors name interpolate
  MG_CHECK(x.defined(), StateError, "interpolate: the input is undefined");
  const std::vector<Tensor> m = interpolation_matrices(x.shape(), x.dtype(), o);
  Tensor y = x;
  for (size_t k = 0; k < m.size(); ++k) {
    const int64_t d = static_cast<int64_t>(2 + k);
    y = matmul(y.transpose(d, -1), m[k]).transpose(d, -1);
  }
  return y.contiguous();
}

}  // namespace mg
