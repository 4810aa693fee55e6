// Creating tensors: empty, zeros, full, arange, linspace, from_vector, the *_like forms, and the
// random ones drawn from a Generator. Every size is checked (checked_numel) before memory is asked for.
#include <atomic>
#include <cmath>
#include <limits>

#include "minigrad/tensor/loops.h"
#include "minigrad/tensor/tensor.h"

namespace mg {

namespace {
std::atomic<DType> g_default_dtype{DType::Float32};  // one setting for the process, as PyTorch's
}  // namespace

DType default_dtype() { return g_default_dtype.load(std::memory_order_relaxed); }

void set_default_dtype(DType dtype) {
  MG_CHECK(dtype == DType::Float32 || dtype == DType::Float64, ValueError,
           "set_default_dtype: the default must be float32 or float64, got {} (for bfloat16 compute, use an "
           "AutocastGuard)",
           dtype_name(dtype));
  g_default_dtype.store(dtype, std::memory_order_relaxed);
}

Tensor empty(const Shape& shape, DType dtype) {
  const int64_t item = static_cast<int64_t>(itemsize(dtype));
  auto storage = std::make_shared<Storage>(static_cast<size_t>(checked_numel(shape, "empty", item) * item));
  return Tensor(std::move(storage), dtype, shape, contiguous_strides(shape), 0);
}

Tensor zeros(const Shape& shape, DType dtype) {
  const int64_t item = static_cast<int64_t>(itemsize(dtype));
  auto storage =
      std::make_shared<Storage>(static_cast<size_t>(checked_numel(shape, "zeros", item) * item), /*zero=*/true);
  return Tensor(std::move(storage), dtype, shape, contiguous_strides(shape), 0);
}

Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor full(const Shape& shape, double value, DType dtype) {
  visit_stored(dtype, [&]<class T>() { checked_cast<T>(value, "full"); });
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

Tensor eye(int64_t n, DType dtype) {
  MG_CHECK(n >= 0, ValueError, "eye: n must be >= 0, got {}", n);
  Tensor t = zeros({n, n}, dtype);
  Tensor(t.storage(), dtype, {n}, {n + 1}, 0).fill_(1);  // the diagonal: a view with stride n + 1
  return t;
}

Tensor arange_float(double start, double end, double step, DType dtype) {
  MG_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step), ValueError,
           "arange: start, end and step must be finite and step non-zero, got [{}, {}) step {}", start, end, step);
  MG_CHECK(step > 0 ? end >= start : end <= start, ValueError,
           "arange: [{}, {}) cannot be walked in steps of {} (the step's sign must lead from start to end)", start, end,
           step);
  const double count = std::ceil((end - start) / step);
  MG_CHECK(count < 4.6e18, ValueError, "arange: [{}, {}) in steps of {} would have {:.3g} elements", start, end, step,
           count);
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  Tensor t = empty({n}, dtype);
  visit_all(dtype, "arange", [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

Tensor arange_int(int64_t start, int64_t end, int64_t step, DType dtype) {
  MG_CHECK(step != 0, ValueError, "arange: step must be non-zero, got [{}, {}) step {}", start, end, step);
  MG_CHECK(step > 0 ? end >= start : end <= start, ValueError,
           "arange: [{}, {}) cannot be walked in steps of {} (the step's sign must lead from start to end)", start, end,
           step);
  const __int128 span = static_cast<__int128>(end) - start;  // int128: no overflow for any int64 bounds
  const __int128 count = span == 0 ? 0 : (span + step + (step > 0 ? -1 : 1)) / step;
  MG_CHECK(count < (__int128{1} << 62), ValueError, "arange: [{}, {}) in steps of {} would have {:.3g} elements", start,
           end, step, static_cast<double>(count));
  Tensor t = empty({static_cast<int64_t>(count)}, dtype);
  visit_all(dtype, "arange", [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i)
      p[i] = static_cast<T>(static_cast<int64_t>(start + static_cast<__int128>(i) * step));
  });
  return t;
}

Tensor arange(int64_t n, DType dtype) { return arange_int(0, n, 1, dtype); }

// x_i = start + i step for the first half, end - (steps - 1 - i) step for the second, as
// torch.linspace does: both ends come out exactly
Tensor linspace(double start, double end, int64_t steps, DType dtype) {
  MG_CHECK(steps >= 0, ValueError, "linspace: steps must be >= 0, got {}", steps);
  MG_CHECK(std::isfinite(start) && std::isfinite(end), ValueError,
           "linspace: start and end must be finite, got {} and {}", start, end);
  MG_CHECK(is_floating(dtype), DTypeError, "linspace: expected a floating dtype, got {}", dtype_name(dtype));
  Tensor t = empty({steps}, dtype);
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0;
  visit_float(dtype, "linspace", [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < steps; ++i)
      p[i] = static_cast<T>(steps == 1 || i < steps / 2 ? start + step * static_cast<double>(i)
                                                        : end - step * static_cast<double>(steps - 1 - i));
  });
  return t;
}

Tensor zeros_like(const Tensor& x, std::optional<DType> dtype) {
  MG_CHECK(x.defined(), StateError, "zeros_like: the tensor is undefined");
  return zeros(x.shape(), dtype.value_or(x.dtype()));
}
Tensor ones_like(const Tensor& x, std::optional<DType> dtype) {
  MG_CHECK(x.defined(), StateError, "ones_like: the tensor is undefined");
  return ones(x.shape(), dtype.value_or(x.dtype()));
}
Tensor full_like(const Tensor& x, double value, std::optional<DType> dtype) {
  MG_CHECK(x.defined(), StateError, "full_like: the tensor is undefined");
  return full(x.shape(), value, dtype.value_or(x.dtype()));
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  MG_CHECK(static_cast<int64_t>(values.size()) == numel_of(shape), ShapeError,
           "from_vector: {} values cannot fill shape {} ({} elements)", values.size(), shape_str(shape),
           numel_of(shape));
  Tensor t = empty(shape, dtype_of<T>());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&);

template <>
Tensor from_vector<bool>(const std::vector<bool>& values, const Shape& shape) {
  MG_CHECK(static_cast<int64_t>(values.size()) == numel_of(shape), ShapeError,
           "from_vector: {} values cannot fill shape {} ({} elements)", values.size(), shape_str(shape),
           numel_of(shape));
  Tensor t = empty(shape, DType::Bool);
  bool* p = t.data<bool>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

Tensor tensor(std::initializer_list<float> values, const Shape& shape) {
  return from_vector(std::vector<float>(values), shape);
}

namespace {
template <class Draw>
Tensor sample(const Shape& shape, DType dtype, std::string_view op, Draw draw) {
  checked_numel(shape, op, static_cast<int64_t>(itemsize(dtype)));  // errors name the sampler, not empty
  Tensor t = empty(shape, dtype);
  if (dtype == DType::BFloat16) {  // each draw (a double) rounded once: x.to(BFloat16) of the float64 draws
    bfloat16* p = t.data<bfloat16>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = bfloat16(draw());
    return t;
  }
  visit_float(dtype, op, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(draw());
  });
  return t;
}
}  // namespace

Tensor randn(const Shape& shape, Generator& gen, DType dtype) {
  return sample(shape, dtype, "randn", [&] { return gen.next_normal(); });
}

Tensor randn(const Shape& shape, DType dtype, Generator& gen) { return randn(shape, gen, dtype); }

Tensor randn_like(const Tensor& x, Generator& gen, std::optional<DType> dtype) {
  MG_CHECK(x.defined(), StateError, "randn_like: the tensor is undefined");
  return randn(x.shape(), gen, dtype.value_or(x.dtype()));
}

namespace {
// The representable value next to v toward -inf (down) or +inf (up), in v's type.
template <class T>
T step(T v, bool up) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    const float f = static_cast<float>(v);
    if (f == 0) return bfloat16::from_bits(up ? 0x0001 : 0x8001);  // the value of least magnitude
    return bfloat16::from_bits(static_cast<uint16_t>((f > 0) == up ? v.bits + 1 : v.bits - 1));
  } else {
    return std::nextafter(v, up ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity());
  }
}
}  // namespace

Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype) {
  MG_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high && std::isfinite(high - low), ValueError,
           "uniform: expected finite low <= high, got [{}, {})", low, high);
  Tensor t = sample(shape, dtype, "uniform", [&] { return low + (high - low) * gen.next_double(); });
  if (low == high) return t;
  // A draw within half a step of high rounds up to it (or past it, when high is not representable):
  // 1 in 512 draws of [0, 1) in bfloat16; one near a low that the dtype cannot hold can round below
  // it. Such a value becomes the nearest one inside [low, high), so that every sample is in the
  // range as promised (left as rounded if the dtype has no value there).
  visit_stored(dtype, [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bfloat16>) {
      T* p = t.data<T>();
      const auto at = [](T v) { return static_cast<double>(v); };
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (at(p[i]) >= low && at(p[i]) < high) continue;
        T r = p[i];
        while (at(r) >= high) r = step(r, false);
        while (at(r) < low) r = step(r, true);
        if (at(r) >= low && at(r) < high) p[i] = r;
      }
    }
  });
  return t;
}

Tensor bernoulli(const Shape& shape, double p, Generator& gen, DType dtype) {
  MG_CHECK(p >= 0 && p <= 1, ValueError, "bernoulli: probability must be in [0, 1], got {}", p);
  return sample(shape, dtype, "bernoulli", [&] { return gen.next_double() < p ? 1.0 : 0.0; });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen) {
  MG_CHECK(low < high, ValueError, "randint: expected low < high, got [{}, {})", low, high);
  checked_numel(shape, "randint", 8);
  Tensor t = empty(shape, DType::Int64);
  int64_t* p = t.data<int64_t>();
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);  // up to 2^64 - 1: no overflow
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<int64_t>(static_cast<uint64_t>(low) + gen.next_below(range));
  return t;
}

}  // namespace mg
