// Indexing by tensors: x[i0, i1, ...] with int64 index tensors and Bool masks (index_get,
// index_put, as PyTorch's advanced indexing), and masked_select. Every index is range-checked
// before anything is read or written, as in tensor/ops/index.cpp.
#include <cstring>

#include "minigrad/tensor/loops.h"
#include "minigrad/tensor/ops/index.h"

namespace mg {

namespace {
// Advanced indexing x[i0, i1, ...] with index tensors: each int64 index (negative counts from the
// end) or Bool mask (its true positions, covering as many dims as it has) picks along the next
// dims; the int64 ones broadcast together to `shape`. Positions of shape, then x's untouched dims.
struct Advanced {
  std::vector<Tensor> idx;  // one int64 tensor per indexed dim, broadcast to `shape`, in [0, size), contiguous
  Shape shape;              // the broadcast index shape
  int64_t dims = 0;         // how many leading dims of x are indexed
  Shape rest;               // x's dims after them
  Shape out_shape() const {
    Shape s = shape;
    s.insert(s.end(), rest.begin(), rest.end());
    return s;
  }
};

Advanced advanced_index(const Shape& x, const std::vector<Tensor>& indices, std::string_view op) {
  MG_CHECK(!indices.empty(), ValueError, "{}: no index tensors", op);
  Advanced a;
  std::vector<Tensor> raw;
  for (size_t k = 0; k < indices.size(); ++k) {
    const Tensor& t = indices[k];
    MG_CHECK(t.defined(), StateError, "{}: index {} is undefined", op, k);
    if (t.dtype() == DType::Bool) {
      MG_CHECK(a.dims + t.dim() <= static_cast<int64_t>(x.size()), IndexError,
               "{}: too many indices for a tensor of shape {} (mask {} at dim {})", op, shape_str(x),
               shape_str(t.shape()), a.dims);
      const Shape covered(x.begin() + a.dims, x.begin() + a.dims + t.dim());
      MG_CHECK(t.shape() == covered, IndexError, "{}: mask {} at dim {} does not match the indexed dims {} of shape {}",
               op, shape_str(t.shape()), a.dims, shape_str(covered), shape_str(x));
      // the mask's true positions, as one int64 index per dim it covers
      const Tensor flat = masked_select_index(t.shape(), t, op).contiguous();
      const int64_t* pf = flat.data<int64_t>();
      int64_t stride = numel_of(t.shape());
      for (int64_t d = 0; d < t.dim(); ++d) {
        stride /= t.shape()[d];
        Tensor coord = empty({flat.numel()}, DType::Int64);
        int64_t* pc = coord.data<int64_t>();
        for (int64_t e = 0; e < flat.numel(); ++e) pc[e] = (pf[e] / stride) % t.shape()[d];
        raw.push_back(coord);
      }
      a.dims += t.dim();
      continue;
    }
    MG_CHECK(t.dtype() == DType::Int64, DTypeError, "{}: index {} must be int64 or bool, got {}", op, k,
             dtype_name(t.dtype()));
    MG_CHECK(a.dims < static_cast<int64_t>(x.size()), IndexError, "{}: too many indices ({}) for a tensor of shape {}",
             op, indices.size(), shape_str(x));
    raw.push_back(t);
    ++a.dims;
  }
  a.shape = raw[0].shape();
  for (const Tensor& t : raw) a.shape = broadcast_shapes(a.shape, t.shape(), op);
  for (size_t d = 0; d < raw.size(); ++d) {
    const int64_t n = x[d];
    Tensor t = raw[d].expand(a.shape).contiguous();
    int64_t* p = t.data<int64_t>();
    for (int64_t e = 0; e < t.numel(); ++e) {
      MG_CHECK(p[e] >= -n && p[e] < n, IndexError,
               "{}: index {} is out of range for dim {} of size {} (expected {} to {})", op, p[e], d, n, -n, n - 1);
      if (p[e] < 0) p[e] += n;
    }
    a.idx.push_back(t);
  }
  a.rest = Shape(x.begin() + a.dims, x.end());
  checked_numel(a.out_shape(), op);
  return a;
}

// For each position e of the index shape: f(e, offset of x[i0[e], i1[e], ...] in a contiguous x).
template <class F>
void for_each_indexed(const Advanced& a, const Shape& x, F&& f) {
  const int64_t inner = numel_of(a.rest);
  std::vector<int64_t> stride(a.dims);
  int64_t s = inner;
  for (int64_t d = a.dims - 1; d >= 0; --d) stride[d] = s, s *= x[d];
  const int64_t m = numel_of(a.shape);
  for (int64_t e = 0; e < m; ++e) {
    int64_t off = 0;
    for (int64_t d = 0; d < a.dims; ++d) off += a.idx[d].data<int64_t>()[e] * stride[d];
    f(e, off);
  }
}
}  // namespace

Tensor index_get(const Tensor& x0, const std::vector<Tensor>& indices) {
  MG_CHECK(x0.defined(), StateError, "index: the input is undefined");
  const Advanced a = advanced_index(x0.shape(), indices, "index");
  const Tensor x = x0.contiguous();
  Tensor out = empty(a.out_shape(), x.dtype());
  if (out.numel() == 0) return out;
  const int64_t bytes = numel_of(a.rest) * static_cast<int64_t>(itemsize(x.dtype()));
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  const int64_t item = static_cast<int64_t>(itemsize(x.dtype()));
  for_each_indexed(a, x.shape(),
                   [&](int64_t e, int64_t off) { std::memcpy(dst + e * bytes, src + off * item, bytes); });
  return out;
}

Tensor index_put(const Tensor& base, const std::vector<Tensor>& indices, const Tensor& values0, bool accumulate) {
  MG_CHECK(base.defined() && values0.defined(), StateError, "index_put: an operand is undefined");
  MG_CHECK(base.dtype() == values0.dtype(), DTypeError, "index_put: values are {} but the tensor is {}",
           dtype_name(values0.dtype()), dtype_name(base.dtype()));
  const Advanced a = advanced_index(base.shape(), indices, "index_put");
  const Shape target = a.out_shape();
  MG_CHECK(broadcast_shapes(values0.shape(), target, "index_put") == target, ShapeError,
           "index_put: values of shape {} do not broadcast to the indexed shape {}", shape_str(values0.shape()),
           shape_str(target));
  Tensor out = base.clone();
  if (numel_of(target) == 0) return out;
  const Tensor values = values0.expand(target).contiguous();
  const int64_t inner = numel_of(a.rest);
  visit_all(base.dtype(), "index_put", [&]<class T>() {
    T* o = out.data<T>();
    const T* v = values.data<T>();
    // serial, in index order: repeated positions add up in a fixed order (accumulate), or the last one wins
    for_each_indexed(a, base.shape(), [&](int64_t e, int64_t off) {
      for (int64_t j = 0; j < inner; ++j) {
        if constexpr (std::is_same_v<T, bool>) {
          o[off + j] = accumulate ? (o[off + j] || v[e * inner + j]) : v[e * inner + j];
        } else {
          o[off + j] = accumulate ? o[off + j] + v[e * inner + j] : v[e * inner + j];
        }
      }
    });
  });
  return out;
}

// ---- masked_select ----

Tensor masked_select_index(const Shape& shape, const Tensor& mask, std::string_view op) {
  MG_CHECK(mask.defined(), StateError, "{}: the mask is undefined", op);
  MG_CHECK(mask.dtype() == DType::Bool, DTypeError, "{}: the mask must be Bool, got {}", op, dtype_name(mask.dtype()));
  const Tensor m = mask.expand(shape).contiguous();
  const bool* pm = m.data<bool>();
  std::vector<int64_t> index;
  for (int64_t i = 0; i < m.numel(); ++i)
    if (pm[i]) index.push_back(i);
  return from_vector(index, {static_cast<int64_t>(index.size())});
}

// y = the elements of x (both broadcast to one shape) where mask is true, row-major
Tensor masked_select(const Tensor& x, const Tensor& mask) {
  MG_CHECK(x.defined(), StateError, "masked_select: the tensor is undefined");
  MG_CHECK(mask.defined(), StateError, "masked_select: the mask is undefined");
  const Shape shape = broadcast_shapes(x.shape(), mask.shape(), "masked_select");
  return index_select(x.expand(shape).reshape({-1}), 0, masked_select_index(shape, mask));
}

}  // namespace mg
