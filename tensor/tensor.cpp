#include "minigrad/tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "minigrad/tensor/loops.h"
#include "minigrad/tensor/parallel.h"

namespace mg {

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Strides strides, int64_t offset)
    : storage_(std::move(storage)),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset) {
  if (!storage_) return;
  MG_CHECK(shape_.size() == strides_.size(), ShapeError, "Tensor: shape {} and strides {} differ in length",
           shape_str(shape_), shape_str(strides_));
  int64_t lo = offset_, hi = offset_, nonzero = 1;
  for (int64_t s : shape_)  // an empty tensor's other sizes must multiply within 64 bits too (shape.cpp)
    MG_CHECK(s <= 0 || !__builtin_mul_overflow(nonzero, s, &nonzero), ValueError,
             "Tensor: the sizes of shape {} multiply past 64 bits", shape_str(shape_));
  for (size_t d = 0; d < shape_.size(); ++d) {
    MG_CHECK(shape_[d] >= 0, ShapeError, "Tensor: negative size in shape {}", shape_str(shape_));
    if (shape_[d] == 0) return;  // no elements: nothing to reach
    const int64_t reach = checked_mul(shape_[d] - 1, strides_[d], "Tensor");
    int64_t& end = reach < 0 ? lo : hi;
    end = checked_add(end, reach, "Tensor");  // an offset near 2^63 must not wrap past the capacity check
  }
  const int64_t capacity = static_cast<int64_t>(storage_->nbytes() / itemsize(dtype_));
  MG_CHECK(lo >= 0 && hi < capacity, IndexError,
           "Tensor: a view with shape {}, strides {} and offset {} reaches elements [{}, {}] of a storage of {}",
           shape_str(shape_), shape_str(strides_), offset_, lo, hi, capacity);
}

int64_t Tensor::size(int64_t d) const { return shape_[checked_dim(d, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no elements: any strides describe them, as in PyTorch
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

void Tensor::check_dtype(DType expected, std::string_view op) const {
  MG_CHECK(defined(), StateError, "{}: the tensor is undefined", op);
  MG_CHECK(dtype_ == expected, DTypeError, "{}: expected a {} tensor, got {}", op, dtype_name(expected),
           dtype_name(dtype_));
}

double Tensor::at(const std::vector<int64_t>& index) const {
  MG_CHECK(defined(), StateError, "at: the tensor is undefined");
  MG_CHECK(static_cast<int64_t>(index.size()) == dim(), IndexError, "at: {} indices given for a tensor with {} dims",
           index.size(), dim());
  int64_t off = offset_;
  for (int64_t d = 0; d < dim(); ++d) {
    MG_CHECK(index[d] >= 0 && index[d] < shape_[d], IndexError, "at: index {} is out of range for dim {} of size {}",
             index[d], d, shape_[d]);
    off += index[d] * strides_[d];
  }
  return visit_stored(dtype_,
                      [&]<class T>() { return static_cast<double>(static_cast<const T*>(storage_->data())[off]); });
}

double Tensor::item() const {
  MG_CHECK(defined(), StateError, "item: the tensor is undefined");
  MG_CHECK(numel() == 1, ValueError, "item: expected a tensor with one element, got shape {}", shape_str(shape_));
  return at(std::vector<int64_t>(dim(), 0));
}

template <class T>
T Tensor::item() const {
  MG_CHECK(defined(), StateError, "item: the tensor is undefined");
  MG_CHECK(numel() == 1, ValueError, "item: expected a tensor with one element, got shape {}", shape_str(shape_));
  T out{};
  visit_stored(dtype_, [&]<class S>() {
    const S v = *data<S>();
    if constexpr (std::is_same_v<S, bool>) {
      out = static_cast<T>(v);
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if constexpr (std::is_floating_point_v<S> || std::is_same_v<S, bfloat16>) {
        const double d = static_cast<double>(v);
        // the range test in double: 2^63 itself is out of int64's range
        MG_CHECK(std::isfinite(d) && d >= static_cast<double>(std::numeric_limits<T>::min()) &&
                     d < -static_cast<double>(std::numeric_limits<T>::min()),
                 ValueError, "item: {} does not fit in a {}-bit integer", d, 8 * sizeof(T));
        out = static_cast<T>(d);
      } else {
        MG_CHECK(std::in_range<T>(v), ValueError, "item: {} does not fit in a {}-bit integer", v, 8 * sizeof(T));
        out = static_cast<T>(v);
      }
    } else if constexpr (std::is_same_v<S, bfloat16>) {
      out = static_cast<T>(static_cast<float>(v));
    } else {
      out = static_cast<T>(v);
    }
  });
  return out;
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template int32_t Tensor::item<int32_t>() const;
template bool Tensor::item<bool>() const;

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = contiguous();
  std::vector<T> out(numel());
  visit_stored(dtype_, [&]<class S>() {
    const S* p = c.data<S>();
    for (int64_t i = 0; i < numel(); ++i) out[i] = static_cast<T>(p[i]);
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;

// ---------------------------------------------------------------- views

namespace {
// Resolve a -1 in `shape` so that it has `numel` elements.
Shape infer_shape(Shape shape, int64_t numel, const Shape& from, std::string_view op) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      MG_CHECK(infer < 0, ShapeError, "{}: only one dimension can be -1, got {}", op, shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      MG_CHECK(shape[i] >= 0, ShapeError, "{}: invalid size {} in shape {}", op, shape[i], shape_str(shape));
      MG_CHECK(!__builtin_mul_overflow(known, shape[i], &known), ShapeError,
               "{}: shape {} is invalid for input of size {} (shape {})", op, shape_str(shape), numel, shape_str(from));
    }
  }
  if (infer >= 0) {
    MG_CHECK(known != 0 && numel % known == 0, ShapeError, "{}: shape {} is invalid for input of size {} (shape {})",
             op, shape_str(shape), numel, shape_str(from));
    shape[infer] = numel / known;
  }
  MG_CHECK(numel_of(shape) == numel, ShapeError, "{}: shape {} is invalid for input of size {} (shape {})", op,
           shape_str(shape), numel, shape_str(from));
  return shape;
}

// Strides for viewing (shape, strides) as `target` without copying, if the layout allows it.
// Walk the old dims from the innermost, cutting them into chunks that are contiguous within
// themselves; each chunk must be covered by a run of new dims with the same element count, which
// then get strides inside that chunk.
bool view_strides(const Shape& shape, const Strides& strides, const Shape& target, Strides& out) {
  out.assign(target.size(), 0);
  if (shape.empty() || numel_of(shape) == 0) {
    out = contiguous_strides(target);
    return true;
  }
  int64_t t = static_cast<int64_t>(target.size()) - 1;
  int64_t base = strides.back(), chunk = 1, covered = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    chunk *= shape[d];
    const bool chunk_ends = d == 0 || (shape[d - 1] != 1 && strides[d - 1] != chunk * base);
    if (!chunk_ends) continue;
    while (t >= 0 && (covered < chunk || target[t] == 1)) {
      out[t] = covered * base;
      covered *= target[t];
      --t;
    }
    if (covered != chunk) return false;
    if (d > 0) base = strides[d - 1], chunk = 1, covered = 1;
  }
  return t == -1;
}
}  // namespace

Tensor Tensor::view(Shape shape) const {
  shape = infer_shape(std::move(shape), numel(), shape_, "view");
  Strides st;
  MG_CHECK(view_strides(shape_, strides_, shape, st), ShapeError,
           "view: cannot view shape {} with strides {} as {}; the tensor is not contiguous enough "
           "(hint: call .reshape() or .contiguous() first)",
           shape_str(shape_), shape_str(strides_), shape_str(shape));
  return Tensor(storage_, dtype_, shape, st, offset_);
}

Tensor Tensor::reshape(Shape shape) const {
  shape = infer_shape(std::move(shape), numel(), shape_, "reshape");
  Strides st;
  if (view_strides(shape_, strides_, shape, st)) return Tensor(storage_, dtype_, shape, st, offset_);
  return contiguous().view(shape);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  if (dim() == 0) return *this;  // a scalar transposed (dims 0 or -1, as in PyTorch) is itself
  Shape sh = shape_;
  Strides st = strides_;
  std::swap(sh[d0], sh[d1]);
  std::swap(st[d0], st[d1]);
  return Tensor(storage_, dtype_, sh, st, offset_);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  MG_CHECK(static_cast<int64_t>(dims.size()) == dim(), ShapeError, "permute: got {} dims for a tensor with shape {}",
           dims.size(), shape_str(shape_));
  Shape sh(dim());
  Strides st(dim());
  std::vector<bool> seen(dim(), false);
  for (int64_t i = 0; i < dim(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    MG_CHECK(!seen[d], ShapeError, "permute: dim {} appears twice in {}", d, shape_str(dims));
    seen[d] = true;
    sh[i] = shape_[d];
    st[i] = strides_[d];
  }
  return Tensor(storage_, dtype_, sh, st, offset_);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = checked_dim(d, dim(), "narrow");
  MG_CHECK(start >= 0 && length >= 0 && start <= shape_[d] && length <= shape_[d] - start, IndexError,
           "narrow: start {} and length {} are out of bounds for dim {} of size {} (shape {})", start, length, d,
           shape_[d], shape_str(shape_));
  Shape sh = shape_;
  sh[d] = length;
  return Tensor(storage_, dtype_, sh, strides_, offset_ + start * strides_[d]);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = checked_dim(d, dim(), "slice");
  MG_CHECK(step > 0, ValueError, "slice: step must be positive, got {}", step);
  const int64_t n = shape_[d];
  auto clampi = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
  start = clampi(start);
  end = std::max(clampi(end), start);
  Shape sh = shape_;
  Strides st = strides_;
  sh[d] = end > start ? (end - start - 1) / step + 1 : 0;
  // with one element or none the stride is never used (and stride * step may not fit 64 bits)
  st[d] = sh[d] <= 1 ? strides_[d] : checked_mul(strides_[d], step, "slice");
  return Tensor(storage_, dtype_, sh, st, offset_ + start * strides_[d]);
}

// The diagonal's elements are `stride d1 + stride d2` apart: one step along both dims at once.
Tensor Tensor::diagonal(int64_t offset, int64_t d1, int64_t d2) const {
  d1 = checked_dim(d1, dim(), "diagonal");
  d2 = checked_dim(d2, dim(), "diagonal");
  MG_CHECK(d1 != d2, ShapeError, "diagonal: dim1 and dim2 are both dim {} of shape {}; they must differ", d1,
           shape_str(shape_));
  const int64_t n1 = shape_[d1], n2 = shape_[d2];
  // rows and columns the diagonal has left after moving `offset` away from the main one
  const int64_t len =
      offset >= 0 ? (offset >= n2 ? 0 : std::min(n1, n2 - offset)) : (offset <= -n1 ? 0 : std::min(n1 + offset, n2));
  int64_t start = offset_;
  if (len > 0) start += offset >= 0 ? offset * strides_[d2] : -offset * strides_[d1];
  Shape sh;
  Strides st;
  for (int64_t d = 0; d < dim(); ++d)
    if (d != d1 && d != d2) sh.push_back(shape_[d]), st.push_back(strides_[d]);
  sh.push_back(len);
  st.push_back(len > 1 ? checked_add(strides_[d1], strides_[d2], "diagonal") : 1);
  return Tensor(storage_, dtype_, sh, st, start);
}

Tensor Tensor::expand(const Shape& shape0) const {
  MG_CHECK(shape0.size() >= shape_.size(), ShapeError, "expand: cannot expand shape {} to fewer dims {}",
           shape_str(shape_), shape_str(shape0));
  const size_t lead = shape0.size() - shape_.size();
  Shape shape = shape0;  // -1 keeps a dim's size, as in PyTorch
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && i >= lead) shape[i] = shape_[i - lead];
    MG_CHECK(shape[i] >= 0, ShapeError,
             "expand: invalid size {} at dim {} in {} (sizes must be >= 0, or -1 to keep a dim)", shape0[i], i,
             shape_str(shape0));
  }
  for (size_t i = 0; i < shape_.size(); ++i)
    MG_CHECK(shape_[i] == shape[lead + i] || shape_[i] == 1, ShapeError,
             "expand: cannot expand shape {} to {} (dim {}: {} vs {})", shape_str(shape_), shape_str(shape), lead + i,
             shape_[i], shape[lead + i]);
  checked_numel(shape, "expand");  // the view's element count must fit, like any tensor's
  return Tensor(storage_, dtype_, shape, broadcast_strides(shape_, strides_, shape), offset_);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) {  // a scalar flattens to one element, for dims 0 or -1 (as in PyTorch)
    wrap_dim(start_dim, 0, "flatten"), wrap_dim(end_dim, 0, "flatten");
    return reshape({1});
  }
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  MG_CHECK(start_dim <= end_dim, IndexError, "flatten: start_dim {} comes after end_dim {} (shape {})", start_dim,
           end_dim, shape_str(shape_));
  Shape sh(shape_.begin(), shape_.begin() + start_dim);
  sh.push_back(numel_of(Shape(shape_.begin() + start_dim, shape_.begin() + end_dim + 1)));
  sh.insert(sh.end(), shape_.begin() + end_dim + 1, shape_.end());
  return reshape(sh);
}

Tensor Tensor::unflatten(int64_t d, const Shape& sizes) const {
  d = checked_dim(d, dim(), "unflatten");
  MG_CHECK(!sizes.empty(), ShapeError, "unflatten: sizes must not be empty");
  // the sizes must multiply to dim d's size; one -1 stands for whatever makes them do so
  Shape resolved = sizes;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    MG_CHECK(sizes[i] >= -1, ShapeError, "unflatten: sizes {} has a negative size", shape_str(sizes));
    if (sizes[i] == -1) {
      MG_CHECK(infer < 0, ShapeError, "unflatten: sizes {} has more than one -1", shape_str(sizes));
      infer = static_cast<int64_t>(i);
    } else {
      known = checked_mul(known, sizes[i], "unflatten");
    }
  }
  if (infer >= 0 && known != 0 && shape_[d] % known == 0) resolved[infer] = shape_[d] / known;
  MG_CHECK((infer < 0 || resolved[infer] != -1) && numel_of(resolved) == shape_[d], ShapeError,
           "unflatten: sizes {} do not multiply to the size {} of dim {} (shape {})", shape_str(sizes), shape_[d], d,
           shape_str(shape_));
  Shape sh(shape_.begin(), shape_.begin() + d);
  sh.insert(sh.end(), resolved.begin(), resolved.end());
  sh.insert(sh.end(), shape_.begin() + d + 1, shape_.end());
  return reshape(sh);
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0) return *this;      // as in PyTorch: squeezing dim 0 or -1 of a scalar leaves it
  if (shape_[d] != 1) return *this;  // like torch: squeezing a non-1 dim does nothing
  Shape sh = shape_;
  Strides st = strides_;
  sh.erase(sh.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(storage_, dtype_, sh, st, offset_);
}

Tensor Tensor::squeeze() const {
  Shape sh;
  Strides st;
  for (int64_t d = 0; d < dim(); ++d)
    if (shape_[d] != 1) sh.push_back(shape_[d]), st.push_back(strides_[d]);
  return Tensor(storage_, dtype_, sh, st, offset_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  MG_CHECK(d >= -(dim() + 1) && d <= dim(), IndexError,
           "unsqueeze: position {} is out of range for a tensor with {} dims (expected {} to {})", d, dim(),
           -(dim() + 1), dim());
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sh = shape_;
  Strides st = strides_;
  const int64_t stride = d < dim() ? strides_[d] * shape_[d] : 1;
  sh.insert(sh.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return Tensor(storage_, dtype_, sh, st, offset_);
}

// ---------------------------------------------------------------- overlap

bool has_internal_overlap(const Tensor& t) {
  // Non-overlapping when, visiting dims by increasing stride, each stride steps past everything
  // the smaller dims can reach.
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size) of the dims with size > 1
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.shape()[d] == 0) return false;
    if (t.shape()[d] > 1) dims.emplace_back(std::abs(t.strides()[d]), t.shape()[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // the farthest element offset the dims so far can step to
  for (auto [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += stride * (size - 1);
  }
  return false;
}

bool may_overlap(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.storage() != b.storage() || a.numel() == 0 || b.numel() == 0) return false;
  auto range = [](const Tensor& t) {
    int64_t lo = t.offset(), hi = t.offset();
    for (int64_t d = 0; d < t.dim(); ++d) (t.strides()[d] < 0 ? lo : hi) += (t.shape()[d] - 1) * t.strides()[d];
    return std::pair{lo, hi};
  };
  auto [alo, ahi] = range(a);
  auto [blo, bhi] = range(b);
  return alo <= bhi && blo <= ahi;
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  MG_CHECK(defined(), StateError, "clone: the tensor is undefined");
  Tensor out = empty(shape_, dtype_);
  out.copy_(*this);
  return out;
}

Tensor widened(const Tensor& t) { return t.dtype() == DType::BFloat16 ? t.to(DType::Float32) : t; }

Tensor Tensor::to(DType dtype) const {
  MG_CHECK(defined(), StateError, "to: the tensor is undefined");
  if (dtype == dtype_) return *this;
  // Into bfloat16: rounded to nearest even (once, from any source dtype); out of it: exact (tensor/bfloat16.h).
  return visit_stored(dtype_, [&]<class S>() {
    return visit_stored(dtype, [&]<class D>() {
      if constexpr (std::is_same_v<S, float> && std::is_same_v<D, bfloat16>) {
        if (is_contiguous()) {  // the hot case (autocast's operands): one vectorised pass
          Tensor out = empty(shape_, dtype);
          const float* in = data<float>();
          bfloat16* o = out.data<bfloat16>();
          parallel_for(0, numel(), 1 << 16, [&](int64_t i0, int64_t i1) { to_bfloat16(in + i0, o + i0, i1 - i0); });
          return out;
        }
      }
      const auto convert = [](auto v) {
        using V = decltype(v);
        if constexpr (std::is_floating_point_v<V> && std::is_same_v<D, int64_t>) {
          // truncation toward zero, as PyTorch's; NaN, inf and values past int64 have no int64 to become
          MG_CHECK(v == v && v >= V(-0x1p63) && v < V(0x1p63), ValueError, "to: {} does not fit in int64", v);
        }
        return static_cast<D>(v);
      };
      return detail::map_unary<D, S>(*this, [&](S v) {
        if constexpr (std::is_same_v<S, bfloat16>)
          return convert(static_cast<float>(v));  // widening is exact
        else
          return convert(v);
      });
    });
  });
}

const Tensor& Tensor::copy_(const Tensor& src) const {
  MG_CHECK(defined() && src.defined(), StateError, "copy_: the tensor is undefined");
  MG_CHECK(src.dtype() == dtype_, DTypeError, "copy_: dtype mismatch, {} into {}", dtype_name(src.dtype()),
           dtype_name(dtype_));
  const Shape b = broadcast_shapes(shape_, src.shape(), "copy_");
  MG_CHECK(b == shape_, ShapeError, "copy_: source shape {} cannot be broadcast to {}", shape_str(src.shape()),
           shape_str(shape_));
  MG_CHECK(!has_internal_overlap(*this), ValueError,
           "copy_: the destination (shape {}, strides {}) has elements that share memory (an expanded view?); "
           "copy into a tensor of its own, e.g. .contiguous()",
           shape_str(shape_), shape_str(strides_));
  storage_->bump_version();
  // Reading and writing overlapping memory would read values this copy already overwrote.
  const Tensor from = may_overlap(*this, src) ? src.clone() : src;
  visit_stored(dtype_, [&]<class T>() {
    T* o = data<T>();
    const T* s = from.data<T>();
    detail::for_each_run<2>(shape_, {strides_, broadcast_strides(from.shape(), from.strides(), shape_)},
                            [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                              for (int64_t j = 0; j < n; ++j) o[off[0] + j * st[0]] = s[off[1] + j * st[1]];
                            });
  });
  return *this;
}

const Tensor& Tensor::fill_(double value) const {
  MG_CHECK(defined(), StateError, "fill_: the tensor is undefined");
  storage_->bump_version();
  visit_stored(dtype_, [&]<class T>() {
    T* o = data<T>();
    const T v = checked_cast<T>(value, "fill_");
    detail::for_each_run<1>(shape_, {strides_},
                            [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
                              for (int64_t j = 0; j < n; ++j) o[off[0] + j * st[0]] = v;
                            });
  });
  return *this;
}

Tensor bf16_copy_of(const Tensor& t) {
  if (!t.defined() || t.dtype() != DType::Float32) return Tensor();
  std::shared_ptr<const Storage> copy = t.storage()->bf16_copy();
  if (!copy) return Tensor();
  return Tensor(std::const_pointer_cast<Storage>(std::move(copy)), DType::BFloat16, t.shape(), t.strides(), t.offset());
}

}  // namespace mg
