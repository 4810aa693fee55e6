#pragma once
// The element types a Tensor can hold.
#include <cstdint>
#include <string_view>

#include "tensor/error.h"

namespace mg {

/// Element type of a tensor. Float32 is the default; Float64 is used by gradient checking;
/// Int64 holds indices and class targets; Bool holds masks (one byte per element).
enum class DType : uint8_t { Float32, Float64, Int64, Bool };

/// Bytes per element.
constexpr size_t itemsize(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

/// "float32", "float64", "int64" or "bool".
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}

/// True for Float32 and Float64.
constexpr bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }

/// The DType of a C++ element type: dtype_of<float> == Float32, dtype_of<bool> == Bool.
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }

/// Call `f.template operator()<T>()` with T = float or double matching `t`; any other dtype is a
/// DTypeError naming `op`. Used as: visit_float(x.dtype(), "exp", [&]<class T>() { ... });
template <class F>
decltype(auto) visit_float(DType t, std::string_view op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default:
      throw DTypeError(fmt::format("{}: expected a floating tensor (float32 or float64), got {}", op,
                                   dtype_name(t)));
  }
}

/// Like visit_float, and also accepts Int64 and Bool.
template <class F>
decltype(auto) visit_all(DType t, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Int64: return f.template operator()<int64_t>();
    case DType::Bool: return f.template operator()<bool>();
  }
  return f.template operator()<float>();
}

}  // namespace mg
