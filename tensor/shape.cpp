#include "minigrad/tensor/shape.h"

#include <algorithm>

#include "minigrad/tensor/error.h"

namespace mg {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t checked_numel(const Shape& shape, std::string_view op, int64_t itemsize) {
  for (int64_t s : shape) MG_CHECK(s >= 0, ValueError, "{}: negative size in shape {}", op, shape_str(shape));
  // With a 0 the tensor is empty, but its other sizes must still multiply within 64 bits: views
  // and kernels take products of sub-shapes (flatten of (0, 2^40, 2^40) once gave (0, 0)).
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    int64_t nonzero = 1;
    for (int64_t s : shape)
      MG_CHECK(s == 0 || !__builtin_mul_overflow(nonzero, s, &nonzero), ValueError,
               "{}: the sizes of shape {} multiply past 64 bits", op, shape_str(shape));
    return 0;
  }
  int64_t n = 1, bytes = 0;
  bool overflow = false;
  for (int64_t s : shape) overflow = overflow || __builtin_mul_overflow(n, s, &n);
  overflow = overflow || __builtin_mul_overflow(n, itemsize, &bytes) || bytes > (int64_t{1} << 62);
  MG_CHECK(!overflow, ValueError, "{}: shape {} has too many elements to allocate (more than 2^62 bytes)", op,
           shape_str(shape));
  return n;
}

int64_t checked_mul(int64_t a, int64_t b, std::string_view op) {
  int64_t r;
  MG_CHECK(!__builtin_mul_overflow(a, b, &r), ValueError, "{}: {} * {} does not fit in 64 bits", op, a, b);
  return r;
}

int64_t checked_add(int64_t a, int64_t b, std::string_view op) {
  int64_t r;
  MG_CHECK(!__builtin_add_overflow(a, b, &r), ValueError, "{}: {} + {} does not fit in 64 bits", op, a, b);
  return r;
}

Strides contiguous_strides(const Shape& shape) {
  Strides st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    // A tensor with a zero-size dim has no elements, and its strides are never used: past 64
    // bits (a (0, 2^40, 2^40, 2^40) shape) they stop growing instead of overflowing.
    if (shape[i] > 1 && __builtin_mul_overflow(acc, shape[i], &acc)) acc = st[i];
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
           "{}: dimension {} is out of range for a tensor with {} dims (expected {} to {})", op, dim, ndim, lo, hi);
  return dim < 0 ? dim + (ndim == 0 ? 1 : ndim) : dim;
}

int64_t checked_dim(int64_t dim, int64_t ndim, std::string_view op) {
  MG_CHECK(ndim > 0, IndexError, "{}: dimension {} was given for a 0-dim tensor, which has no dimensions", op, dim);
  return wrap_dim(dim, ndim, op);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    MG_CHECK(da == db || da == 1 || db == 1, ShapeError,
             "{}: shapes {} and {} cannot be broadcast together (dim {}: {} vs {})", op, shape_str(a), shape_str(b), i,
             da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Strides broadcast_strides(const Shape& shape, const Strides& strides, const Shape& target) {
  Strides out(target.size(), 0);
  const size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) out[lead + i] = (shape[i] == 1 && target[lead + i] != 1) ? 0 : strides[i];
  return out;
}

}  // namespace mg
