// Kernels that neural nets call often enough to deserve one pass each: softmax, log_softmax and
// layer norm. Softmax works on "lines": the elements along one dim with every other index fixed;
// layer norm on rows: the trailing normalized dims flattened.
#include <cmath>
#include <limits>

#include "minigrad/tensor/bfloat16.h"
#include "minigrad/tensor/fastmath.h"
#include "minigrad/tensor/loops.h"
#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/nn_functional.h"
#include "minigrad/tensor/ops/reduce.h"

namespace mg {
namespace {

// Call f(offset, n, stride) for every line of contiguous `x` along `dim` (its first element at
// `offset`, its n elements `stride` apart), in parallel. Output tensors made with empty(x.shape())
// have the same layout, so the same offset addresses them.
template <class T, class F>
void for_each_line(const Tensor& x, int64_t dim, F f) {
  const int64_t n = x.dim() == 0 ? 1 : x.shape()[dim];
  const int64_t inner = x.dim() == 0 ? 1 : numel_of(Shape(x.shape().begin() + dim + 1, x.shape().end()));
  const int64_t lines = n == 0 ? 0 : x.numel() / n;
  parallel_for(0, lines, grain_for(n), [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) {
      const int64_t outer = l / inner, in = l % inner;
      f(outer * n * inner + in, n, inner);
    }
  });
}

template <bool kLog>
Tensor softmax_impl(const Tensor& x0, int64_t dim, std::string_view op) {
  MG_CHECK(x0.defined(), StateError, "{}: the tensor is undefined", op);
  if (x0.dtype() == DType::BFloat16)  // computed in float32 (exact widening), rounded once, as PyTorch's
    return softmax_impl<kLog>(x0.to(DType::Float32), dim, op).to(DType::BFloat16);
  dim = wrap_dim(dim, x0.dim(), op);  // a scalar takes dim 0 or -1, as in PyTorch
  const Tensor x = x0.contiguous();
  Tensor out = empty(x.shape(), x.dtype());
  visit_float(x.dtype(), op, [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_each_line<T>(x, dim, [&](int64_t off, int64_t n, int64_t st) {
      const T* a = px + off;
      T* o = po + off;
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, a[i * st]);
      if (std::isinf(mx) && mx < 0) mx = 0;  // a line of all -inf: avoid inf - inf
      if (std::is_same_v<T, float> && st == 1) {
        // float rows: vectorised exp, then an 8-lane sum (fixed order, so reproducible)
        for (int64_t i = 0; i < n; ++i) o[i] = fast::exp(a[i] - mx);
        const T s = fast::sum8(o, n);
        if constexpr (kLog) {
          // (x - max) - log sum, never x - (max + log sum): max + log sum rounds to max's ulp
          // (1 at 1e7 in float32), which would land on every output
          const T ls = std::log(s);
          for (int64_t i = 0; i < n; ++i) o[i] = (a[i] - mx) - ls;
        } else {
          const T inv = T(1) / s;
          for (int64_t i = 0; i < n; ++i) o[i] *= inv;
        }
        return;
      }
      // strided lines (or double): fast::exp in the tensor's own type (libm's for double), summed in double
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += static_cast<double>(fast::exp(a[i * st] - mx));
      if constexpr (kLog) {
        const T ls = static_cast<T>(std::log(s));
        for (int64_t i = 0; i < n; ++i) o[i * st] = (a[i * st] - mx) - ls;
      } else {
        const double inv = 1.0 / s;
        for (int64_t i = 0; i < n; ++i)
          o[i * st] = static_cast<T>(static_cast<double>(fast::exp(a[i * st] - mx)) * inv);
      }
    });
  });
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl<false>(x, dim, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl<true>(x, dim, "log_softmax"); }

namespace {
void check_layer_norm_args(const Tensor& x, const Shape& norm_shape, const Tensor& weight, const Tensor& bias,
                           std::string_view op) {
  MG_CHECK(x.defined(), StateError, "{}: the input is undefined", op);
  const int64_t k = static_cast<int64_t>(norm_shape.size());
  MG_CHECK(k >= 1 && k <= x.dim() && Shape(x.shape().end() - k, x.shape().end()) == norm_shape, ShapeError,
           "{}: normalized_shape {} does not match the trailing dims of input {}", op, shape_str(norm_shape),
           shape_str(x.shape()));
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    const char* what = p == &weight ? "weight" : "bias";
    MG_CHECK(p->shape() == norm_shape, ShapeError, "{}: {} has shape {} but the normalized shape is {} (input {})", op,
             what, shape_str(p->shape()), shape_str(norm_shape), shape_str(x.shape()));
    MG_CHECK(p->dtype() == x.dtype(), DTypeError, "{}: {} is {} but the input is {}", op, what, dtype_name(p->dtype()),
             dtype_name(x.dtype()));
  }
}

// The exponent e of the smallest power of two 2^e >= max |a_i|, or 0 when a value is inf or NaN
// (then no scaling can help, and the row's statistics are inf or NaN as they come out).
template <class T>
int overflow_exponent(const T* a, int64_t N) {
  double mx = 0;
  for (int64_t i = 0; i < N; ++i) mx = std::max(mx, std::abs(static_cast<double>(a[i])));
  if (!std::isfinite(mx) || mx == 0) return 0;
  int e = 0;
  std::frexp(mx, &e);  // mx = f 2^e, f in [0.5, 1)
  return e;
}
}  // namespace

// Per row r (the normalized dims flattened to N):
//   mean_r = sum_i x_ri / N     var_r = sum_i (x_ri - mean_r)^2 / N     rstd_r = 1 / sqrt(var_r + eps)
//   y_ri = (x_ri - mean_r) * rstd_r * w_i + b_i
// x, y: (M, N) as rows    w, b: (N)    mean, rstd: (M)
LayerNormForward layer_norm_forward(const Tensor& x0, const Shape& norm_shape, const Tensor& weight, const Tensor& bias,
                                    double eps, bool bf16_copy) {
  check_layer_norm_args(x0, norm_shape, weight, bias, "layer_norm");
  MG_CHECK(std::isfinite(eps) && eps >= 0, ValueError, "layer_norm: eps must be finite and >= 0, got {}", eps);
  const Shape row_shape(x0.shape().begin(), x0.shape().end() - static_cast<int64_t>(norm_shape.size()));
  const Tensor x = x0.contiguous();
  const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  const int64_t N = numel_of(norm_shape), M = numel_of(row_shape);
  Tensor y = empty(x.shape(), x.dtype()), mean = empty(row_shape, x.dtype()), rstd = empty(row_shape, x.dtype());
  // y's bfloat16 copy, each row rounded right after it is written (Storage::bf16_copy)
  const Tensor ybf = bf16_copy && x.dtype() == DType::Float32 ? empty(x.shape(), DType::BFloat16) : Tensor();
  bfloat16* pbf = ybf.defined() ? ybf.data<bfloat16>() : nullptr;
  visit_float(x.dtype(), "layer_norm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    T *py = y.data<T>(), *pm = mean.data<T>(), *pr = rstd.data<T>();
    auto round_row = [&](int64_t r) {
      if constexpr (std::is_same_v<T, float>)
        if (pbf) to_bfloat16(py + r * N, pbf + r * N, N);
    };
    parallel_for(0, M, grain_for(N), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* a = px + r * N;
        double mu = 0, var = 0;
        if constexpr (std::is_same_v<T, float>) {  // eight float lanes: vectorised, fixed order
          mu = fast::sum8(a, N) / static_cast<float>(N);
          var = fast::sum8_sq(a, N, static_cast<float>(mu)) / static_cast<float>(N);
        }
        // float64 rows, and float32 rows whose float sums overflowed (values near 3e38), in double
        if (!std::is_same_v<T, float> || !std::isfinite(mu) || !std::isfinite(var)) {
          double s = 0, ss = 0;
          for (int64_t i = 0; i < N; ++i) s += a[i];
          mu = s / static_cast<double>(N);
          for (int64_t i = 0; i < N; ++i) ss += (a[i] - mu) * (a[i] - mu);  // two passes: no cancellation
          var = ss / static_cast<double>(N);
        }
        // float64 rows past ~1e154: the squares (or the sum) overflow. Scaled by a power of two
        // 2^e >= max |x| (exact), the row's statistics fit; y is computed from the scaled row.
        const int e = std::isfinite(mu) && std::isfinite(var) ? 0 : overflow_exponent(a, N);
        if (e != 0) {
          double s = 0, ss = 0;
          for (int64_t i = 0; i < N; ++i) s += std::ldexp(static_cast<double>(a[i]), -e);
          const double mu_s = s / static_cast<double>(N);
          for (int64_t i = 0; i < N; ++i) {
            const double dev = std::ldexp(static_cast<double>(a[i]), -e) - mu_s;
            ss += dev * dev;
          }
          const double rs_s = 1.0 / std::sqrt(ss / static_cast<double>(N) + std::ldexp(eps, -2 * e));
          pm[r] = static_cast<T>(std::ldexp(mu_s, e));
          pr[r] = static_cast<T>(std::ldexp(rs_s, -e));
          T* o = py + r * N;
          for (int64_t i = 0; i < N; ++i) {
            T v = static_cast<T>((std::ldexp(static_cast<double>(a[i]), -e) - mu_s) * rs_s);
            if (pw) v *= pw[i];
            if (pb) v += pb[i];
            o[i] = v;
          }
          round_row(r);
          continue;
        }
        const double rs = 1.0 / std::sqrt(var + eps);
        pm[r] = static_cast<T>(mu);
        pr[r] = static_cast<T>(rs);
        T* o = py + r * N;
        const T m = static_cast<T>(mu), rr = static_cast<T>(rs);
        if (pw && pb) {
          for (int64_t i = 0; i < N; ++i) o[i] = (a[i] - m) * rr * pw[i] + pb[i];
        } else {
          for (int64_t i = 0; i < N; ++i) {
            T v = (a[i] - m) * rr;
            if (pw) v *= pw[i];
            if (pb) v += pb[i];
            o[i] = v;
          }
        }
        round_row(r);
      }
    });
  });
  if (ybf.defined()) y.storage()->set_bf16_copy(ybf.storage());
  return {y, mean, rstd};
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return layer_norm_forward(x, normalized_shape, weight, bias, eps).y;
}

// Per row, with xhat = (x - mean) * rstd and g = dy * w (g = dy without weight):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      (means over the row)
//   dw = sum over rows of dy * xhat        db = sum over rows of dy
// dy, x, dx: (M, N) as rows    w, dw, db: (N)    mean, rstd: (M)
LayerNormGrads layer_norm_backward(const Tensor& dy0, const Tensor& x0, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd, const Shape& norm_shape, bool need_dweight, bool need_dbias) {
  check_layer_norm_args(x0, norm_shape, weight, Tensor(), "layer_norm_backward");
  MG_CHECK(dy0.shape() == x0.shape() && dy0.dtype() == x0.dtype(), ShapeError,
           "layer_norm_backward: dy {} {} does not match the input {} {}", dtype_name(dy0.dtype()),
           shape_str(dy0.shape()), dtype_name(x0.dtype()), shape_str(x0.shape()));
  const Tensor x = x0.contiguous(), dy = dy0.contiguous();
  const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor m_r = mean.contiguous(), rs_r = rstd.contiguous();
  const int64_t M = m_r.numel(), N = numel_of(norm_shape);
  MG_CHECK(M * N == x.numel() && rs_r.numel() == M, ShapeError,
           "layer_norm_backward: mean {} and rstd {} do not match input {} normalized over {}", shape_str(mean.shape()),
           shape_str(rstd.shape()), shape_str(x.shape()), shape_str(norm_shape));
  Tensor dx = empty(x.shape(), x.dtype()), xhat = empty(x.shape(), x.dtype());
  visit_float(x.dtype(), "layer_norm_backward", [&]<class T>() {
    const T *px = x.data<T>(), *pg = dy.data<T>(), *pm = m_r.data<T>(), *pr = rs_r.data<T>();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    T *pdx = dx.data<T>(), *ph = xhat.data<T>();
    parallel_for(0, M, grain_for(N), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T *a = px + r * N, *g = pg + r * N;
        T *h = ph + r * N, *o = pdx + r * N;
        const T m = pm[r], rs = pr[r];
        // Two row sums, sum(g w) and sum(g w xhat), in eight independent lanes (vectorised, and
        // added in a fixed order so the bits do not depend on threads).
        T sg[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sgh[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 8 <= N; i += 8)
          for (int j = 0; j < 8; ++j) {
            h[i + j] = (a[i + j] - m) * rs;
            const T gi = pw ? g[i + j] * pw[i + j] : g[i + j];
            sg[j] += gi, sgh[j] += gi * h[i + j];
          }
        for (; i < N; ++i) {
          h[i] = (a[i] - m) * rs;
          const T gi = pw ? g[i] * pw[i] : g[i];
          sg[0] += gi, sgh[0] += gi * h[i];
        }
        const T mean_g =
            (((sg[0] + sg[1]) + (sg[2] + sg[3])) + ((sg[4] + sg[5]) + (sg[6] + sg[7]))) / static_cast<T>(N);
        const T mean_gh =
            (((sgh[0] + sgh[1]) + (sgh[2] + sgh[3])) + ((sgh[4] + sgh[5]) + (sgh[6] + sgh[7]))) / static_cast<T>(N);
        for (int64_t k = 0; k < N; ++k) {
          const T gi = pw ? g[k] * pw[k] : g[k];
          o[k] = rs * (gi - mean_g - h[k] * mean_gh);
        }
      }
    });
  });
  LayerNormGrads out{dx, Tensor(), Tensor()};
  const Shape rows{M, N};
  if (need_dweight) out.dweight = sum((dy * xhat).reshape(rows), {0}).reshape(norm_shape);
  if (need_dbias) out.dbias = sum(dy.reshape(rows), {0}).reshape(norm_shape);
  return out;
}

double rms_norm_eps(std::optional<double> eps, DType dt) {
  if (eps) return *eps;
  return dt == DType::Float64 ? std::numeric_limits<double>::epsilon()
                              : static_cast<double>(std::numeric_limits<float>::epsilon());
}

namespace {

// Sum of squares of a row in double: no overflow below 1e154 (float32 rows never overflow), and
// for float input as exact as float32 can use. Eight lanes in a fixed order, as fast::sum8.
template <class T>
double sum_squares(const T* a, int64_t n) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] += static_cast<double>(a[i + l]) * static_cast<double>(a[i + l]);
  for (; i < n; ++i) lane[i % 8] += static_cast<double>(a[i]) * static_cast<double>(a[i]);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}
}  // namespace

// Per row r (the normalized dims flattened to N):
//   rstd_r = 1 / sqrt(sum_i x_ri^2 / N + eps)      y_ri = x_ri * rstd_r * w_i
// x, y: (M, N) as rows    w: (N)    rstd: (M)
RMSNormForward rms_norm_forward(const Tensor& x0, const Shape& norm_shape, const Tensor& weight,
                                std::optional<double> eps_opt) {
  check_layer_norm_args(x0, norm_shape, weight, Tensor(), "rms_norm");
  MG_CHECK(!eps_opt || (std::isfinite(*eps_opt) && *eps_opt >= 0), ValueError,
           "rms_norm: eps must be finite and >= 0, got {}", *eps_opt);
  const double eps = rms_norm_eps(eps_opt, x0.dtype());
  const Shape row_shape(x0.shape().begin(), x0.shape().end() - static_cast<int64_t>(norm_shape.size()));
  const Tensor x = x0.contiguous(), w = weight.defined() ? weight.contiguous() : Tensor();
  const int64_t N = numel_of(norm_shape), M = numel_of(row_shape);
  Tensor y = empty(x.shape(), x.dtype()), rstd = empty(row_shape, x.dtype());
  visit_float(x.dtype(), "rms_norm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    T *py = y.data<T>(), *pr = rstd.data<T>();
    parallel_for(0, M, grain_for(N), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* a = px + r * N;
        T* o = py + r * N;
        const double ss = sum_squares(a, N);
        // float64 rows past ~1e154 overflow the squares: scaled by 2^-e (exact), the mean fits.
        const int e = std::isfinite(ss) ? 0 : overflow_exponent(a, N);
        if (e != 0) {
          double s2 = 0;
          for (int64_t i = 0; i < N; ++i) {
            const double si = std::ldexp(static_cast<double>(a[i]), -e);
            s2 += si * si;
          }
          const double rs_s = 1.0 / std::sqrt(s2 / static_cast<double>(N) + std::ldexp(eps, -2 * e));
          pr[r] = static_cast<T>(std::ldexp(rs_s, -e));
          for (int64_t i = 0; i < N; ++i)
            o[i] = static_cast<T>(std::ldexp(static_cast<double>(a[i]), -e) * rs_s) * (pw ? pw[i] : T(1));
          continue;
        }
        const T rs = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(N) + eps));
        pr[r] = rs;
        if (pw) {
          for (int64_t i = 0; i < N; ++i) o[i] = (a[i] * rs) * pw[i];
        } else {
          for (int64_t i = 0; i < N; ++i) o[i] = a[i] * rs;
        }
      }
    });
  });
  return {y, rstd};
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  return rms_norm_forward(x, normalized_shape, weight, eps).y;
}

// Per row, with xhat = x * rstd and g = dy * w (g = dy without weight). From y = xhat w and
// d rstd / dx_k = -rstd^3 x_k / N:
//   dx = rstd * (g - xhat * mean(g * xhat))      dw = sum over rows of dy * xhat
// dy, x, dx: (M, N) as rows    w, dw: (N)    rstd: (M)
RMSNormGrads rms_norm_backward(const Tensor& dy0, const Tensor& x0, const Tensor& weight, const Tensor& rstd,
                               const Shape& norm_shape, bool need_dweight) {
  check_layer_norm_args(x0, norm_shape, weight, Tensor(), "rms_norm_backward");
  MG_CHECK(dy0.defined() && rstd.defined(), StateError, "rms_norm_backward: dy or rstd is undefined");
  MG_CHECK(dy0.shape() == x0.shape() && dy0.dtype() == x0.dtype(), ShapeError,
           "rms_norm_backward: dy {} {} does not match the input {} {}", dtype_name(dy0.dtype()),
           shape_str(dy0.shape()), dtype_name(x0.dtype()), shape_str(x0.shape()));
  const Tensor x = x0.contiguous(), dy = dy0.contiguous(), rs_r = rstd.contiguous();
  const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
  const int64_t N = numel_of(norm_shape);
  const int64_t M = numel_of(Shape(x.shape().begin(), x.shape().end() - static_cast<int64_t>(norm_shape.size())));
  MG_CHECK(rs_r.numel() == M && rs_r.dtype() == x.dtype(), ShapeError,
           "rms_norm_backward: rstd {} {} does not match input {} normalized over {}", dtype_name(rs_r.dtype()),
           shape_str(rstd.shape()), shape_str(x.shape()), shape_str(norm_shape));
  Tensor dx = empty(x.shape(), x.dtype()), xhat = empty(x.shape(), x.dtype());
  visit_float(x.dtype(), "rms_norm_backward", [&]<class T>() {
    const T *px = x.data<T>(), *pg = dy.data<T>(), *pr = rs_r.data<T>();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    T *pdx = dx.data<T>(), *ph = xhat.data<T>();
    parallel_for(0, M, grain_for(N), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T *a = px + r * N, *g = pg + r * N;
        T *h = ph + r * N, *o = pdx + r * N;
        const T rs = pr[r];
        T sgh[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // sum(g xhat) in eight lanes, added in a fixed order
        int64_t i = 0;
        for (; i + 8 <= N; i += 8)
          for (int j = 0; j < 8; ++j) {
            h[i + j] = a[i + j] * rs;
            sgh[j] += (pw ? g[i + j] * pw[i + j] : g[i + j]) * h[i + j];
          }
        for (; i < N; ++i) {
          h[i] = a[i] * rs;
          sgh[0] += (pw ? g[i] * pw[i] : g[i]) * h[i];
        }
        const T mean_gh =
            (((sgh[0] + sgh[1]) + (sgh[2] + sgh[3])) + ((sgh[4] + sgh[5]) + (sgh[6] + sgh[7]))) / static_cast<T>(N);
        for (int64_t k = 0; k < N; ++k) o[k] = rs * ((pw ? g[k] * pw[k] : g[k]) - h[k] * mean_gh);
      }
    });
  });
  RMSNormGrads out{dx, Tensor()};
  if (need_dweight) out.dweight = sum((dy * xhat).reshape({M, N}), {0}).reshape(norm_shape);
  return out;
}

}  // namespace mg
