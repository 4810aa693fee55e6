// Picking and scattering by integer index. Every index is range-checked before anything is read
// or written: a bad id is an IndexError naming the op, the id and the valid range.
#include <cmath>
#include <cstring>
#include <limits>

#include "minigrad/tensor/loops.h"
#include "minigrad/tensor/ops/index.h"

namespace mg {
namespace {

void check_index_tensor(const Tensor& index, std::string_view op) {
  MG_CHECK(index.defined(), StateError, "{}: the index is undefined", op);
  MG_CHECK(index.dtype() == DType::Int64, DTypeError, "{}: indices must be int64, got {}", op,
           dtype_name(index.dtype()));
}

// Every value of `index` must lie in [0, size).
void check_range(const Tensor& index, int64_t size, int64_t dim, std::string_view op) {
  const Tensor c = index.contiguous();
  const int64_t* p = c.data<int64_t>();
  for (int64_t i = 0; i < c.numel(); ++i)
    MG_CHECK(p[i] >= 0 && p[i] < size, IndexError,
             "{}: index {} is out of range for dim {} of size {} (expected 0 to {})", op, p[i], dim, size, size - 1);
}

// The checks every scatter makes: base, index and src defined, one dtype, index int64 with
// base's ndim and no larger than src (nor than base outside `dim`), indices in [0, base.size(dim)).
// Returns `dim` wrapped.
int64_t check_scatter(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src, std::string_view op) {
  MG_CHECK(base.defined() && src.defined(), StateError, "{}: an operand is undefined", op);
  check_index_tensor(index, op);
  dim = checked_dim(dim, base.dim(), op);
  MG_CHECK(base.dtype() == src.dtype(), DTypeError, "{}: dtype mismatch, {} and {}", op, dtype_name(base.dtype()),
           dtype_name(src.dtype()));
  MG_CHECK(index.dim() == base.dim() && src.dim() == base.dim(), ShapeError,
           "{}: base {}, index {} and src {} must have the same number of dims", op, shape_str(base.shape()),
           shape_str(index.shape()), shape_str(src.shape()));
  for (int64_t d = 0; d < base.dim(); ++d)
    MG_CHECK(index.shape()[d] <= src.shape()[d] && (d == dim || index.shape()[d] <= base.shape()[d]), ShapeError,
             "{}: index shape {} does not fit src {} / base {} at dim {}", op, shape_str(index.shape()),
             shape_str(src.shape()), shape_str(base.shape()), d);
  check_range(index, base.shape()[dim], dim, op);
  return dim;
}

// For every element of `index`, in row-major order: f(offset in out, offset in src), where the
// out position is the element's own with index[e] along `dim`. Serial on purpose: two indices may
// name one element, and a fixed order keeps sums (and which write wins) the same on every run.
template <class F>
void for_each_scattered(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, F&& f) {
  const Tensor idx = index.contiguous();
  const int64_t* pi = idx.data<int64_t>();
  std::vector<int64_t> pos(index.dim(), 0);
  for (int64_t e = 0; e < idx.numel(); ++e) {
    int64_t so = 0, oo = 0;
    for (int64_t d = 0; d < index.dim(); ++d) {
      so += pos[d] * src.strides()[d];
      oo += (d == dim ? pi[e] : pos[d]) * out.strides()[d];
    }
    f(oo, so);
    for (int64_t d = index.dim() - 1; d >= 0; --d) {
      if (++pos[d] < index.shape()[d]) break;
      pos[d] = 0;
    }
  }
}

// x viewed as (outer, n, inner) around `dim`.
struct Around {
  int64_t outer, n, inner;
};
Around around(const Shape& s, int64_t dim) {
  return {numel_of(Shape(s.begin(), s.begin() + dim)), s[dim], numel_of(Shape(s.begin() + dim + 1, s.end()))};
}

}  // namespace

Tensor index_select(const Tensor& x0, int64_t dim, const Tensor& index) {
  MG_CHECK(x0.defined(), StateError, "index_select: the input is undefined");
  check_index_tensor(index, "index_select");
  MG_CHECK(index.dim() <= 1, ShapeError, "index_select: index must be 1-D, got shape {}", shape_str(index.shape()));
  dim = checked_dim(dim, x0.dim(), "index_select");
  check_range(index, x0.shape()[dim], dim, "index_select");
  Shape out_shape = x0.shape();
  out_shape[dim] = index.numel();
  // nothing selected: no contiguous copy of x first (of an expanded input it could be terabytes)
  if (numel_of(out_shape) == 0) return empty(out_shape, x0.dtype());
  const Tensor x = x0.contiguous();
  const Tensor idx = index.contiguous();
  Tensor out = empty(out_shape, x.dtype());
  const Around a = around(x.shape(), dim);
  const int64_t k = idx.numel(), bytes = a.inner * static_cast<int64_t>(itemsize(x.dtype()));
  if (out.numel() == 0) return out;  // nothing to copy (and a zero-size storage has no data pointer)
  const int64_t* pi = idx.data<int64_t>();
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  parallel_for(0, a.outer * k, grain_for(a.inner), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / k, i = r % k;
      std::memcpy(dst + r * bytes, src + (o * a.n + pi[i]) * bytes, bytes);
    }
  });
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  MG_CHECK(x.defined(), StateError, "gather: the input is undefined");
  check_index_tensor(index, "gather");
  dim = checked_dim(dim, x.dim(), "gather");
  MG_CHECK(index.dim() == x.dim(), ShapeError, "gather: index has {} dims but the input has {} (index {}, input {})",
           index.dim(), x.dim(), shape_str(index.shape()), shape_str(x.shape()));
  for (int64_t d = 0; d < x.dim(); ++d)
    MG_CHECK(d == dim || index.shape()[d] <= x.shape()[d], ShapeError,
             "gather: index shape {} is larger than input shape {} at dim {}", shape_str(index.shape()),
             shape_str(x.shape()), d);
  check_range(index, x.shape()[dim], dim, "gather");
  Tensor out = empty(index.shape(), x.dtype());
  Strides xs = x.strides();
  const int64_t step = xs[dim];
  xs[dim] = 0;  // the loop walks x everywhere but along `dim`; the index supplies that coordinate
  visit_all(x.dtype(), "gather", [&]<class T>() {
    T* o = out.data<T>();
    const int64_t* pi = index.data<int64_t>();
    const T* px = x.data<T>();
    detail::for_each_run<3>(index.shape(), {out.strides(), index.strides(), xs},
                            [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
                              for (int64_t j = 0; j < n; ++j)
                                o[off[0] + j * st[0]] = px[off[2] + j * st[2] + pi[off[1] + j * st[1]] * step];
                            });
  });
  return out;
}

Tensor scatter_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  dim = check_scatter(base, dim, index, src, "scatter_add");
  Tensor out = base.clone();
  visit_all(base.dtype(), "scatter_add", [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      T* o = out.data<T>();
      const T* s = src.data<T>();
      for_each_scattered(out, dim, index, src, [&](int64_t oo, int64_t so) { o[oo] += s[so]; });
    } else {
      throw DTypeError("scatter_add: bool tensors are not supported");
    }
  });
  return out;
}

Tensor index_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src0) {
  MG_CHECK(base.defined() && src0.defined(), StateError, "index_add: an operand is undefined");
  check_index_tensor(index, "index_add");
  MG_CHECK(index.dim() <= 1, ShapeError, "index_add: index must be 1-D, got shape {}", shape_str(index.shape()));
  dim = checked_dim(dim, base.dim(), "index_add");
  Shape expect = base.shape();
  expect[dim] = index.numel();
  MG_CHECK(src0.shape() == expect, ShapeError,
           "index_add: src has shape {} but base {} with {} indices along dim {} needs {}", shape_str(src0.shape()),
           shape_str(base.shape()), index.numel(), dim, shape_str(expect));
  MG_CHECK(base.dtype() == src0.dtype(), DTypeError, "index_add: dtype mismatch, {} and {}", dtype_name(base.dtype()),
           dtype_name(src0.dtype()));
  check_range(index, base.shape()[dim], dim, "index_add");
  Tensor out = base.clone();
  const Tensor src = src0.contiguous(), idx = index.contiguous();
  const Around a = around(base.shape(), dim);
  const int64_t k = idx.numel();
  visit_float(base.dtype(), "index_add", [&]<class T>() {
    T* o = out.data<T>();
    const T* s = src.data<T>();
    const int64_t* pi = idx.data<int64_t>();
    // Split the work over (outer, column block): each task owns its output elements and adds the
    // k source slices in order, so no two threads touch the same element.
    const int64_t block = 256, nblk = (a.inner + block - 1) / block;
    parallel_for(0, a.outer * nblk, grain_for(k * block), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t ob = t / nblk, c0 = (t % nblk) * block, c1 = std::min(a.inner, c0 + block);
        for (int64_t i = 0; i < k; ++i) {
          T* orow = o + (ob * a.n + pi[i]) * a.inner;
          const T* srow = s + (ob * k + i) * a.inner;
          for (int64_t c = c0; c < c1; ++c) orow[c] += srow[c];
        }
      }
    });
  });
  return out;
}

Tensor scatter(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  dim = check_scatter(base, dim, index, src, "scatter");
  Tensor out = base.clone();
  visit_all(base.dtype(), "scatter", [&]<class T>() {
    T* o = out.data<T>();
    const T* s = src.data<T>();
    for_each_scattered(out, dim, index, src, [&](int64_t oo, int64_t so) { o[oo] = s[so]; });
  });
  return out;
}

Tensor scatter(const Tensor& base, int64_t dim, const Tensor& index, double value) {
  MG_CHECK(base.defined(), StateError, "scatter: the input is undefined");
  check_index_tensor(index, "scatter");
  // the value as a src of index's shape (stride 0: one element, read everywhere)
  return scatter(base, dim, index, full({}, value, base.dtype()).expand(index.shape()));
}

namespace {
enum class Reduce { sum, prod, mean, amax, amin };
Reduce parse_reduce(std::string_view reduce) {
  if (reduce == "sum") return Reduce::sum;
  if (reduce == "prod") return Reduce::prod;
  if (reduce == "mean") return Reduce::mean;
  if (reduce == "amax") return Reduce::amax;
  if (reduce == "amin") return Reduce::amin;
  throw ValueError(fmt::format(
      "scatter_reduce: reduce must be \"sum\", \"prod\", \"mean\", \"amax\" or \"amin\", got \"{}\"", reduce));
}

// The starting values of amax and amin without include_self: -inf and inf, or int64's extremes.
template <class T>
T lowest() {
  if constexpr (std::is_floating_point_v<T>)
    return -std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::lowest();
}
template <class T>
T highest() {
  if constexpr (std::is_floating_point_v<T>)
    return std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::max();
}

// How many src elements land on each element of base (an int64 tensor of base's shape).
Tensor scatter_counts(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor n = zeros(base.shape(), DType::Int64);
  int64_t* c = n.data<int64_t>();
  for_each_scattered(n, dim, index, src, [&](int64_t oo, int64_t) { ++c[oo]; });
  return n;
}
}  // namespace

// out = base; then each src element combined into out[index] (in index order); mean divides by
// the count (+1 for base's own value with include_self); untouched elements keep base's value.
Tensor scatter_reduce(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                      bool include_self) {
  dim = check_scatter(base, dim, index, src, "scatter_reduce");
  const Reduce r = parse_reduce(reduce);
  Tensor out = base.clone();
  const Tensor count = scatter_counts(base, dim, index, src);
  const int64_t* c = count.data<int64_t>();
  visit_all(base.dtype(), "scatter_reduce", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("scatter_reduce: bool tensors are not supported");
    } else {
      T* o = out.data<T>();
      const T* s = src.data<T>();
      if (!include_self)  // a touched element starts from the reduction's identity, not base's value
        for (int64_t i = 0; i < out.numel(); ++i)
          if (c[i] > 0)
            o[i] = r == Reduce::prod ? T(1) : r == Reduce::amax ? lowest<T>() : r == Reduce::amin ? highest<T>() : T(0);
      for_each_scattered(out, dim, index, src, [&](int64_t oo, int64_t so) {
        const T v = s[so];
        T& a = o[oo];
        switch (r) {
          case Reduce::sum:
          case Reduce::mean:
            a += v;
            break;
          case Reduce::prod:
            a *= v;
            break;
          // a NaN wins, whichever side it is on (as torch.amax)
          case Reduce::amax:
            a = (v != v || v > a) ? v : a;
            break;
          case Reduce::amin:
            a = (v != v || v < a) ? v : a;
            break;
        }
      });
      if (r == Reduce::mean)
        for (int64_t i = 0; i < out.numel(); ++i) {
          const int64_t n = c[i] + (include_self ? 1 : 0);
          if (c[i] == 0) continue;
          if constexpr (std::is_floating_point_v<T>)
            o[i] /= static_cast<T>(n);
          else
            o[i] = static_cast<T>(std::floor(static_cast<double>(o[i]) / static_cast<double>(n)));  // PyTorch floors
        }
    }
  });
  return out;
}

// The derivatives of scatter_reduce (y its result), per reduction:
//   sum:   dbase = dy                  dsrc = gather(dy)
//   mean:  dbase = dy / n              dsrc = gather(dy / n)        n = the count (+1 with include_self)
//   prod:  d(each factor) = dy times the product of the other factors of its element (y / factor
//          when no factor is 0; with one zero factor only that factor's is nonzero; with two, all 0)
//   amax, amin: dy shared equally between the factors equal to the result (ties split it; base's
//          value counts as a tie even without include_self, as in PyTorch)
// With include_self false, base's touched elements took no part: their dbase is 0.
ScatterReduceGrads scatter_reduce_backward(const Tensor& dy0, const Tensor& base0, int64_t dim, const Tensor& index,
                                           const Tensor& src0, const Tensor& result0, std::string_view reduce,
                                           bool include_self) {
  dim = check_scatter(base0, dim, index, src0, "scatter_reduce");
  const Reduce r = parse_reduce(reduce);
  const Tensor dy = dy0.contiguous(), base = base0.contiguous(), src = src0.contiguous(), y = result0.contiguous();
  const Tensor count = scatter_counts(base, dim, index, src);
  const int64_t* c = count.data<int64_t>();
  ScatterReduceGrads g{zeros(base.shape(), base.dtype()), zeros(src.shape(), src.dtype())};
  visit_float(base.dtype(), "scatter_reduce backward", [&]<class T>() {
    const T* pdy = dy.data<T>();
    const T* pb = base.data<T>();
    const T* ps = src.data<T>();
    const T* py = y.data<T>();
    T* db = g.dbase.data<T>();
    T* ds = g.dsrc.data<T>();
    const int64_t n = base.numel();
    // per element of base: what its factors share (the ties, for amax/amin), or how many are 0 and
    // what the nonzero ones multiply to (prod)
    std::vector<T> share(n, T(0)), nonzero_product(n, T(1));
    std::vector<int64_t> zero_count(n, 0);
    auto joins = [&](int64_t i) { return include_self || c[i] == 0; };  // base's value is a factor of y[i]
    for (int64_t i = 0; i < n; ++i) {
      // (PyTorch counts base's value among the ties even when include_self left it out, so a src
      // equal to it gets only part of dy; the same here, to give PyTorch's numbers)
      if (r == Reduce::amax || r == Reduce::amin) share[i] += pb[i] == py[i] ? T(1) : T(0);
      if (!joins(i)) continue;
      if (r == Reduce::prod) (pb[i] == T(0) ? ++zero_count[i] : (nonzero_product[i] *= pb[i], 0));
    }
    for_each_scattered(base, dim, index, src, [&](int64_t oo, int64_t so) {
      if (r == Reduce::amax || r == Reduce::amin) share[oo] += ps[so] == py[oo] ? T(1) : T(0);
      if (r == Reduce::prod) (ps[so] == T(0) ? ++zero_count[oo] : (nonzero_product[oo] *= ps[so], 0));
    });
    // d(a factor v of element i)
    auto factor_grad = [&](int64_t i, T v) -> T {
      switch (r) {
        case Reduce::sum:
          return pdy[i];
        case Reduce::mean:
          return pdy[i] / static_cast<T>(c[i] + (include_self ? 1 : 0));
        case Reduce::prod:
          if (zero_count[i] == 0) return pdy[i] * py[i] / v;
          return zero_count[i] == 1 && v == T(0) ? pdy[i] * nonzero_product[i] : T(0);
        default:
          return v == py[i] ? pdy[i] / share[i] : T(0);
      }
    };
    for (int64_t i = 0; i < n; ++i) db[i] = c[i] == 0 ? pdy[i] : joins(i) ? factor_grad(i, pb[i]) : T(0);
    for_each_scattered(base, dim, index, src, [&](int64_t oo, int64_t so) { ds[so] = factor_grad(oo, ps[so]); });
  });
  return g;
}

Tensor gather_backward(const Tensor& dy, const Shape& in, int64_t dim, const Tensor& index) {
  return scatter_add(zeros(in, dy.dtype()), dim, index, dy);
}

Tensor index_select_backward(const Tensor& dy, const Shape& in, int64_t dim, const Tensor& index) {
  return index_add(zeros(in, dy.dtype()), dim, index, dy);
}

Tensor one_hot(const Tensor& ids, int64_t num_classes, DType dtype) {
  check_index_tensor(ids, "one_hot");
  MG_CHECK(num_classes > 0, ValueError, "one_hot: num_classes must be positive, got {}", num_classes);
  check_range(ids, num_classes, ids.dim(), "one_hot");
  Shape shape = ids.shape();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, dtype);
  const Tensor c = ids.contiguous();
  const int64_t* p = c.data<int64_t>();
  visit_all(dtype, "one_hot", [&]<class T>() {
    T* o = out.data<T>();
    for (int64_t i = 0; i < c.numel(); ++i) o[i * num_classes + p[i]] = static_cast<T>(1);
  });
  return out;
}

std::optional<int64_t> padding_row(std::optional<int64_t> idx, int64_t n, std::string_view op) {
  if (!idx) return idx;
  MG_CHECK(*idx >= -n && *idx < n, IndexError,
           "{}: padding_idx {} is out of range for {} embeddings (expected {} to {})", op, *idx, n, -n, n - 1);
  return *idx < 0 ? *idx + n : *idx;
}

// y[..., :] = W[ids[...], :]       ids: (...) int64   W: (V, D)   y: (..., D)
Tensor embedding(const Tensor& ids, const Tensor& weight) {
  MG_CHECK(weight.defined() && weight.dim() == 2, ShapeError,
           "embedding: weight must be 2-D (num_embeddings, embedding_dim), got {}",
           weight.defined() ? shape_str(weight.shape()) : "undefined");
  check_index_tensor(ids, "embedding");
  const int64_t V = weight.size(0), D = weight.size(1);
  const Tensor flat = ids.reshape({-1}).contiguous();
  const int64_t* p = flat.data<int64_t>();
  for (int64_t i = 0; i < flat.numel(); ++i)
    MG_CHECK(p[i] >= 0 && p[i] < V, IndexError,
             "embedding: id {} at position {} is out of range for {} embeddings (expected 0 to {})", p[i], i, V, V - 1);
  Shape out_shape = ids.shape();
  out_shape.push_back(D);
  return index_select(weight, 0, flat).reshape(out_shape);
}

// dW (V, D) = zeros, with each row of dy (..., D) added into row ids[...]; row padding_idx zero
Tensor embedding_backward(const Tensor& dy, const Tensor& ids, int64_t num_embeddings,
                          std::optional<int64_t> padding_idx) {
  check_index_tensor(ids, "embedding_backward");
  MG_CHECK(num_embeddings >= 0, ValueError, "embedding_backward: num_embeddings must be >= 0, got {}", num_embeddings);
  MG_CHECK(dy.defined() && dy.dim() == ids.dim() + 1 && Shape(dy.shape().begin(), dy.shape().end() - 1) == ids.shape(),
           ShapeError, "embedding_backward: dy {} should be ids' shape {} plus the embedding dim",
           dy.defined() ? shape_str(dy.shape()) : "undefined", shape_str(ids.shape()));
  MG_CHECK(is_floating(dy.dtype()), DTypeError, "embedding_backward: dy must be floating, got {}",
           dtype_name(dy.dtype()));
  check_range(ids, num_embeddings, 0, "embedding_backward");
  const int64_t D = dy.size(-1);
  Tensor dw = index_add(zeros({num_embeddings, D}, dy.dtype()), 0, ids.reshape({-1}), dy.reshape({ids.numel(), D}));
  if (const auto row = padding_row(padding_idx, num_embeddings, "embedding_backward")) dw.narrow(0, *row, 1).fill_(0);
  return dw;
}

}  // namespace mg
