// Activation functions, each followed by the kernel of its derivative.
#include "minigrad/tensor/ops/activation.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "minigrad/tensor/bfloat16.h"
#include "minigrad/tensor/fastmath.h"
#include "minigrad/tensor/loops.h"
#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/shape.h"
#include "minigrad/tensor/parallel.h"

namespace mg {
namespace {
using detail::backward_map;
using detail::unary_float;

constexpr double kSqrt2OverPi = 0.7978845608028654;    // sqrt(2/pi), GELU's tanh form
constexpr double kGeluCubic = 0.044715;                // the x^3 coefficient of the tanh form
constexpr double kInvSqrt2 = std::numbers::sqrt2 / 2;  // 1/sqrt(2): Phi(x) = (1 + erf(x/sqrt 2)) / 2
constexpr double kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;  // 1/sqrt(2 pi): phi(0)

void check_finite(double v, const char* what, std::string_view op) {
  MG_CHECK(std::isfinite(v), ValueError, "{}: {} must be finite, got {}", op, what, v);
}
}  // namespace

Tensor relu(const Tensor& x) {
  return unary_float(x, "relu", [](auto v) { return v > 0 || v != v ? v : decltype(v)(0); });  // relu(NaN) = NaN
}
// dx = dy where x > 0, else 0
Tensor relu_backward(const Tensor& dy, const Tensor& x) {
  return backward_map(dy, x, "relu_backward", [](auto g, auto v) { return v > 0 ? g : decltype(v)(0); });
}

// GELU, erf form:   y = x Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2
//       tanh form:  y = x/2 (1 + tanh u),  u = c (x + k x^3),  c = sqrt(2/pi),  k = 0.044715
namespace {
template <class T>
T gelu_tanh(T v) {
  return T(0.5) * v * (T(1) + fast::tanh(T(kSqrt2OverPi) * (v + T(kGeluCubic) * v * v * v)));
}
template <class T>
T gelu_erf(T v) {
  return T(0.5) * v * (T(1) + fast::erf(v * T(kInvSqrt2)));
}

// y = gelu(x) for float32 x in pieces of 4096 elements; with `copy`, also y's bfloat16 copy
// (Storage::bf16_copy): each piece of y is rounded right after it is written, while it is in
// cache, instead of in a pass of its own when the next product converts its operand. y has the
// generic path's bits (the same scalar function, no fused multiply-add); the copy has
// y.to(BFloat16)'s. Measured (bench_micro BM_producer_bf16_operand, docs/06 section 12) this loop
// also runs faster than map_unary's for GELU, so every contiguous float32 GELU takes it.
template <bool kTanh>
Tensor gelu_float_pieces(const Tensor& x0, bool copy) {
  constexpr int64_t kPiece = 4096;
  const Tensor x = x0.contiguous();
  Tensor y = empty(x.shape(), DType::Float32), ybf = copy ? empty(x.shape(), DType::BFloat16) : Tensor();
  const float* a = x.data<float>();
  float* o = y.data<float>();
  bfloat16* ob = copy ? ybf.data<bfloat16>() : nullptr;
  const int64_t n = x.numel();
  parallel_for(0, (n + kPiece - 1) / kPiece, grain_for(kPiece), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t i0 = p * kPiece, i1 = std::min(n, i0 + kPiece);
      for (int64_t i = i0; i < i1; ++i) o[i] = kTanh ? gelu_tanh(a[i]) : gelu_erf(a[i]);
      if (ob) to_bfloat16(o + i0, ob + i0, i1 - i0);
    }
  });
  if (copy) y.storage()->set_bf16_copy(ybf.storage());
  return y;
}
}  // namespace

const char* gelu_approximate_name(GeluApproximate approximate) {
  return approximate == GeluApproximate::Tanh ? "tanh" : "none";
}

Tensor gelu(const Tensor& x, GeluApproximate approximate, bool bf16_copy) {
  if (x.defined() && x.dtype() == DType::Float32)
    return approximate == GeluApproximate::Tanh ? gelu_float_pieces<true>(x, bf16_copy)
                                                : gelu_float_pieces<false>(x, bf16_copy);
  if (approximate == GeluApproximate::Tanh) return unary_float(x, "gelu", [](auto v) { return gelu_tanh(v); });
  return unary_float(x, "gelu", [](auto v) { return gelu_erf(v); });
}

// erf form:  GELU'(x) = Phi(x) + x phi(x),  phi(x) = e^(-x^2/2) / sqrt(2 pi)
// tanh form: GELU'(x) = (1 + tanh u) / 2 + x/2 (1 - tanh^2 u) c (1 + 3 k x^2)
// (g * GELU'(v), the one formula of gelu_backward and linear_gelu_backward below)
namespace {
template <class T>
T gelu_grad_erf(T g, T v) {
  const T cdf = T(0.5) * (T(1) + fast::erf(v * T(kInvSqrt2)));
  const T pdf = fast::exp(T(-0.5) * v * v) * T(kInvSqrt2Pi);
  return g * (cdf + v * pdf);
}
template <class T>
T gelu_grad_tanh(T g, T v) {
  const T c = T(kSqrt2OverPi), k = T(kGeluCubic);
  const T t = fast::tanh(c * (v + k * v * v * v));
  return g * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * c * (T(1) + T(3) * k * v * v));
}
}  // namespace

Tensor gelu_backward(const Tensor& dy, const Tensor& x, GeluApproximate approximate) {
  if (approximate == GeluApproximate::Tanh)
    return backward_map(dy, x, "gelu_backward", [](auto g, auto v) { return gelu_grad_tanh(g, v); });
  return backward_map(dy, x, "gelu_backward", [](auto g, auto v) { return gelu_grad_erf(g, v); });
}

// h, dy: (..., out) viewed as (N, out) rows.   dh = dy GELU'(h)   db[j] = sum_i dh[i, j]
// One pass over the two (N, out) inputs instead of three (gelu_backward, the bias sum, and the
// rounding to bfloat16 that a bfloat16 product's backward does to its incoming gradient). The
// work is split by blocks of columns, each thread going down all N rows of its block and
// adding into double sums: the order of sum(dh, {0}) (tensor/ops/reduce.cpp), so db has the same
// bits as the separate sum, and dh the same bits as gelu_backward (rounded as .to(BFloat16) does).
// The blocks are tensor/parallel.h's column_chunk.
std::pair<Tensor, Tensor> linear_gelu_backward(const Tensor& dy0, const Tensor& h0, GeluApproximate approximate,
                                               DType dh_dtype, bool need_db) {
  detail::check_same_dtype(dy0, h0, "linear_gelu_backward");
  MG_CHECK(dy0.shape() == h0.shape() && h0.dim() >= 1, ShapeError,
           "linear_gelu_backward: dy has shape {} and h {}; they must be equal, with at least 1 dim",
           shape_str(dy0.shape()), shape_str(h0.shape()));
  MG_CHECK(dh_dtype == h0.dtype() || (dh_dtype == DType::BFloat16 && h0.dtype() == DType::Float32), DTypeError,
           "linear_gelu_backward: dh can be written as h's dtype ({}) or, from float32, as bfloat16; got {}",
           dtype_name(h0.dtype()), dtype_name(dh_dtype));
  const Tensor dy = dy0.contiguous(), h = h0.contiguous();
  const int64_t out = h.size(-1), rows = out == 0 ? 0 : h.numel() / out;
  Tensor dh = empty(h.shape(), dh_dtype), db = need_db ? empty({out}, h.dtype()) : Tensor();
  const bool to_bf16 = dh_dtype == DType::BFloat16;
  auto pass = [&]<class T>(auto grad) {
    const T* g = dy.data<T>();
    const T* v = h.data<T>();
    parallel_for(0, out, column_chunk(rows, out), [&](int64_t j0, int64_t j1) {
      const int64_t w = j1 - j0;
      std::vector<double> acc(need_db ? w : 0, 0.0);
      std::vector<T> staged(to_bf16 ? w : 0);  // a row's float32 dh, before it is rounded
      for (int64_t i = 0; i < rows; ++i) {
        const T* gi = g + i * out + j0;
        const T* vi = v + i * out + j0;
        T* d = to_bf16 ? staged.data() : dh.data<T>() + i * out + j0;
        for (int64_t j = 0; j < w; ++j) d[j] = grad(gi[j], vi[j]);
        for (int64_t j = 0; j < static_cast<int64_t>(acc.size()); ++j) acc[j] += d[j];
        if constexpr (std::is_same_v<T, float>)
          if (to_bf16) to_bfloat16(d, dh.data<bfloat16>() + i * out + j0, w);
      }
      for (int64_t j = 0; j < static_cast<int64_t>(acc.size()); ++j) db.data<T>()[j0 + j] = static_cast<T>(acc[j]);
    });
  };
  visit_float(h.dtype(), "linear_gelu_backward", [&]<class T>() {
    if (approximate == GeluApproximate::Tanh)
      pass.template operator()<T>([](T g, T v) { return gelu_grad_tanh(g, v); });
    else
      pass.template operator()<T>([](T g, T v) { return gelu_grad_erf(g, v); });
  });
  return {dh, db};
}

// y = x s,  s = sigmoid(x) = 1 / (1 + e^-x)
Tensor silu(const Tensor& x) {
  return unary_float(x, "silu", [](auto v) { return v / (decltype(v)(1) + fast::exp(-v)); });
}
// dx = dy (s + x s (1 - s)) = dy s (1 + x (1 - s))
Tensor silu_backward(const Tensor& dy, const Tensor& x) {
  return backward_map(dy, x, "silu_backward", [](auto g, auto v) {
    using T = decltype(v);
    const T s = T(1) / (T(1) + fast::exp(-v));
    return g * s * (T(1) + v * (T(1) - s));
  });
}

// SwiGLU's gate, one pass over x instead of silu, mul and the two narrowed views' copies:
//   x (..., 2h) = [a | u]      y (..., h) = silu(a) u
//   dx (..., 2h) = [dy u s (1 + a (1 - s)) | dy silu(a)],  s = sigmoid(a)
// Each value is computed by the same expressions, in the same order, as silu, mul and
// silu_backward compute it, so fused and composed agree bit for bit.
namespace {
// The shapes: x (..., 2h) with h >= 0; returns h.
int64_t swiglu_half(const Tensor& x, std::string_view op) {
  MG_CHECK(x.defined(), StateError, "{}: the input is undefined", op);
  MG_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0, ShapeError,
           "{}: expected x (..., 2h), the gate and the up projection side by side on the last dim, got shape {}", op,
           shape_str(x.shape()));
  return x.size(-1) / 2;
}
}  // namespace

Tensor swiglu(const Tensor& x0) {
  const int64_t h = swiglu_half(x0, "swiglu");
  if (x0.dtype() == DType::BFloat16)  // composed: silu(a) rounded to bfloat16, then times u, rounded again
    return mul(silu(x0.narrow(-1, 0, h)), x0.narrow(-1, h, h));
  Shape out_shape = x0.shape();
  out_shape.back() = h;
  return visit_float(x0.dtype(), "swiglu", [&]<class T>() {
    const Tensor x = x0.contiguous();
    Tensor y = empty(out_shape, x.dtype());
    const int64_t rows = h == 0 ? 0 : y.numel() / h;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    parallel_for(0, rows, grain_for(2 * h), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* a = px + r * 2 * h;
        const T* u = a + h;
        T* o = py + r * h;
        for (int64_t j = 0; j < h; ++j) o[j] = a[j] / (T(1) + fast::exp(-a[j])) * u[j];
      }
    });
    return y;
  });
}

Tensor swiglu_backward(const Tensor& dy0, const Tensor& x0) {
  const int64_t h = swiglu_half(x0, "swiglu_backward");
  Shape out_shape = x0.shape();
  out_shape.back() = h;
  MG_CHECK(dy0.defined(), StateError, "swiglu_backward: dy is undefined");
  MG_CHECK(dy0.shape() == out_shape, ShapeError, "swiglu_backward: expected dy of shape {} for x of shape {}, got {}",
           shape_str(out_shape), shape_str(x0.shape()), shape_str(dy0.shape()));
  MG_CHECK(dy0.dtype() == x0.dtype() || (x0.dtype() == DType::BFloat16 && dy0.dtype() == DType::Float32), DTypeError,
           "swiglu_backward: dy is {} but x is {}; dy must have x's dtype, or be float32 for a bfloat16 x",
           dtype_name(dy0.dtype()), dtype_name(x0.dtype()));
  if (x0.dtype() == DType::BFloat16) {  // the composed ops' backward kernels, mul's and silu's
    const Tensor a = x0.narrow(-1, 0, h), u = x0.narrow(-1, h, h);
    return concat({silu_backward(mul(dy0, u), a), mul(dy0, silu(a))}, -1);
  }
  return visit_float(x0.dtype(), "swiglu_backward", [&]<class T>() {
    const Tensor x = x0.contiguous(), dy = dy0.contiguous();
    Tensor dx = empty(x.shape(), x.dtype());
    const int64_t rows = h == 0 ? 0 : dy.numel() / h;
    const T *px = x.data<T>(), *pg = dy.data<T>();
    T* pd = dx.data<T>();
    parallel_for(0, rows, grain_for(2 * h), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* a = px + r * 2 * h;
        const T* u = a + h;
        const T* g = pg + r * h;
        T* da = pd + r * 2 * h;
        T* du = da + h;
        for (int64_t j = 0; j < h; ++j) {
          const T v = a[j], s = T(1) / (T(1) + fast::exp(-v)), gu = g[j] * u[j];
          da[j] = gu * s * (T(1) + v * (T(1) - s));
          du[j] = g[j] * (v / (T(1) + fast::exp(-v)));
        }
      }
    });
    return dx;
  });
}

// y = log(1 + e^(b x)) / b, computed as log1p; where b x > threshold, y = x
Tensor softplus(const Tensor& x, double beta, double threshold) {
  check_finite(beta, "beta", "softplus"), check_finite(threshold, "threshold", "softplus");
  MG_CHECK(beta != 0, ValueError, "softplus: beta must be non-zero");
  return unary_float(x, "softplus", [beta, threshold](auto v) {
    using T = decltype(v);
    const T bx = v * T(beta);
    return bx > T(threshold) ? v : static_cast<T>(fast::log1p(fast::exp(bx)) / T(beta));
  });
}
// dx = dy sigmoid(b x) = dy e^(b x) / (e^(b x) + 1); where b x > threshold, dx = dy
Tensor softplus_backward(const Tensor& dy, const Tensor& x, double beta, double threshold) {
  check_finite(beta, "beta", "softplus_backward"), check_finite(threshold, "threshold", "softplus_backward");
  return backward_map(dy, x, "softplus_backward", [beta, threshold](auto g, auto v) {
    using T = decltype(v);
    const T bx = v * T(beta);
    if (bx > T(threshold)) return g;
    const T z = fast::exp(bx);
    return g * z / (z + T(1));
  });
}

// y = x for x > 0, slope x otherwise
Tensor leaky_relu(const Tensor& x, double slope) {
  check_finite(slope, "negative_slope", "leaky_relu");
  return unary_float(x, "leaky_relu", [slope](auto v) { return v > 0 ? v : v * decltype(v)(slope); });
}
// dx = dy for x > 0, slope dy otherwise
Tensor leaky_relu_backward(const Tensor& dy, const Tensor& x, double slope) {
  check_finite(slope, "negative_slope", "leaky_relu_backward");
  return backward_map(dy, x, "leaky_relu_backward",
                      [slope](auto g, auto v) { return v > 0 ? g : g * decltype(v)(slope); });
}

// y = x for x > 0, alpha (e^x - 1) otherwise
Tensor elu(const Tensor& x, double alpha) {
  check_finite(alpha, "alpha", "elu");
  return unary_float(x, "elu", [alpha](auto v) {
    using T = decltype(v);
    return v > 0 ? v : static_cast<T>(T(alpha) * fast::expm1(v));
  });
}
// dx = dy for x > 0, dy alpha e^x otherwise
Tensor elu_backward(const Tensor& dy, const Tensor& x, double alpha) {
  check_finite(alpha, "alpha", "elu_backward");
  return backward_map(dy, x, "elu_backward", [alpha](auto g, auto v) {
    using T = decltype(v);
    return v > 0 ? g : static_cast<T>(g * T(alpha) * fast::exp(v));
  });
}

}  // namespace mg
