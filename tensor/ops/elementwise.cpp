// Elementwise kernels: one strided loop (tensor/loops.h) and a lambda per op.
#include <cmath>
#include <numbers>

#include "minigrad/tensor/fastmath.h"
#include "minigrad/tensor/loops.h"
#include "minigrad/tensor/ops/elementwise.h"

namespace mg {
namespace {
using detail::backward_map;
using detail::check_same_dtype;
using detail::unary_float;

// x + y, x - y, x * y. int64 arithmetic wraps around on overflow, as PyTorch's does (two's
// complement), where signed overflow would be undefined behaviour.
template <class T>
T plus(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>)
    return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
  else
    return x + y;
}
template <class T>
T minus(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>)
    return static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
  else
    return x - y;
}
template <class T>
T times(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>)
    return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
  else
    return x * y;
}

// A bfloat16 op's operands as PyTorch 2.x's kernels read them: each converted to the result dtype, so
// a 0-dim float32 beside a bfloat16 tensor is rounded to bfloat16 first, except (float_b) the second
// operand of mul and div, which those kernels read as a float32 (m * 0.1 multiplies by 0.1f, m + 0.1
// adds bfloat16(0.1) = 0.10009765625). Then each is widened to float32 for the arithmetic.
std::pair<Tensor, Tensor> bfloat16_operands(const Tensor& a, const Tensor& b, DType out, bool float_b) {
  if (out != DType::BFloat16) return {a, b};
  return {a.dtype() == DType::Float32 ? a.to(out) : a, b.dtype() == DType::Float32 && !float_b ? b.to(out) : b};
}

// Arithmetic on float32, float64 and int64 (not bool), and on bfloat16 beside bfloat16 or float32:
// computed in float32, as PyTorch does, into detail::result_dtype's dtype.
template <class F>
Tensor binary_arith(const Tensor& a, const Tensor& b, std::string_view op, F f, bool float_b = false) {
  const DType out = detail::result_dtype(a, b, op);
  if (a.dtype() == DType::BFloat16 || b.dtype() == DType::BFloat16) {
    const auto [x, y] = bfloat16_operands(a, b, out, float_b);
    const Tensor r = binary_arith(widened(x), widened(y), op, f);
    return out == DType::BFloat16 ? r.to(out) : r;
  }
  MG_CHECK(a.dtype() != DType::Bool, DTypeError, "{}: arithmetic on bool tensors is not supported", op);
  return visit_all(a.dtype(), op, [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>)
      return Tensor();  // refused above
    else
      return detail::map_binary<T, T>(
          a, b, [&](T x, T y) { return static_cast<T>(f(x, y)); }, op);
  });
}

template <class F>
Tensor compare(const Tensor& a, const Tensor& b, std::string_view op, F f) {
  const DType common = detail::result_dtype(a, b, op);
  if (common == DType::BFloat16 || a.dtype() != b.dtype()) {  // compared as values of the common dtype
    const auto [x, y] = bfloat16_operands(a, b, common, false);
    return compare(widened(x), widened(y), op, f);
  }
  return visit_all(a.dtype(), op, [&]<class T>() {
    return detail::map_binary<bool, T>(
        a, b, [&](T x, T y) { return f(x, y); }, op);
  });
}

}  // namespace

Tensor neg(const Tensor& x) {
  return unary_float(x, "neg", [](auto v) { return -v; });
}
Tensor exp(const Tensor& x) {
  return unary_float(x, "exp", [](auto v) { return fast::exp(v); });
}
Tensor log(const Tensor& x) {
  return unary_float(x, "log", [](auto v) { return fast::log(v); });
}
Tensor sqrt(const Tensor& x) {
  return unary_float(x, "sqrt", [](auto v) { return std::sqrt(v); });
}
Tensor abs(const Tensor& x) {
  return unary_float(x, "abs", [](auto v) { return std::abs(v); });
}
Tensor sign(const Tensor& x) {
  return unary_float(x, "sign", [](auto v) { return static_cast<decltype(v)>((v > 0) - (v < 0)); });
}

// Each unary op that has a backward kernel of its own: the forward, then its derivative.
Tensor tanh(const Tensor& x) {
  return unary_float(x, "tanh", [](auto v) { return fast::tanh(v); });
}
// dx = dy * (1 - y^2), y = tanh x
Tensor tanh_backward(const Tensor& dy, const Tensor& y) {
  return backward_map(dy, y, "tanh_backward", [](auto g, auto t) { return g * (decltype(t)(1) - t * t); });
}

Tensor sigmoid(const Tensor& x) {
  return unary_float(x, "sigmoid", [](auto v) { return decltype(v)(1) / (decltype(v)(1) + fast::exp(-v)); });
}
// dx = dy * y * (1 - y), y = sigmoid x
Tensor sigmoid_backward(const Tensor& dy, const Tensor& y) {
  return backward_map(dy, y, "sigmoid_backward", [](auto g, auto s) { return g * s * (decltype(s)(1) - s); });
}

Tensor sin(const Tensor& x) {
  return unary_float(x, "sin", [](auto v) { return std::sin(v); });
}
Tensor cos(const Tensor& x) {
  return unary_float(x, "cos", [](auto v) { return std::cos(v); });
}
Tensor log1p(const Tensor& x) {
  return unary_float(x, "log1p", [](auto v) { return fast::log1p(v); });
}
Tensor expm1(const Tensor& x) {
  return unary_float(x, "expm1", [](auto v) { return fast::expm1(v); });
}

namespace {
void check_bounds(std::optional<double> lo, std::optional<double> hi, std::string_view op) {
  MG_CHECK(lo || hi, ValueError, "{}: give at least one of min and max", op);
  MG_CHECK((!lo || !std::isnan(*lo)) && (!hi || !std::isnan(*hi)), ValueError, "{}: a bound is NaN", op);
}
}  // namespace

// y = min(max(x, lo), hi)
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  check_bounds(lo, hi, "clamp");
  return unary_float(x, "clamp", [lo, hi](auto v) {
    using T = decltype(v);
    if (v != v) return v;  // NaN stays NaN
    if (lo && v < T(*lo)) v = T(*lo);
    if (hi && v > T(*hi)) v = T(*hi);
    return v;
  });
}
// dx = dy where lo <= x <= hi, else 0
Tensor clamp_backward(const Tensor& dy, const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  check_bounds(lo, hi, "clamp_backward");
  return backward_map(dy, x, "clamp_backward", [lo, hi](auto g, auto v) {
    using T = decltype(v);
    const bool inside = (!lo || v >= T(*lo)) && (!hi || v <= T(*hi));
    return inside ? g : T(0);
  });
}

Tensor pow(const Tensor& x, double e) {
  if (e == 2.0) return unary_float(x, "pow", [](auto v) { return v * v; });
  return unary_float(x, "pow", [e](auto v) { return static_cast<decltype(v)>(std::pow(v, e)); });
}

Tensor add(const Tensor& a, const Tensor& b) {
  return binary_arith(a, b, "add", [](auto x, auto y) { return plus(x, y); });
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary_arith(a, b, "sub", [](auto x, auto y) { return minus(x, y); });
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary_arith(
      a, b, "mul", [](auto x, auto y) { return times(x, y); }, /*float_b=*/true);
}
Tensor div(const Tensor& a, const Tensor& b) {
  if (a.defined() && a.dtype() == DType::Int64)
    MG_CHECK(!b.defined() || b.dtype() != DType::Int64, DTypeError,
             "div: integer division is not supported; convert with .to(DType::Float32) first");
  return binary_arith(
      a, b, "div", [](auto x, auto y) { return x / y; }, /*float_b=*/true);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  // NaN wins, from either side, as in torch.maximum
  return binary_arith(a, b, "maximum", [](auto x, auto y) { return x > y || x != x ? x : y; });
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary_arith(a, b, "minimum", [](auto x, auto y) { return x < y || x != x ? x : y; });
}

Tensor eq(const Tensor& a, const Tensor& b) {
  return compare(a, b, "eq", [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare(a, b, "ne", [](auto x, auto y) { return x != y; });
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare(a, b, "lt", [](auto x, auto y) { return x < y; });
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare(a, b, "le", [](auto x, auto y) { return x <= y; });
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare(a, b, "gt", [](auto x, auto y) { return x > y; });
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare(a, b, "ge", [](auto x, auto y) { return x >= y; });
}

Tensor logical_not(const Tensor& mask) {
  mask.check_dtype(DType::Bool, "logical_not");
  return detail::map_unary<bool, bool>(mask, [](bool v) { return !v; });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  cond.check_dtype(DType::Bool, "where (condition)");
  const DType out = detail::result_dtype(a, b, "where");
  if (a.dtype() != b.dtype())  // float32 and bfloat16: the bfloat16 one widened (exact), as PyTorch promotes
    return where(cond, a.to(out), b.to(out));
  if (out == DType::BFloat16)  // (a choice between stored values: no arithmetic)
    return detail::map_ternary<bfloat16, bool, bfloat16, bfloat16>(
        cond, a, b, [](bool c, bfloat16 x, bfloat16 y) { return c ? x : y; }, "where");
  return visit_all(a.dtype(), "where", [&]<class T>() {
    return detail::map_ternary<T, bool, T, T>(
        cond, a, b, [](bool c, T x, T y) { return c ? x : y; }, "where");
  });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  MG_CHECK(x.defined(), StateError, "masked_fill: the tensor is undefined");
  mask.check_dtype(DType::Bool, "masked_fill (mask)");
  const Shape b = broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  MG_CHECK(b == x.shape(), ShapeError, "masked_fill: mask of shape {} cannot be broadcast to {}",
           shape_str(mask.shape()), shape_str(x.shape()));
  if (x.dtype() != DType::BFloat16)  // (a bfloat16 x takes value rounded, as PyTorch's does)
    visit_all(x.dtype(), "masked_fill", [&]<class T>() { checked_cast<T>(value, "masked_fill"); });
  return where(mask, scalar_tensor(value, x.dtype()), x);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
namespace {
// A number beside a tensor becomes a 0-dim tensor of its dtype, if that dtype holds it exactly.
// Beside a bfloat16 tensor it is a 0-dim float32, which the op reads as PyTorch reads a number there
// (binary_arith: as a float32 in t * c and t / c, rounded to bfloat16 elsewhere) and writes
// bfloat16. Beside a 0-dim bfloat16 tensor the result is float32 (PyTorch's is bfloat16: a 0-dim
// float32 is a tensor here, and two 0-dim tensors promote to float32).
Tensor scalar_for(const Tensor& like, double v, std::string_view op) {
  MG_CHECK(like.defined(), StateError, "{}: the tensor is undefined", op);
  if (like.dtype() == DType::BFloat16) return scalar_tensor(v, DType::Float32);
  visit_all(like.dtype(), op, [&]<class T>() { checked_cast<T>(v, op); });
  return scalar_tensor(v, like.dtype());
}
}  // namespace

Tensor operator+(const Tensor& a, double b) { return add(a, scalar_for(a, b, "add")); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_for(a, b, "sub")); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_for(a, b, "mul")); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_for(a, b, "div")); }
Tensor operator*(double a, const Tensor& b) { return b * a; }
Tensor operator+(double a, const Tensor& b) { return b + a; }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_for(b, a, "sub"), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_for(b, a, "div"), b); }

Tensor& add_(Tensor& a, const Tensor& b) {
  check_same_dtype(a, b, "add_");
  const Shape s = broadcast_shapes(a.shape(), b.shape(), "add_");
  MG_CHECK(s == a.shape(), ShapeError, "add_: shape {} cannot be broadcast to {}", shape_str(b.shape()),
           shape_str(a.shape()));
  MG_CHECK(!has_internal_overlap(a), ValueError,
           "add_: the destination (shape {}, strides {}) has elements that share memory (an expanded view?)",
           shape_str(a.shape()), shape_str(a.strides()));
  const Tensor from = may_overlap(a, b) ? b.clone() : b;
  a.storage()->bump_version();
  visit_all(a.dtype(), "add_", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("add_: arithmetic on bool tensors is not supported");
    } else {
      T* o = a.data<T>();
      const T* p = from.data<T>();
      detail::for_each_run<2>(s, {a.strides(), broadcast_strides(from.shape(), from.strides(), s)},
                              [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                                if (st[0] == 1 && st[1] == 1) {
                                  for (int64_t j = 0; j < n; ++j) o[off[0] + j] = plus(o[off[0] + j], p[off[1] + j]);
                                } else {
                                  for (int64_t j = 0; j < n; ++j)
                                    o[off[0] + j * st[0]] = plus(o[off[0] + j * st[0]], p[off[1] + j * st[1]]);
                                }
                              });
    }
  });
  return a;
}

}  // namespace mg
