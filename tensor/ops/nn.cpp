// Kernels that neural nets call often enough to deserve one pass each: softmax, log_softmax and
// layer norm. Each works on "lines": the elements along one dim with every other index fixed.
#include <cmath>
#include <limits>

#include "tensor/fastmath.h"
#include "tensor/loops.h"
#include "tensor/ops.h"

namespace mg {
namespace {

// Call f(line_ptr, n, stride) for every line of contiguous `x` along `dim`, in parallel. Output
// tensors made with empty_like(x) have the same layout, so the same offset addresses them.
template <class T, class F>
void for_each_line(const Tensor& x, int64_t dim, F f) {
  const int64_t n = x.dim() == 0 ? 1 : x.shape()[dim];
  const int64_t inner = x.dim() == 0 ? 1 : numel_of(Shape(x.shape().begin() + dim + 1, x.shape().end()));
  const int64_t lines = n == 0 ? 0 : x.numel() / n;
  parallel_for(0, lines, std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)), [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) {
      const int64_t outer = l / inner, in = l % inner;
      f(outer * n * inner + in, n, inner);
    }
  });
}

template <bool kLog>
Tensor softmax_impl(const Tensor& x0, int64_t dim, std::string_view op) {
  MG_CHECK(x0.defined(), StateError, "{}: the tensor is undefined", op);
  dim = x0.dim() == 0 ? 0 : wrap_dim(dim, x0.dim(), op);
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
          const T lse = std::log(s) + mx;
          for (int64_t i = 0; i < n; ++i) o[i] = a[i] - lse;
        } else {
          const T inv = T(1) / s;
          for (int64_t i = 0; i < n; ++i) o[i] *= inv;
        }
        return;
      }
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += fast::exp(static_cast<double>(a[i * st] - mx));
      if constexpr (kLog) {
        const T lse = static_cast<T>(std::log(s)) + mx;
        for (int64_t i = 0; i < n; ++i) o[i * st] = a[i * st] - lse;
      } else {
        const double inv = 1.0 / s;
        for (int64_t i = 0; i < n; ++i) o[i * st] = static_cast<T>(fast::exp(static_cast<double>(a[i * st] - mx)) * inv);
      }
    });
  });
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl<false>(x, dim, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl<true>(x, dim, "log_softmax"); }

Tensor layer_norm(const Tensor& x0, int64_t k, const Tensor& weight, const Tensor& bias, double eps,
                  Tensor* mean_out, Tensor* rstd_out) {
  MG_CHECK(x0.defined(), StateError, "layer_norm: the input is undefined");
  MG_CHECK(k >= 1 && k <= x0.dim(), ShapeError,
           "layer_norm: cannot normalize over the last {} dims of an input of shape {}", k,
           shape_str(x0.shape()));
  const Shape norm_shape(x0.shape().end() - k, x0.shape().end());
  const Shape row_shape(x0.shape().begin(), x0.shape().end() - k);
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    MG_CHECK(p->shape() == norm_shape, ShapeError,
             "layer_norm: {} has shape {} but the normalized shape is {} (input {})",
             p == &weight ? "weight" : "bias", shape_str(p->shape()), shape_str(norm_shape),
             shape_str(x0.shape()));
    MG_CHECK(p->dtype() == x0.dtype(), DTypeError, "layer_norm: {} is {} but the input is {}",
             p == &weight ? "weight" : "bias", dtype_name(p->dtype()), dtype_name(x0.dtype()));
  }
  const Tensor x = x0.contiguous();
  const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  const int64_t N = numel_of(norm_shape), M = numel_of(row_shape);
  Tensor y = empty(x.shape(), x.dtype()), mean = empty(row_shape, x.dtype()), rstd = empty(row_shape, x.dtype());
  visit_float(x.dtype(), "layer_norm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    T *py = y.data<T>(), *pm = mean.data<T>(), *pr = rstd.data<T>();
    parallel_for(0, M, std::max<int64_t>(1, kGrain / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* a = px + r * N;
        double mu, var;
        if constexpr (std::is_same_v<T, float>) {  // eight float lanes: vectorised, fixed order
          mu = fast::sum8(a, N) / static_cast<float>(N);
          var = fast::sum8_sq(a, N, static_cast<float>(mu)) / static_cast<float>(N);
        } else {
          double s = 0, ss = 0;
          for (int64_t i = 0; i < N; ++i) s += a[i];
          mu = s / static_cast<double>(N);
          for (int64_t i = 0; i < N; ++i) ss += (a[i] - mu) * (a[i] - mu);  // two passes: no cancellation
          var = ss / static_cast<double>(N);
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
      }
    });
  });
  if (mean_out) *mean_out = mean;
  if (rstd_out) *rstd_out = rstd;
  return y;
}

}  // namespace mg
