#pragma once
// bfloat16: the top 16 bits of a float32. One sign bit, float32's 8 exponent bits (so the same range,
// about 1e-38 to 3e38, and no overflow where float32 has none) and 7 stored mantissa bits (8 with the
// implicit one: about 2.4 decimal digits; the gap between 1 and the next value is 2^-7 = 0.0078).
//
//   float32   s eeeeeeee mmmmmmmmmmmmmmmmmmmmmmm
//   bfloat16  s eeeeeeee mmmmmmm                     (the low 16 bits dropped, after rounding)
//
// Widening to float32 is exact: append 16 zero bits. Narrowing rounds to nearest, ties to even, as
// IEEE 754's default rounding and oneDNN's and PyTorch's conversions do; a value past the largest
// bfloat16 (3.3895e38) by half a step or more becomes inf; NaN stays NaN (its sign kept, made quiet so
// that dropping low payload bits can never turn it into inf); inf and -0 stay themselves.
//
// minigrad does not compute in bfloat16: a matrix product with a bfloat16 operand (as
// mg::AutocastGuard makes them, autograd/autocast.h) reads bfloat16 and accumulates and writes
// float32; an elementwise op on bfloat16 (tensor/loops.h), sum, mean, softmax and RoPE widen each
// element to float32, compute there and round the result once, as PyTorch's bfloat16 ops do
// (docs/06-performance.md lists every op that takes bfloat16).
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace mg {

/// A bfloat16 number: 16 bits, float32's range with 8 bits of precision. Converts explicitly.
struct bfloat16 {
  uint16_t bits = 0;  ///< sign, 8 exponent bits, 7 mantissa bits

  bfloat16() = default;
  /// float32 -> bfloat16, round to nearest even (NaN stays NaN, inf stays inf).
  explicit bfloat16(float f) : bits(round_bits(f)) {}
  /// float64 -> bfloat16, rounded once (not through a rounded float32, which could round twice).
  explicit bfloat16(double d) : bits(round_bits(narrow_to_odd(d))) {}
  /// An integer or bool: exact through float64 below 2^53, otherwise rounded once as well.
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  explicit bfloat16(I v) : bfloat16(integer_to_double_odd(v)) {}

  /// The bfloat16 with these bits.
  static constexpr bfloat16 from_bits(uint16_t b) {
    bfloat16 r;
    r.bits = b;
    return r;
  }
  /// Exact widening to float32.
  explicit operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
  /// Exact widening to float64.
  explicit operator double() const { return static_cast<float>(*this); }
  /// Through float32 (exact), then C++'s own conversion (truncation for integers, != 0 for bool).
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  explicit operator I() const {
    return static_cast<I>(static_cast<float>(*this));
  }

  /// Round-to-nearest-even of float32's bits to the top 16: add 0x7FFF plus the lowest kept bit,
  /// then drop the low half. A carry out of the mantissa raises the exponent, which is right (and
  /// turns the largest values into inf, as it should). NaN is handled first: it is kept quiet.
  static uint16_t round_bits(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }

 private:
  // float64 -> float32 rounded "to odd": truncate toward zero, then set the last bit if anything was
  // cut off. A round-to-odd result with 24 bits rounds correctly on to 8 bits (24 >= 8 + 2), so
  // double -> bfloat16 through it is one correct rounding.
  static float narrow_to_odd(double d) {
    const float f = static_cast<float>(d);  // nearest
    if (static_cast<double>(f) == d || d != d || std::isinf(f)) return f;
    uint32_t u = std::bit_cast<uint32_t>(f);
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --u;  // it rounded away from zero: step back
    return std::bit_cast<float>(u | 1u);
  }
  // An integer to float64 rounded to odd as well (exact below 2^53), for the same reason.
  template <class I>
  static double integer_to_double_odd(I v) {
    if constexpr (sizeof(I) < 8) {
      return static_cast<double>(v);
    } else {
      const double d = static_cast<double>(v);
      // d is within 2^63 in magnitude; compare exactly in long double (64 mantissa bits).
      const long double ld = static_cast<long double>(v);
      if (static_cast<long double>(d) == ld) return d;
      uint64_t u = std::bit_cast<uint64_t>(d);
      if (std::fabs(static_cast<long double>(d)) > std::fabs(ld)) --u;
      return std::bit_cast<double>(u | 1u);
    }
  }
};

static_assert(sizeof(bfloat16) == 2);

// The bulk conversions: plain loops over the bits that the compiler vectorises (no branch: the
// NaN case is a select). Inline, so that inside a parallel_for they are compiled into each CPU
// level's copy (tensor/cpu.h).

/// Round n float32 values to bfloat16 (round to nearest even).
inline void to_bfloat16(const float* in, bfloat16* out, int64_t n) {
  const uint32_t* u = reinterpret_cast<const uint32_t*>(in);
  uint16_t* o = reinterpret_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t x = u[i];
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (x >> 16) | 0x0040u;
    o[i] = static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}
/// Widen n bfloat16 values to float32 (exact).
inline void to_float32(const bfloat16* in, float* out, int64_t n) {
  const uint16_t* u = reinterpret_cast<const uint16_t*>(in);
  uint32_t* o = reinterpret_cast<uint32_t*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<uint32_t>(u[i]) << 16;
}

}  // namespace mg
