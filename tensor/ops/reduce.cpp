// Reductions. Every reduction is brought to one of two contiguous layouts and summed in a fixed
// order, so results do not depend on the thread count:
//   rows:    x viewed as (M, R), out[m] = reduce_r x[m, r]   (reducing trailing dims)
//   columns: x viewed as (R, M), out[m] = reduce_r x[r, m]   (reducing leading dims: bias grads)
// Anything else is permuted to the rows layout first (one copy). Float32 sums accumulate in double.
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "minigrad/tensor/fastmath.h"
#include "minigrad/tensor/loops.h"
#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/reduce.h"

namespace mg {
namespace {
using detail::Rows;
using detail::rows_along;

// Sums accumulate in double, and int64 sums in uint64: they wrap around on overflow, as PyTorch's
// do, where a signed overflow would be undefined behaviour.
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, int64_t>, uint64_t, double>;

// Sum of n contiguous elements. Long runs are cut into fixed blocks whose partial sums are added in
// order: parallel, yet the same bits for any thread count.
template <class T>
acc_t<T> sum_run(const T* p, int64_t n) {
  constexpr int64_t kBlock = 1 << 16;
  auto seq = [p](int64_t b, int64_t e) {
    acc_t<T> s = 0;
    for (int64_t i = b; i < e; ++i) s += p[i];
    return s;
  };
  if (n <= kBlock) return seq(0, n);
  const int64_t nb = (n + kBlock - 1) / kBlock;
  std::vector<acc_t<T>> part(nb);
  parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) part[b] = seq(b * kBlock, std::min(n, (b + 1) * kBlock));
  });
  return std::accumulate(part.begin(), part.end(), acc_t<T>(0));
}

struct Plan {
  Shape keep_shape;  // output shape with reduced dims kept as 1
  Shape out_shape;   // output shape as returned (keepdim or not)
  int64_t M = 1, R = 1;
  Tensor rows;  // (M, R) contiguous, or undefined when `cols` is used
  Tensor cols;  // (R, M) contiguous
};

Plan plan_reduction(const Tensor& x, std::vector<int64_t> dims, bool keepdim, std::string_view op) {
  const int64_t nd = x.dim();
  std::vector<bool> red(nd, dims.empty());
  for (int64_t d : dims) {
    d = wrap_dim(d, nd, op);
    if (nd == 0) continue;  // a scalar: reducing "dim 0" leaves it as it is
    MG_CHECK(!red[d] || dims.empty(), ValueError, "{}: dim {} appears twice in the reduced dims", op, d);
    red[d] = true;
  }
  Plan p;
  std::vector<int64_t> kept, reduced;
  for (int64_t d = 0; d < nd; ++d) {
    p.keep_shape.push_back(red[d] ? 1 : x.shape()[d]);
    if (red[d])
      reduced.push_back(d), p.R *= x.shape()[d];
    else
      kept.push_back(d), p.M *= x.shape()[d], p.out_shape.push_back(x.shape()[d]);
  }
  if (keepdim) p.out_shape = p.keep_shape;
  const bool leading = reduced.empty() || kept.empty() || reduced.back() < kept.front();
  if (leading && !kept.empty() && !reduced.empty() && x.is_contiguous()) {
    p.cols = x;
  } else {
    std::vector<int64_t> perm = kept;
    perm.insert(perm.end(), reduced.begin(), reduced.end());
    p.rows = x.permute(perm).contiguous();
  }
  return p;
}

// Sum (divided by `div` for mean) in either layout.
Tensor reduce_sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool mean, std::string_view op) {
  MG_CHECK(x.defined(), StateError, "{}: the tensor is undefined", op);
  if (x.dtype() == DType::BFloat16)  // summed in float32 (exact widening), rounded once, as PyTorch's
    return reduce_sum(x.to(DType::Float32), dims, keepdim, mean, op).to(DType::BFloat16);
  MG_CHECK(x.dtype() != DType::Bool, DTypeError, "{}: bool tensors cannot be summed; convert first", op);
  MG_CHECK(!mean || is_floating(x.dtype()), DTypeError, "{}: expected a floating tensor (float32 or float64), got {}",
           op, dtype_name(x.dtype()));
  Plan p = plan_reduction(x, dims, keepdim, op);
  Tensor out = empty(p.out_shape, x.dtype());
  visit_all(x.dtype(), op, [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      T* o = out.data<T>();
      const double scale = mean ? 1.0 / static_cast<double>(p.R) : 1.0;
      auto finish = [&](acc_t<T> s) {
        return mean ? static_cast<T>(static_cast<double>(s) * scale) : static_cast<T>(s);
      };
      if (p.rows.defined()) {
        const T* a = p.rows.data<T>();
        if (p.M == 1) {
          o[0] = finish(sum_run(a, p.R));
        } else {
          parallel_for(0, p.M, grain_for(p.R), [&](int64_t m0, int64_t m1) {
            for (int64_t m = m0; m < m1; ++m) o[m] = finish(sum_run(a + m * p.R, p.R));
          });
        }
      } else {
        const T* a = p.cols.data<T>();
        // Each chunk of output columns adds the R rows of its columns in order (tensor/parallel.h:
        // column_chunk).
        parallel_for(0, p.M, column_chunk(p.R, p.M), [&](int64_t m0, int64_t m1) {
          std::vector<acc_t<T>> acc(m1 - m0, 0);
          for (int64_t r = 0; r < p.R; ++r) {
            const T* row = a + r * p.M;
            for (int64_t m = m0; m < m1; ++m) acc[m - m0] += row[m];
          }
          for (int64_t m = m0; m < m1; ++m) o[m] = finish(acc[m - m0]);
        });
      }
    }
  });
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce_sum(x, dims, keepdim, false, "sum");
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce_sum(x, dims, keepdim, true, "mean");
}

namespace {
// The largest (or smallest) value along `dim` and its first index; NaN wins, like torch.max.
template <bool kLargest>
std::pair<Tensor, Tensor> extremum(const Tensor& x, int64_t dim, bool keepdim, std::string_view op) {
  MG_CHECK(x.defined(), StateError, "{}: the tensor is undefined", op);
  dim = wrap_dim(dim, x.dim(), op);
  MG_CHECK(x.dim() == 0 || x.shape()[dim] > 0, ValueError, "{}: cannot reduce over dim {} of size 0 (shape {})", op,
           dim, shape_str(x.shape()));
  MG_CHECK(x.dtype() != DType::Bool, DTypeError, "{}: bool tensors have no order here; convert first", op);
  Plan p = plan_reduction(x, {dim}, keepdim, op);
  Tensor rows = p.rows.defined() ? p.rows : p.cols.reshape({p.R, p.M}).permute({1, 0}).contiguous();
  Tensor values = empty(p.out_shape, x.dtype()), indices = empty(p.out_shape, DType::Int64);
  visit_all(x.dtype(), op, [&]<class T>() {
    const T* a = rows.data<T>();
    T* v = values.data<T>();
    int64_t* ix = indices.data<int64_t>();
    auto better = [](T c, T b) { return kLargest ? c > b : c < b; };
    parallel_for(0, p.M, grain_for(p.R), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const T* row = a + m * p.R;
        int64_t best = 0;
        for (int64_t r = 1; r < p.R; ++r) {
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(row[best])) break;  // NaN wins, like torch.max
            if (better(row[r], row[best]) || std::isnan(row[r])) best = r;
          } else {
            if (better(row[r], row[best])) best = r;
          }
        }
        v[m] = row[best];
        ix[m] = best;
      }
    });
  });
  return {values, indices};
}

}  // namespace

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum<true>(x, dim, keepdim, "max");
}
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum<false>(x, dim, keepdim, "min");
}
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return extremum<true>(x, dim, keepdim, "argmax").second; }
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) { return extremum<false>(x, dim, keepdim, "argmin").second; }

Tensor max(const Tensor& x) {
  MG_CHECK(x.defined() && x.numel() > 0, ValueError, "max: expected a non-empty tensor, got shape {}",
           shape_str(x.shape()));
  return extremum<true>(x.reshape({-1}), 0, false, "max").first;
}
Tensor min(const Tensor& x) {
  MG_CHECK(x.defined() && x.numel() > 0, ValueError, "min: expected a non-empty tensor, got shape {}",
           shape_str(x.shape()));
  return extremum<false>(x.reshape({-1}), 0, false, "min").first;
}
Tensor argmax(const Tensor& x) {
  MG_CHECK(x.defined() && x.numel() > 0, ValueError, "argmax: expected a non-empty tensor, got shape {}",
           shape_str(x.shape()));
  return extremum<true>(x.reshape({-1}), 0, false, "argmax").second;
}
Tensor argmin(const Tensor& x) {
  MG_CHECK(x.defined() && x.numel() > 0, ValueError, "argmin: expected a non-empty tensor, got shape {}",
           shape_str(x.shape()));
  return extremum<false>(x.reshape({-1}), 0, false, "argmin").second;
}

// var = sum((x - mean)^2) / (N - correction) over dims, N their element count. Two passes (the
// mean first), so no cancellation; float32 sums accumulate in double.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  const OpScope scope("var");  // mean's, sub's and sum's errors name var
  MG_CHECK(x.defined(), StateError, "var: the tensor is undefined");
  MG_CHECK(is_floating(x.dtype()), DTypeError, "var: expected a floating tensor, got {}", dtype_name(x.dtype()));
  MG_CHECK(correction >= 0, ValueError, "var: correction must be >= 0, got {}", correction);
  const Tensor mu = mean(x, dims, /*keepdim=*/true);
  const Tensor d = x - mu;
  const int64_t n = x.numel() / std::max<int64_t>(1, mu.numel());
  // N <= correction divides by 0 or less: inf or NaN, as PyTorch returns (with a warning)
  return sum(d * d, dims, keepdim) / static_cast<double>(std::max<int64_t>(0, n - correction));
}

// std = sqrt(var)
Tensor std(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  const OpScope scope("std");
  MG_CHECK(x.defined(), StateError, "std: the tensor is undefined");
  MG_CHECK(is_floating(x.dtype()), DTypeError, "std: expected a floating tensor, got {}", dtype_name(x.dtype()));
  return sqrt(var(x, dims, correction, keepdim));
}

// prod along dim (all elements when dim is absent); float32 products accumulate in double
Tensor prod(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  MG_CHECK(x.defined(), StateError, "prod: the tensor is undefined");
  MG_CHECK(x.dtype() != DType::Bool, DTypeError, "prod: bool tensors cannot be multiplied; convert first");
  if (!dim) return prod(x.reshape({-1}), 0, false).reshape(keepdim ? Shape(x.dim(), 1) : Shape{});
  const int64_t d = wrap_dim(*dim, x.dim(), "prod");
  if (x.dim() == 0) return x.clone();
  const Rows r = rows_along(x, d);
  const int64_t M = r.rows.size(0), n = r.rows.size(1);
  Tensor out = empty({M}, x.dtype());
  visit_all(x.dtype(), "prod", [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* a = r.rows.data<T>();
      T* o = out.data<T>();
      parallel_for(0, M, grain_for(n), [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          acc_t<T> p = 1;
          for (int64_t i = 0; i < n; ++i) p *= a[m * n + i];
          o[m] = static_cast<T>(p);
        }
      });
    }
  });
  Shape kept = x.shape();
  kept[d] = 1;
  Tensor y = out.reshape(kept);
  return keepdim ? y : y.squeeze(d);
}

// dx_i = dy * prod_{j != i} x_j along the dim: exclusive prefix times exclusive suffix products,
// so zeros need no division (one zero: only its own place gets a gradient; two: none does)
Tensor prod_backward(const Tensor& dy, const Tensor& x, std::optional<int64_t> dim) {
  MG_CHECK(dy.defined() && x.defined(), StateError, "prod_backward: an operand is undefined");
  MG_CHECK(is_floating(x.dtype()) && dy.dtype() == x.dtype(), DTypeError,
           "prod_backward: dy {} and x {} must be one floating dtype", dtype_name(dy.dtype()), dtype_name(x.dtype()));
  if (!dim) return prod_backward(dy.reshape({1}), x.reshape({-1}), 0).reshape(x.shape());
  const int64_t d = wrap_dim(*dim, x.dim(), "prod_backward");
  if (x.dim() == 0) return dy.reshape({}).clone();
  const Rows r = rows_along(x, d);
  const int64_t M = r.rows.size(0), n = r.rows.size(1);
  MG_CHECK(dy.numel() == M, ShapeError, "prod_backward: dy has {} elements but x {} has {} products along dim {}",
           dy.numel(), shape_str(x.shape()), M, d);
  Tensor g = dy.contiguous(), dx = empty({M, n}, x.dtype());
  visit_float(x.dtype(), "prod_backward", [&]<class T>() {
    const T* a = r.rows.data<T>();
    const T* pg = g.data<T>();
    T* o = dx.data<T>();
    parallel_for(0, M, grain_for(n), [&](int64_t m0, int64_t m1) {
      std::vector<double> suffix(n + 1);
      for (int64_t m = m0; m < m1; ++m) {
        const T* row = a + m * n;
        suffix[n] = 1;
        for (int64_t i = n - 1; i >= 0; --i) suffix[i] = suffix[i + 1] * row[i];
        double prefix = 1;
        for (int64_t i = 0; i < n; ++i) {
          o[m * n + i] = static_cast<T>(static_cast<double>(pg[m]) * prefix * suffix[i + 1]);
          prefix *= row[i];
        }
      }
    });
  });
  return r.from_rows(dx);
}

// y_i = sum_{j <= i} x_j along dim (sum_{j >= i} when reverse: the backward of cumsum); float32
// sums accumulate in double, in order
Tensor cumsum(const Tensor& x, int64_t dim, bool reverse) {
  const OpScope scope("cumsum");  // the allocator's errors name cumsum
  MG_CHECK(x.defined(), StateError, "cumsum: the tensor is undefined");
  MG_CHECK(x.dtype() != DType::Bool, DTypeError, "cumsum: bool tensors cannot be summed; convert first");
  const int64_t d = wrap_dim(dim, x.dim(), "cumsum");
  if (x.dim() == 0) return x.clone();
  const Rows r = rows_along(x, d);
  const int64_t M = r.rows.size(0), n = r.rows.size(1);
  Tensor out = empty({M, n}, x.dtype());
  visit_all(x.dtype(), "cumsum", [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* a = r.rows.data<T>();
      T* o = out.data<T>();
      parallel_for(0, M, grain_for(n), [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          acc_t<T> s = 0;
          for (int64_t k = 0; k < n; ++k) {
            const int64_t i = reverse ? n - 1 - k : k;
            s += a[m * n + i];
            o[m * n + i] = static_cast<T>(s);
          }
        }
      });
    }
  });
  return r.from_rows(out);
}

// lse = m + log(sum exp(x - m)) over dims, m the max (a row of all -inf gives -inf, as in torch)
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  MG_CHECK(x.defined(), StateError, "logsumexp: the tensor is undefined");
  MG_CHECK(is_floating(x.dtype()), DTypeError, "logsumexp: expected a floating tensor, got {}", dtype_name(x.dtype()));
  Plan p = plan_reduction(x, dims, keepdim, "logsumexp");
  const Tensor rows = p.rows.defined() ? p.rows : p.cols.reshape({p.R, p.M}).permute({1, 0}).contiguous();
  Tensor out = empty(p.out_shape, x.dtype());
  visit_float(x.dtype(), "logsumexp", [&]<class T>() {
    const T* a = rows.data<T>();
    T* o = out.data<T>();
    parallel_for(0, p.M, grain_for(p.R), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const T* row = a + m * p.R;
        double mx = -INFINITY;
        for (int64_t r = 0; r < p.R; ++r) mx = std::isnan(row[r]) || row[r] > mx ? static_cast<double>(row[r]) : mx;
        if (std::isinf(mx) || std::isnan(mx)) {  // all -inf, or an inf or NaN present: that is the answer
          o[m] = static_cast<T>(mx);
          continue;
        }
        // e^(x - m) in the tensor's type (fast::exp for float, libm's for double), summed in double;
        // rounding x - m to float moves e^(x - m) by |x - m| 2^-24 of itself: float's own precision
        // for the terms within a few units of the max, which carry the sum
        double s = 0;
        const T mt = static_cast<T>(mx);
        for (int64_t r = 0; r < p.R; ++r) s += static_cast<double>(fast::exp(row[r] - mt));
        o[m] = static_cast<T>(mx + std::log(s));
      }
    });
  });
  return out;
}

Tensor sum_to_shape(const Tensor& x, const Shape& shape, std::string_view op) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  bool fits = lead >= 0;
  for (int64_t d = 0; fits && d < static_cast<int64_t>(shape.size()); ++d)
    fits = shape[d] == x.shape()[lead + d] || shape[d] == 1;
  MG_CHECK(fits, ShapeError, "{}: a gradient of shape {} cannot be summed down to shape {}", op, shape_str(x.shape()),
           shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && x.shape()[d] != 1)) dims.push_back(d);
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, /*keepdim=*/true).reshape(shape);
}

}  // namespace mg
