// Sorting and selection: each line along the dim becomes a row (detail::rows_along), whose
// indices are sorted by value with std::stable_sort, then the rows go back into place.
#include "minigrad/tensor/ops/sort.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "minigrad/tensor/loops.h"

namespace mg {
namespace {
// The first `k` positions of each row of x along dim, in the order `descending` (or ascending)
// puts them, stable; values and int64 indices, each (..., k, ...) in x's layout.
std::pair<Tensor, Tensor> sorted_positions(const Tensor& x, int64_t dim, int64_t k, bool descending,
                                           std::string_view op) {
  MG_CHECK(x.defined(), StateError, "{}: the tensor is undefined", op);
  MG_CHECK(x.dtype() != DType::Bool, DTypeError, "{}: bool tensors are not sorted; convert first", op);
  if (x.dim() == 0) {
    wrap_dim(dim, 0, op);
    MG_CHECK(k <= 1, ValueError, "{}: k = {} is larger than the 1 element of a 0-dim tensor", op, k);
    return {k == 1 ? x.clone() : empty({0}, x.dtype()), k == 1 ? zeros({}, DType::Int64) : empty({0}, DType::Int64)};
  }
  const int64_t d = wrap_dim(dim, x.dim(), op);
  const int64_t n = x.size(d);
  MG_CHECK(k >= 0 && k <= n, ValueError, "{}: k = {} is out of range for dim {} of size {} (shape {})", op, k, d, n,
           shape_str(x.shape()));
  const detail::Rows r = detail::rows_along(x, d);
  const int64_t M = r.rows.size(0);
  Tensor values = empty({M, k}, x.dtype()), indices = empty({M, k}, DType::Int64);
  visit_all(x.dtype(), op, [&]<class T>() {
    const T* a = r.rows.data<T>();
    T* v = values.data<T>();
    int64_t* ix = indices.data<int64_t>();
    // NaN is larger than any number, and equal to NaN
    auto less = [](T p, T q) {
      if constexpr (std::is_floating_point_v<T>)
        return !std::isnan(p) && (std::isnan(q) || p < q);
      else
        return p < q;
    };
    parallel_for(0, M, grain_for(n), [&](int64_t m0, int64_t m1) {
      std::vector<int64_t> order(n);
      for (int64_t m = m0; m < m1; ++m) {
        const T* row = a + m * n;
        std::iota(order.begin(), order.end(), 0);
        // one comparator for both orders: one stable_sort instantiated per dtype, not two
        std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
          return descending ? less(row[j], row[i]) : less(row[i], row[j]);
        });
        for (int64_t i = 0; i < k; ++i) v[m * k + i] = row[order[i]], ix[m * k + i] = order[i];
      }
    });
  });
  Shape permuted = r.permuted;
  permuted.back() = k;
  detail::Rows back{Tensor(), permuted, r.back};
  return {back.from_rows(values), back.from_rows(indices)};
}
}  // namespace

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  // sorted = false allows any order; the sorted one is as good as any
  return sorted_positions(x, dim, k, largest, "topk");
}

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  MG_CHECK(x.defined(), StateError, "sort: the tensor is undefined");
  return sorted_positions(x, dim, x.dim() == 0 ? 1 : x.size(wrap_dim(dim, x.dim(), "sort")), descending, "sort");
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  MG_CHECK(x.defined(), StateError, "argsort: the tensor is undefined");
  return sorted_positions(x, dim, x.dim() == 0 ? 1 : x.size(wrap_dim(dim, x.dim(), "argsort")), descending, "argsort")
      .second;
}

}  // namespace mg
