#pragma once
// mg::Tensor: an n-dimensional array of numbers. Nothing in tensor/ knows about gradients.
//
// A tensor is a window onto a Storage: element (i0, i1, ...) lives at
//     storage + (offset + i0*strides[0] + i1*strides[1] + ...) * itemsize.
// Views (transpose, narrow, expand, ...) only change shape/strides/offset and share the storage,
// so they cost nothing and writes through a view are seen by the original. docs/01-tensors.md
// walks through this file.
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "minigrad/tensor/dtype.h"
#include "minigrad/tensor/generator.h"
#include "minigrad/tensor/shape.h"
#include "minigrad/tensor/storage.h"

namespace mg {

class Tensor {
 public:
  /// An undefined tensor (no storage); `defined()` is false.
  Tensor() = default;
  /// A view of `storage` with the given layout. Normally made by the factories below; a view that
  /// would reach outside the storage is an IndexError.
  Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Strides strides, int64_t offset);

  // ---- what it is ----
  /// False for a default-constructed tensor.
  bool defined() const { return storage_ != nullptr; }
  /// Element type.
  DType dtype() const { return dtype_; }
  /// Sizes of each dim.
  const Shape& shape() const { return shape_; }
  /// Element strides of each dim.
  const Strides& strides() const { return strides_; }
  /// Offset of element (0, 0, ...) from the start of storage, in elements.
  int64_t offset() const { return offset_; }
  /// Number of dims (0 for a scalar).
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  /// Size of dim `d` (negative counts from the end).
  int64_t size(int64_t d) const;
  /// Number of elements.
  int64_t numel() const { return numel_of(shape_); }
  /// True when the elements are laid out row-major with no gaps.
  bool is_contiguous() const;
  /// The shared storage.
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  /// The in-place writes its storage has seen, through this tensor or any view of it (PyTorch's
  /// `t._version`; Storage::version).
  uint64_t version() const { return storage_ ? storage_->version() : 0; }

  // ---- element access ----
  /// Pointer to element (0, 0, ...); a DTypeError if T does not match dtype(). Null for a tensor
  /// with no elements whose storage holds none (a zero-size view keeps its offset, but null plus
  /// an offset is not a pointer).
  template <class T>
  T* data() const {
    check_dtype(dtype_of<T>(), "data");
    T* base = static_cast<T*>(storage_->data());
    return base ? base + offset_ : nullptr;
  }
  /// Untyped pointer to element (0, 0, ...), as PyTorch's `data_ptr()`: for byte copies, MPI and
  /// file writes. Null when the storage holds no bytes (an undefined tensor, or a zero-size one).
  void* data_ptr() const {
    char* base = storage_ ? static_cast<char*>(storage_->data()) : nullptr;
    return base ? base + offset_ * static_cast<int64_t>(itemsize(dtype_)) : nullptr;
  }
  /// The single element of a one-element tensor, converted to double.
  double item() const;
  /// The single element as T (float, double, int64_t, int32_t, bool), read in the tensor's own
  /// dtype (an int64 past 2^53 stays exact): t.item<int64_t>(). A float is truncated toward zero
  /// for an integer T; a value T cannot hold (NaN or out of range) is a ValueError.
  template <class T>
  T item() const;
  /// All elements in row-major order, converted to T.
  template <class T>
  std::vector<T> to_vector() const;
  /// Element at a multi-index, converted to double (slow; for tests and printing).
  double at(const std::vector<int64_t>& index) const;

  // ---- views: no copy, shared storage ----
  /// Same data, new shape; one dim may be -1. A ShapeError if the strides do not allow it.
  Tensor view(Shape shape) const;
  /// Like view, but copies when the layout does not allow a view (like torch.reshape).
  Tensor reshape(Shape shape) const;
  /// Swap two dims.
  Tensor transpose(int64_t d0, int64_t d1) const;
  /// Reorder dims: result dim i is input dim dims[i].
  Tensor permute(const std::vector<int64_t>& dims) const;
  /// Elements start..start+length-1 of dim `d`.
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  /// Elements start, start+step, ... < end of dim `d` (Python slicing; negative start/end count
  /// from the end and are clamped).
  Tensor slice(int64_t d, int64_t start, int64_t end, int64_t step = 1) const;
  /// The diagonal of dims d1 and d2 as a view (torch.diagonal): both dims removed, a last dim
  /// added holding x[..., i, ..., i + offset, ...] (offset > 0 above the main diagonal, < 0 below).
  Tensor diagonal(int64_t offset = 0, int64_t d1 = 0, int64_t d2 = 1) const;
  /// Broadcast to `shape` by giving size-1 (or missing leading) dims stride 0; -1 keeps a size.
  Tensor expand(const Shape& shape) const;
  /// Remove dim `d` if it has size 1 (any other size leaves the tensor as it is, as in PyTorch).
  Tensor squeeze(int64_t d) const;
  /// Remove every size-1 dim.
  Tensor squeeze() const;
  /// Insert a size-1 dim at position `d`.
  Tensor unsqueeze(int64_t d) const;
  /// Merge dims start_dim..end_dim into one (all dims by default: 1-D); a view when the layout
  /// allows it, like torch.flatten.
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// Split dim `d` into `sizes` (one may be -1), the inverse of flatten: (2, 12).unflatten(1, {3, 4})
  /// is (2, 3, 4).
  Tensor unflatten(int64_t d, const Shape& sizes) const;

  // ---- method forms, as a PyTorch user writes them: t.pow(2).sum({1}).sqrt() ----
  // Each calls the free function of the same name in tensor/ops/ (tensor/tensor_methods.cpp), so
  // both spellings are one op. Variable has the same methods (autograd/variable.h).
  /// sum(*this, dims, keepdim)
  Tensor sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  /// sum over one dim, PyTorch's int form: t.sum(0, true). (A template, so that a braced t.sum({})
  /// still means every dim.)
  template <std::integral I>
  requires(!std::same_as<I, bool>) Tensor sum(I d, bool keepdim = false)
  const { return sum(std::vector<int64_t>{static_cast<int64_t>(d)}, keepdim); }
  /// mean(*this, dims, keepdim)
  Tensor mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  /// mean over one dim: t.mean(1).
  template <std::integral I>
  requires(!std::same_as<I, bool>) Tensor mean(I d, bool keepdim = false)
  const { return mean(std::vector<int64_t>{static_cast<int64_t>(d)}, keepdim); }
  /// max(*this, dim, keepdim): values and int64 indices
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  /// max(*this): the largest element
  Tensor max() const;
  /// min(*this, dim, keepdim): values and int64 indices
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  /// min(*this): the smallest element
  Tensor min() const;
  /// argmax(*this, dim, keepdim)
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  /// argmax(*this): the flat index of the largest element
  Tensor argmax() const;
  /// argmin(*this, dim, keepdim)
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  /// argmin(*this): the flat index of the smallest element
  Tensor argmin() const;
  /// var(*this, dims, correction, keepdim)
  Tensor var(const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  /// std(*this, dims, correction, keepdim)
  Tensor std(const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  /// var over one dim: t.var(1).
  template <std::integral I>
  requires(!std::same_as<I, bool>) Tensor var(I d, int64_t correction = 1, bool keepdim = false)
  const { return var(std::vector<int64_t>{static_cast<int64_t>(d)}, correction, keepdim); }
  /// std over one dim: t.std(1).
  template <std::integral I>
  requires(!std::same_as<I, bool>) Tensor std(I d, int64_t correction = 1, bool keepdim = false)
  const { return std(std::vector<int64_t>{static_cast<int64_t>(d)}, correction, keepdim); }
  /// prod(*this, dim, keepdim)
  Tensor prod(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  /// cumsum(*this, dim)
  Tensor cumsum(int64_t dim) const;
  /// logsumexp(*this, dims, keepdim)
  Tensor logsumexp(const std::vector<int64_t>& dims, bool keepdim = false) const;
  /// topk(*this, k, dim, largest, sorted): values and int64 indices
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  /// sort(*this, dim, descending): values and int64 indices
  std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  /// argsort(*this, dim, descending)
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  /// matmul(*this, other)
  Tensor matmul(const Tensor& other) const;
  /// pow(*this, exponent)
  Tensor pow(double exponent) const;
  /// exp(*this)
  Tensor exp() const;
  /// log(*this)
  Tensor log() const;
  /// sqrt(*this)
  Tensor sqrt() const;
  /// abs(*this)
  Tensor abs() const;
  /// neg(*this)
  Tensor neg() const;
  /// sign(*this)
  Tensor sign() const;
  /// tanh(*this)
  Tensor tanh() const;
  /// sigmoid(*this)
  Tensor sigmoid() const;
  /// relu(*this)
  Tensor relu() const;
  /// sin(*this)
  Tensor sin() const;
  /// cos(*this)
  Tensor cos() const;
  /// log1p(*this)
  Tensor log1p() const;
  /// expm1(*this)
  Tensor expm1() const;
  /// clamp(*this, min, max)
  Tensor clamp(std::optional<double> min, std::optional<double> max = std::nullopt) const;
  /// softmax(*this, dim)
  Tensor softmax(int64_t dim) const;
  /// log_softmax(*this, dim)
  Tensor log_softmax(int64_t dim) const;
  /// masked_fill(*this, mask, value)
  Tensor masked_fill(const Tensor& mask, double value) const;
  /// gather(*this, dim, index)
  Tensor gather(int64_t dim, const Tensor& index) const;
  /// index_select(*this, dim, index)
  Tensor index_select(int64_t dim, const Tensor& index) const;
  /// scatter(*this, dim, index, src)
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  /// scatter(*this, dim, index, value)
  Tensor scatter(int64_t dim, const Tensor& index, double value) const;
  /// scatter_add(*this, dim, index, src)
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  /// scatter_reduce(*this, dim, index, src, reduce, include_self)
  Tensor scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                        bool include_self = true) const;
  /// index_put(*this, indices, values, accumulate)
  Tensor index_put(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false) const;
  /// masked_select(*this, mask)
  Tensor masked_select(const Tensor& mask) const;
  /// repeat(*this, repeats)
  Tensor repeat(const std::vector<int64_t>& repeats) const;
  /// repeat_interleave(*this, repeats, dim)
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  /// flip(*this, dims)
  Tensor flip(const std::vector<int64_t>& dims) const;
  /// chunk(*this, chunks, dim)
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  /// split(*this, size, dim)
  std::vector<Tensor> split(int64_t size, int64_t dim = 0) const;
  /// eq(*this, other); likewise ne, lt, le, gt, ge: Bool tensors
  Tensor eq(const Tensor& other) const;
  /// ne(*this, other)
  Tensor ne(const Tensor& other) const;
  /// lt(*this, other)
  Tensor lt(const Tensor& other) const;
  /// le(*this, other)
  Tensor le(const Tensor& other) const;
  /// gt(*this, other)
  Tensor gt(const Tensor& other) const;
  /// ge(*this, other)
  Tensor ge(const Tensor& other) const;

  // ---- copies ----
  /// A contiguous tensor with the same values (itself when already contiguous).
  Tensor contiguous() const;
  /// A contiguous copy that shares nothing with this tensor.
  Tensor clone() const;
  /// Values converted to another dtype (a copy; itself when the dtype already matches).
  Tensor to(DType dtype) const;
  /// Write `src` (broadcast to this shape, same dtype) into this tensor's elements (one more
  /// version(): backward refuses a gradient that needed the old values).
  const Tensor& copy_(const Tensor& src) const;
  /// Set every element to `value` (one more version()).
  const Tensor& fill_(double value) const;

  /// The printout PyTorch gives (tensor/print.cpp): tensor([[1.5000, 2.0000], ...]), columns
  /// aligned, scientific notation when the values' range calls for it, dtype when not the default.
  std::string str() const;

  /// A DTypeError naming `op` unless dtype() == expected.
  void check_dtype(DType expected, std::string_view op) const;

 private:
  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::Float32;
  Shape shape_;
  Strides strides_;
  int64_t offset_ = 0;
};

/// Prints t.str().
std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// t.str() with extra annotations after the values, as PyTorch adds them: "tensor([1., 2.],
/// requires_grad=True)". Each goes on the last line, or on a line of its own past 80 columns.
std::string format_tensor(const Tensor& t, const std::vector<std::string>& suffixes);

/// The bfloat16 copy that the kernel which wrote float32 `t` left beside it (Storage::bf16_copy),
/// viewed with t's shape, strides and offset; undefined when there is none, or when t's memory has
/// been written in place since. Its values are t.to(DType::BFloat16)'s, bit for bit.
Tensor bf16_copy_of(const Tensor& t);

/// True when two elements of `t` may share one memory location (an expanded view, with stride 0):
/// writing through such a view would write one place several times, so in-place ops refuse it.
bool has_internal_overlap(const Tensor& t);
/// True when `a` and `b` may share memory: the same storage and overlapping element ranges
/// (x and x.transpose(0, 1) do). In-place ops copy such a source first.
bool may_overlap(const Tensor& a, const Tensor& b);

// ---- creation ----
/// The dtype of new floating tensors and of new modules' parameters when none is given: float32
/// unless set_default_dtype changed it (torch.get_default_dtype).
DType default_dtype();
/// Make `dtype` (float32 or float64; a ValueError otherwise) the default for the creation functions
/// below (empty, zeros, ones, full, scalar_tensor, eye, linspace, randn, uniform, bernoulli,
/// rotary_tables) and so for the parameters nn's layers make. For the whole process, as
/// torch.set_default_dtype; existing tensors and modules keep theirs.
void set_default_dtype(DType dtype);
/// Uninitialised contiguous tensor.
Tensor empty(const Shape& shape, DType dtype = default_dtype());
/// All zeros.
Tensor zeros(const Shape& shape, DType dtype = default_dtype());
/// All ones.
Tensor ones(const Shape& shape, DType dtype = default_dtype());
/// All `value`.
Tensor full(const Shape& shape, double value, DType dtype = default_dtype());
/// A 0-dim tensor holding `value`.
Tensor scalar_tensor(double value, DType dtype = default_dtype());
/// The n x n identity matrix.
Tensor eye(int64_t n, DType dtype = default_dtype());
/// start, start+step, ... < end in integer steps (the arange below for integer arguments).
Tensor arange_int(int64_t start, int64_t end, int64_t step, DType dtype);
/// start, start+step, ... < end computed in double (the arange below for floating arguments).
Tensor arange_float(double start, double end, double step, DType dtype);
/// start, start+step, ... < end, like torch.arange: int64 when start, end and step are all
/// integers, float32 when any is a floating-point number (arange(0, 1, 0.1) is ten float32 values
/// 0, 0.1, ..., 0.9; arange(0.0, 3.0) is float32 too), unless `dtype` says otherwise.
template <class A, class B, class C = int64_t>
requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B> && std::is_arithmetic_v<C> Tensor
arange(A start, B end, C step = 1, std::optional<DType> dtype = std::nullopt) {
  if constexpr (std::is_integral_v<A> && std::is_integral_v<B> && std::is_integral_v<C>)
    return arange_int(start, end, step, dtype.value_or(DType::Int64));
  else
    return arange_float(static_cast<double>(start), static_cast<double>(end), static_cast<double>(step),
                        dtype.value_or(DType::Float32));
}
/// 0, 1, ..., n-1.
Tensor arange(int64_t n, DType dtype = DType::Int64);
/// Copy `values` into a new tensor of `shape` (numel must match); dtype from T.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape);
/// Float32 tensor from a list: tensor({1, 2, 3, 4}, {2, 2}).
Tensor tensor(std::initializer_list<float> values, const Shape& shape);
/// `steps` values evenly spaced from start to end, both ends included (torch.linspace).
Tensor linspace(double start, double end, int64_t steps, DType dtype = default_dtype());
/// t widened to float32 if it is bfloat16 (exact), else t itself: how a kernel or a derivative rule
/// computes with bfloat16 values (in float32, rounding its result once, as PyTorch's bfloat16 ops do).
Tensor widened(const Tensor& t);
/// Zeros of x's shape, and x's dtype unless `dtype` is given; likewise ones_like, full_like.
Tensor zeros_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
/// Ones of x's shape (and dtype).
Tensor ones_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
/// `value` everywhere, in x's shape (and dtype).
Tensor full_like(const Tensor& x, double value, std::optional<DType> dtype = std::nullopt);
/// Normal(0, 1) samples (float32, float64 or bfloat16: each drawn in double, rounded once).
Tensor randn(const Shape& shape, Generator& gen = default_generator(), DType dtype = default_dtype());
/// randn with the dtype first, as torch.randn(shape, dtype=...): randn({2, 3}, DType::Float64).
Tensor randn(const Shape& shape, DType dtype, Generator& gen = default_generator());
/// Uniform samples on [low, high) (each float64 draw rounded once; one that rounds out of the range
/// takes the dtype's nearest value inside it).
Tensor uniform(const Shape& shape, double low, double high, Generator& gen = default_generator(),
               DType dtype = default_dtype());
/// 1 with probability p, else 0.
Tensor bernoulli(const Shape& shape, double p, Generator& gen = default_generator(), DType dtype = default_dtype());
/// Normal(0, 1) samples of x's shape, and x's dtype unless `dtype` is given (floating).
Tensor randn_like(const Tensor& x, Generator& gen = default_generator(), std::optional<DType> dtype = std::nullopt);
/// Integers uniform on [low, high).
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen = default_generator());

}  // namespace mg
