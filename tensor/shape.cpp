#include "tensor/shape.h"

#include "tensor/error.h"

namespace mg {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t checked_numel(const Shape& shape, std::string_view op) {
  int64_t n = 1;
  for (int64_t s : shape) {
    MG_CHECK(s >= 0, ValueError, "{}: negative size in shape {}", op, shape_str(shape));
    MG_CHECK(s == 0 || n <= (int64_t{1} << 62) / s, ValueError, "{}: shape {} has too many elements to allocate", op,
             shape_str(shape));
    n *= s;
  }
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc *= shape[i] > 0 ? shape[i] : 1;
  }
  return st;
}

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) s += ",";  // like a Python 1-tuple: (5,)
  return s + ")";
}

int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op) {
  const int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  MG_CHECK(dim >= lo && dim <= hi, IndexError,
           "{}: dimension {} is out of range for a tensor with {} dims (expected {} to {})", op, dim,
           ndim, lo, hi);
  return dim < 0 ? dim + (ndim == 0 ? 1 : ndim) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    MG_CHECK(da == db || da == 1 || db == 1, ShapeError,
             "{}: shapes {} and {} cannot be broadcast together (dim {}: {} vs {})", op,
             shape_str(a), shape_str(b), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Strides broadcast_strides(const Shape& shape, const Strides& strides, const Shape& target) {
  Strides out(target.size(), 0);
  const size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    out[lead + i] = (shape[i] == 1 && target[lead + i] != 1) ? 0 : strides[i];
  return out;
}

}  // namespace mg
