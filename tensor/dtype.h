#pragma once
// The element types a Tensor can hold.
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "minigrad/tensor/bfloat16.h"
#include "minigrad/tensor/error.h"

namespace mg {

/// Element type of a tensor. Float32 is the default; Float64 is used by gradient checking;
/// Int64 holds indices and class targets; Bool holds masks (one byte per element). BFloat16 is
/// mainly a storage type (tensor/bfloat16.h): tensors of it can be made, copied, converted, printed
/// and saved; matrix products read it (whenever an operand is bfloat16: autocast makes them so); the
/// elementwise ops (arithmetic, comparisons, where, the unary functions), sum, mean, softmax and
/// log_softmax compute with it in float32 as PyTorch does, rounding the result once, and mix it with
/// float32 by PyTorch's promotion. The other reductions, the normalisations and the losses take
/// float32 or float64.
enum class DType : uint8_t { Float32, Float64, Int64, Bool, BFloat16 };

/// Bytes per element.
constexpr size_t itemsize(DType t) {
  switch (t) {
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
    case DType::Int64:
      return 8;
    case DType::Bool:
      return 1;
    case DType::BFloat16:
      return 2;
  }
  return 0;
}

/// "float32", "float64", "int64", "bool" or "bfloat16".
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Int64:
      return "int64";
    case DType::Bool:
      return "bool";
    case DType::BFloat16:
      return "bfloat16";
  }
  return "?";
}

/// True for Float32 and Float64, the floating dtypes minigrad computes in (not BFloat16, which it
/// stores and computes with in float32: see is_floating_point).
constexpr bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }
/// True for every floating dtype, BFloat16 included (torch.is_floating_point's sense).
constexpr bool is_floating_point(DType t) { return is_floating(t) || t == DType::BFloat16; }

/// The DType of a C++ element type: dtype_of<float> == Float32, dtype_of<bool> == Bool.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::Float64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::Int64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}
template <>
constexpr DType dtype_of<bfloat16>() {
  return DType::BFloat16;
}

/// `value` as an element of type T. Into int64 and bool only values they hold exactly are taken
/// (2.5, NaN or 1e30 into int64, 2 into bool are a ValueError naming `op`): minigrad never rounds a
/// value silently, and casting NaN to an integer would be undefined behaviour.
template <class T>
T checked_cast(double value, std::string_view op) {
  if constexpr (std::is_same_v<T, int64_t>) {
    MG_CHECK(value == value && value >= -0x1p63 && value < 0x1p63 &&
                 static_cast<double>(static_cast<int64_t>(value)) == value,
             ValueError,
             "{}: {} is not an int64 value (minigrad does not round or promote; convert the tensor with "
             ".to(DType::Float32) first)",
             op, value);
  } else if constexpr (std::is_same_v<T, bool>) {
    MG_CHECK(value == 0 || value == 1, ValueError, "{}: {} is not a bool value (0 or 1)", op, value);
  }
  return static_cast<T>(value);
}

/// Call `f.template operator()<T>()` with T = float or double matching `t`; any other dtype is a
/// DTypeError naming `op`. Used as: visit_float(x.dtype(), "exp", [&]<class T>() { ... });
template <class F>
decltype(auto) visit_float(DType t, std::string_view op, F&& f) {
  switch (t) {
    case DType::Float32:
      return f.template operator()<float>();
    case DType::Float64:
      return f.template operator()<double>();
    default:
      throw DTypeError(fmt::format("{}: expected a floating tensor (float32 or float64), got {}", op, dtype_name(t)));
  }
}

/// Like visit_float, and also accepts Int64 and Bool. BFloat16 is a DTypeError naming `op` (the ops
/// that take it convert it themselves, tensor/loops.h; storage operations use visit_stored).
template <class F>
decltype(auto) visit_all(DType t, std::string_view op, F&& f) {
  switch (t) {
    case DType::Float32:
      return f.template operator()<float>();
    case DType::Float64:
      return f.template operator()<double>();
    case DType::Int64:
      return f.template operator()<int64_t>();
    case DType::Bool:
      return f.template operator()<bool>();
    case DType::BFloat16:
      break;
  }
  throw DTypeError(
      fmt::format("{}: does not take bfloat16 (minigrad computes with bfloat16 in matrix products, "
                  "arithmetic, comparisons, unary functions, sum, mean, softmax, dropout, SwiGLU and RoPE "
                  "only; convert with .to(DType::Float32) first)",
                  op));
}

/// Every dtype, BFloat16 included (as mg::bfloat16): for copying, converting, filling and printing.
template <class F>
decltype(auto) visit_stored(DType t, F&& f) {
  switch (t) {
    case DType::Float32:
      return f.template operator()<float>();
    case DType::Float64:
      return f.template operator()<double>();
    case DType::Int64:
      return f.template operator()<int64_t>();
    case DType::Bool:
      return f.template operator()<bool>();
    case DType::BFloat16:
      return f.template operator()<bfloat16>();
  }
  return f.template operator()<float>();
}

}  // namespace mg
