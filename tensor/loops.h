#pragma once
// The strided loop under every elementwise kernel.
//
// K operands share one logical shape (after broadcasting); each has its own strides, 0 along a
// broadcast dim. for_each_run walks that shape and calls body(offsets, n, steps) once per run of
// elements along the innermost dim: element j of the run is at offsets[k] + j*steps[k] of operand
// k. Before walking, dims that are laid out back to back in every operand are merged, so a
// contiguous tensor is a single run and the body becomes a plain vectorisable loop; a run longer
// than kGrain is handed out in pieces, so that the threads share it.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "minigrad/tensor/parallel.h"
#include "minigrad/tensor/tensor.h"

namespace mg::detail {

template <size_t K>
struct Layout {
  Shape shape;
  std::array<Strides, K> strides;
};

/// Drop size-1 dims and merge dims i, i+1 wherever every operand steps over dim i+1 exactly once
/// per step of dim i.
template <size_t K>
Layout<K> coalesce(const Shape& shape, const std::array<Strides, K>& strides) {
  Layout<K> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!out.shape.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < K; ++k) mergeable = mergeable && out.strides[k].back() == strides[k][d] * shape[d];
      if (mergeable) {
        out.shape.back() *= shape[d];
        for (size_t k = 0; k < K; ++k) out.strides[k].back() = strides[k][d];
        continue;
      }
    }
    out.shape.push_back(shape[d]);
    for (size_t k = 0; k < K; ++k) out.strides[k].push_back(strides[k][d]);
  }
  return out;
}

template <size_t K, class Body>
void for_each_run(const Shape& shape, const std::array<Strides, K>& strides, Body&& body) {
  if (numel_of(shape) == 0) return;
  const Layout<K> L = coalesce<K>(shape, strides);
  const int64_t nd = static_cast<int64_t>(L.shape.size());
  if (nd == 0) {  // a single element
    body(std::array<int64_t, K>{}, int64_t{1}, std::array<int64_t, K>{});
    return;
  }
  const int64_t inner = L.shape[nd - 1];
  std::array<int64_t, K> steps;
  for (size_t k = 0; k < K; ++k) steps[k] = L.strides[k][nd - 1];
  const int64_t rows = numel_of(L.shape) / inner;
  if (inner > kGrain) {
    // Runs longer than kGrain (a contiguous tensor is one run) are cut into equal pieces of at most
    // kGrain elements, a multiple of 64 (of every vector width) but the last, which the threads
    // share: every element is still computed by the same expression from the same inputs, so the
    // bits do not depend on the cut.
    const int64_t want = (inner + kGrain - 1) / kGrain;                // pieces of at most kGrain
    const int64_t piece = ((inner + want - 1) / want + 63) / 64 * 64;  // as equal as 64s allow
    const int64_t pieces = (inner + piece - 1) / piece;
    parallel_for(0, rows * pieces, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        int64_t r = c / pieces;
        const int64_t start = (c % pieces) * piece;
        std::array<int64_t, K> off{};
        for (int64_t d = nd - 2; d >= 0; --d) {
          const int64_t i = r % L.shape[d];
          r /= L.shape[d];
          for (size_t k = 0; k < K; ++k) off[k] += i * L.strides[k][d];
        }
        for (size_t k = 0; k < K; ++k) off[k] += start * steps[k];
        body(off, std::min(piece, inner - start), steps);
      }
    });
    return;
  }
  parallel_for(0, rows, grain_for(inner), [&](int64_t r0, int64_t r1) {
    // Multi-index of row r0 over the outer dims, and each operand's offset there.
    std::vector<int64_t> idx(nd - 1);
    std::array<int64_t, K> off{};
    int64_t r = r0;
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = r % L.shape[d];
      r /= L.shape[d];
      for (size_t k = 0; k < K; ++k) off[k] += idx[d] * L.strides[k][d];
    }
    for (int64_t row = r0; row < r1; ++row) {
      body(off, inner, steps);
      for (int64_t d = nd - 2; d >= 0; --d) {  // odometer step with carry
        for (size_t k = 0; k < K; ++k) off[k] += L.strides[k][d];
        if (++idx[d] < L.shape[d]) break;
        for (size_t k = 0; k < K; ++k) off[k] -= L.strides[k][d] * L.shape[d];
        idx[d] = 0;
      }
    }
  });
}

/// out[i] = f(x[i]) for a new contiguous `out` of element type R.
template <class R, class T, class F>
Tensor map_unary(const Tensor& x, F f) {
  Tensor out = empty(x.shape(), dtype_of<R>());
  R* o = out.data<R>();
  const T* a = x.data<T>();
  for_each_run<2>(x.shape(), {out.strides(), x.strides()},
                  [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                    R* po = o + off[0];
                    const T* pa = a + off[1];
                    if (st[1] == 1) {
                      for (int64_t j = 0; j < n; ++j) po[j] = f(pa[j]);
                    } else {
                      for (int64_t j = 0; j < n; ++j) po[j] = f(pa[j * st[1]]);
                    }
                  });
  return out;
}

/// out = f(a, b) elementwise with broadcasting, into a new contiguous tensor of type R; x holds
/// elements of type T, y of type U (T unless said).
template <class R, class T, class U = T, class F>
Tensor map_binary(const Tensor& x, const Tensor& y, F f, std::string_view op) {
  const Shape shape = broadcast_shapes(x.shape(), y.shape(), op);
  Tensor out = empty(shape, dtype_of<R>());
  R* o = out.data<R>();
  const T* a = x.data<T>();
  const U* b = y.data<U>();
  for_each_run<3>(shape,
                  {out.strides(), broadcast_strides(x.shape(), x.strides(), shape),
                   broadcast_strides(y.shape(), y.strides(), shape)},
                  [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
                    R* po = o + off[0];
                    const T* pa = a + off[1];
                    const U* pb = b + off[2];
                    if (st[1] == 1 && st[2] == 1) {
                      for (int64_t j = 0; j < n; ++j) po[j] = f(pa[j], pb[j]);
                    } else if (st[1] == 1 && st[2] == 0) {
                      const U vb = *pb;
                      for (int64_t j = 0; j < n; ++j) po[j] = f(pa[j], vb);
                    } else {
                      for (int64_t j = 0; j < n; ++j) po[j] = f(pa[j * st[1]], pb[j * st[2]]);
                    }
                  });
  return out;
}

/// out = f(a, b, c) elementwise with broadcasting of all three (types A, B, C), new tensor of R.
template <class R, class A, class B, class C, class F>
Tensor map_ternary(const Tensor& x, const Tensor& y, const Tensor& z, F f, std::string_view op) {
  const Shape shape = broadcast_shapes(broadcast_shapes(x.shape(), y.shape(), op), z.shape(), op);
  Tensor out = empty(shape, dtype_of<R>());
  R* o = out.data<R>();
  const A* a = x.data<A>();
  const B* b = y.data<B>();
  const C* c = z.data<C>();
  for_each_run<4>(shape,
                  {out.strides(), broadcast_strides(x.shape(), x.strides(), shape),
                   broadcast_strides(y.shape(), y.strides(), shape), broadcast_strides(z.shape(), z.strides(), shape)},
                  [&](const std::array<int64_t, 4>& off, int64_t n, const std::array<int64_t, 4>& st) {
                    for (int64_t j = 0; j < n; ++j)
                      o[off[0] + j] = f(a[off[1] + j * st[1]], b[off[2] + j * st[2]], c[off[3] + j * st[3]]);
                  });
  return out;
}

/// x's elements along `dim` as the rows of a contiguous (M, n) tensor, and the way back: a result
/// computed row by row goes back to x's layout with from_rows. (cumsum, prod, sort, topk.)
struct Rows {
  Tensor rows;                // (M, n) contiguous
  Shape permuted;             // x's shape with `dim` moved last
  std::vector<int64_t> back;  // the permutation that undoes that move
  Tensor from_rows(const Tensor& r) const { return r.reshape(permuted).permute(back).contiguous(); }
};
inline Rows rows_along(const Tensor& x, int64_t dim) {
  std::vector<int64_t> perm, back(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) perm.push_back(d);
  perm.push_back(dim);
  for (int64_t i = 0; i < x.dim(); ++i) back[perm[i]] = i;
  const Tensor moved = x.permute(perm).contiguous();
  int64_t m = 1;  // the other dims' product, which a zero-size dim does not hide
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) m *= x.size(d);
  return {moved.reshape({m, x.size(dim)}), moved.shape(), back};
}
/// f(x) elementwise for a float32, float64 or bfloat16 x (a DTypeError naming `op` otherwise); f is
/// generic: [](auto v) { return ...; }. A bfloat16 x is computed as PyTorch computes it: each
/// element widened to float32 (exact), f in float32, the result rounded to bfloat16 once.
template <class F>
Tensor unary_float(const Tensor& x, std::string_view op, F f) {
  MG_CHECK(x.defined(), StateError, "{}: the tensor is undefined", op);
  if (x.dtype() == DType::BFloat16) return unary_float(x.to(DType::Float32), op, f).to(DType::BFloat16);
  return visit_float(x.dtype(), op, [&]<class T>() { return map_unary<T, T>(x, [&](T v) { return f(v); }); });
}

/// A StateError if a or b is undefined, a DTypeError naming `op` unless their dtypes match.
inline void check_same_dtype(const Tensor& a, const Tensor& b, std::string_view op) {
  MG_CHECK(a.defined() && b.defined(), StateError, "{}: an operand is undefined", op);
  MG_CHECK(a.dtype() == b.dtype(), DTypeError, "{}: dtype mismatch, {} and {}", op, dtype_name(a.dtype()),
           dtype_name(b.dtype()));
}

/// The dtype of an elementwise op's result on a and b, by PyTorch's promotion for the one pair of
/// dtypes minigrad mixes, float32 and bfloat16: the dtype of the operand with dims, when the other
/// has none (a 0-dim float32 beside a bfloat16 tensor acts as a number: bfloat16), else float32.
/// Equal dtypes give themselves; any other mix is a DTypeError naming `op` (minigrad does not
/// promote float64 or int64: convert with .to() first).
inline DType result_dtype(const Tensor& a, const Tensor& b, std::string_view op) {
  MG_CHECK(a.defined() && b.defined(), StateError, "{}: an operand is undefined", op);
  if (a.dtype() == b.dtype()) return a.dtype();
  const auto is_pair = [](DType x, DType y) { return x == DType::Float32 && y == DType::BFloat16; };
  MG_CHECK(is_pair(a.dtype(), b.dtype()) || is_pair(b.dtype(), a.dtype()), DTypeError,
           "{}: dtype mismatch, {} and {} (only float32 and bfloat16 mix, as PyTorch promotes them; convert "
           "with .to() first)",
           op, dtype_name(a.dtype()), dtype_name(b.dtype()));
  if ((a.dim() == 0) != (b.dim() == 0)) return a.dim() == 0 ? b.dtype() : a.dtype();
  return DType::Float32;
}

// The bfloat16 paths of these kernels widen their operands (widened(), tensor.h), run the float32
// kernel and round the result once: the same bits as doing it element by element, and one compiled
// loop per op instead of one per mix of dtypes.

/// out = f(dy, s) elementwise, for a saved tensor s (x or y of the forward) of dy's shape: the
/// shape of every unary op's backward kernel. A bfloat16 s (or dy) is computed in float32, the
/// result float32 when dy is (the gradient of a bfloat16 value is float32: autograd/autocast.h),
/// bfloat16 when both are.
template <class F>
Tensor backward_map(const Tensor& dy, const Tensor& s, std::string_view op, F f) {
  const DType out = result_dtype(dy, s, op);
  MG_CHECK(dy.shape() == s.shape(), ShapeError, "{}: dy has shape {} but the saved tensor {}; they must be equal", op,
           shape_str(dy.shape()), shape_str(s.shape()));
  if (dy.dtype() == DType::BFloat16 || s.dtype() == DType::BFloat16) {
    const Tensor r = backward_map(widened(dy), widened(s), op, f);
    return out == DType::BFloat16 ? r.to(out) : r;
  }
  return visit_float(dy.dtype(), op, [&]<class T>() {
    return map_binary<T, T>(
        dy, s, [&](T g, T v) { return f(g, v); }, op);
  });
}

}  // namespace mg::detail
