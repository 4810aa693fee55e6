#pragma once
// Branch-free float32 exp, erf, log, log1p, expm1 and tanh that the compiler can vectorise (libm's
// are scalar calls).
// Used by the float32 kernels only; float64 keeps libm's exact functions, so gradient checks
// (which run in float64) are untouched.
//
// exp: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, then the Cephes degree-6
// polynomial for e^r, times 2^n put into exponent bits (in two halves, so that 2^n may leave the
// normal range: results overflow to inf above ln(FLT_MAX) = 88.72 and shrink through the
// subnormals to 0 below -103.97, as libm's do). +-inf and NaN give what libm gives.
// tests/test_fastmath.cpp compares it with libm over every 97th float of the whole range.
// erf: Abramowitz & Stegun 7.1.26 (1.5e-7 in exact arithmetic, at most 6.6e-7 evaluated in float).
#include <bit>
#include <cmath>
#include <cstdint>

namespace mg::fast {

/// e^x for float, vectorisable; exactly 0 for x < -104 (so a masked -inf score gives weight 0),
/// inf above 88.72.
inline float exp(float x) {
  // plain comparisons and no std::floor: those become library calls that stop vectorisation
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 88.8f ? 88.8f : xc;                                  // e^88.8 overflows to inf below
  const float t = xc * 1.44269504088896341f + 12582912.0f;       // + 1.5 * 2^23 rounds to an integer...
  const float n = t - 12582912.0f;                               // ...n = round(x / ln2), -150..128
  const uint32_t ni = std::bit_cast<uint32_t>(t) - 0x4B400000u;  // the same n (two's complement), from t's bits
  const float r = xc - n * 0.693359375f + n * 2.12194440e-4f;    // x - n ln2, ln2 split in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2^n as 2^h * 2^(n-h), h = n/2: both halves stay normal floats for every n in -150..128.
  const uint32_t h = static_cast<uint32_t>(static_cast<int32_t>(ni) >> 1);
  const float s1 = std::bit_cast<float>((h + 127u) << 23), s2 = std::bit_cast<float>((ni - h + 127u) << 23);
  const float e = y * s1 * s2;
  return x < -104.0f ? 0.0f : (x == x ? e : x);  // NaN in, NaN out
}

/// erf(x) for float, vectorisable (absolute error at most 6.6e-7, measured over the float range).
inline float erf(float x) {
  const float a = x < 0 ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly =
      t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const float y = 1.0f - poly * exp(-a * a);
  // NaN in, the same NaN out (the arithmetic above would flip its sign, and a caller that then
  // multiplies it with x would get whichever NaN the compiler put first: another at another level)
  return x != x ? x : (x < 0 ? -y : y);
}

namespace detail {
// log(1 + f) + e ln2 for f in [sqrt(1/2) - 1, sqrt(2) - 1]: f - f^2/2 + f^3 P(f) with Cephes'
// degree-8 P, plus e ln2 in two parts (the small one first, so that it is not lost).
inline float log1p_reduced(float f, float e) {
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  float r = f * z * p + e * -2.12194440e-4f;
  r = r - 0.5f * z;
  return (f + r) + e * 0.693359375f;
}
}  // namespace detail

/// log(x) for float, vectorisable: within 1 ulp of the exact value (0.78 measured over the float
/// range, subnormals included); -inf at +-0, NaN below 0, inf at inf.
//
// x = m 2^e with m in [sqrt(1/2), sqrt(2)), then log(1 + f), f = m - 1 (exact), plus e ln2.
inline float log(float x) {
  const bool sub = x < 1.17549435e-38f;  // subnormal (or not positive): scale by 2^23 first
  const uint32_t bits = std::bit_cast<uint32_t>(sub ? x * 8388608.0f : x);
  const float m0 = std::bit_cast<float>((bits & 0x007FFFFFu) | 0x3F800000u);  // the mantissa, in [1, 2)
  const int32_t e0 = static_cast<int32_t>((bits >> 23) & 0xFFu) - (sub ? 150 : 127);
  const bool high = m0 > 1.41421356f;  // halve it: m in [sqrt(1/2), sqrt(2))
  const float f = (high ? m0 * 0.5f : m0) - 1.0f;
  const float r = detail::log1p_reduced(f, static_cast<float>(e0 + (high ? 1 : 0)));
  const bool finite_positive = x > 0 && x < INFINITY;
  return finite_positive ? r : (x == 0 ? -INFINITY : (x < 0 ? NAN : x));  // inf and NaN pass through
}

/// log(1 + x) for float, vectorisable: within 2 ulp (1.17 measured over the float range), x
/// itself for tiny x, -inf at -1, NaN below it.
//
// For x in [sqrt(1/2) - 1, sqrt(2) - 1] the reduced polynomial of log takes x directly, with no
// rounding of 1 + x. Outside it, u = 1 + x rounds to u = 1 + x - c, and log(1 + x) = log(u) + c/u
// to first order, with c = x - (u - 1) computed exactly.
inline float log1p(float x) {
  const float u = 1.0f + x, d = u - 1.0f;                        // d exact (below 2^24; above, c/u is tiny)
  const float outside = log(u) + (x - d) / (u == 0 ? 1.0f : u);  // + what rounding u lost, to first order
  const bool inside = x >= -0.29289322f && x <= 0.41421356f;
  // -0 stays -0; NaN passes through; below -1 (-inf included) the NaN is made here, since one built
  // from two NaN operands would take its sign from whichever the compiler put first
  const float big = x == INFINITY || x != x ? x : (x < -1.0f ? NAN : outside);
  return x == 0 ? x : (inside ? detail::log1p_reduced(x, 0.0f) : big);
}

/// e^x - 1 for float, vectorisable: within 2 ulp (1.44 measured); exact for tiny x, -1 below -18,
/// inf above 88.72, NaN for NaN.
//
// x = n ln2 + r, |r| <= ln2/2; e^r - 1 by its Taylor series to r^8 (error below 1e-9 there), then
// e^x - 1 = 2^n (e^r - 1) + (2^n - 1), where 2^n - 1 is exact for n in -24..24 (for n = -25 and
// -26 it rounds to -1, an error below an ulp of the result); above 24 the -1 is at most half an
// ulp and is dropped, and 2^n is applied in two halves as in exp.
inline float expm1(float x) {
  float xc = x < -18.0f ? -18.0f : x;
  xc = xc > 88.8f ? 88.8f : xc;
  const float t = xc * 1.44269504088896341f + 12582912.0f;
  const float n = t - 12582912.0f;
  const int32_t ni = static_cast<int32_t>(std::bit_cast<uint32_t>(t) - 0x4B400000u);
  const float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 2.48015873e-5f;    // 1/8!
  p = p * r + 1.98412698e-4f;  // 1/7!
  p = p * r + 1.38888889e-3f;  // 1/6!
  p = p * r + 8.33333333e-3f;  // 1/5!
  p = p * r + 4.16666667e-2f;  // 1/4!
  p = p * r + 1.66666667e-1f;  // 1/3!
  p = p * r + 0.5f;
  const float em = r + r * r * p;  // e^r - 1
  const int32_t h = ni >> 1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(h + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(ni - h + 127) << 23);
  const float s = s1 * s2;  // 2^n, exact below n = 128
  const float y = ni > 24 ? ((em + 1.0f) * s1) * s2 : em * s + (s - 1.0f);
  return x == 0 ? x : (x < -18.0f ? -1.0f : (x == x ? y : x));
}

/// tanh(x) for float, vectorisable: within 2 ulp (1.31 measured); +-1 beyond +-9.1, NaN for NaN.
//
// |x| < 0.625: x + x^3 P(x^2), Cephes' degree-4 P; above it, 1 - 2 / (e^(2|x|) + 1) with the
// sign put back (the exp's 2 ulp shrink there, since the quotient is below 0.45).
inline float tanh(float x) {
  const float a = x < 0 ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float e = exp(2.0f * (a > 9.5f ? 9.5f : a));
  const float big = 1.0f - 2.0f / (e + 1.0f);
  const float r = a < 0.625f ? small : (x < 0 ? -big : big);
  return x == x && x != 0 ? r : x;  // NaN stays NaN, -0 stays -0
}

/// The same names for double: the exact libm functions.
inline double exp(double x) { return std::exp(x); }
inline double erf(double x) { return std::erf(x); }
inline double log(double x) { return std::log(x); }
inline double log1p(double x) { return std::log1p(x); }
inline double expm1(double x) { return std::expm1(x); }
inline double tanh(double x) { return std::tanh(x); }

/// Sum of n floats with eight independent running sums (added in a fixed order at the end):
/// vectorisable without reassociating, so the result is the same on every run.
inline float sum8(const float* p, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += p[i];
  return s;
}
/// Sum of (p[i] - mu)^2, eight lanes as sum8.
inline float sum8_sq(const float* p, int64_t n, float mu) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += (p[i + j] - mu) * (p[i + j] - mu);
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += (p[i] - mu) * (p[i] - mu);
  return s;
}
/// Sum of n values accumulated in double (for float input: a sum over many elements that keeps
/// float32's precision), in eight lanes as sum8 with the tail in its lanes too.
template <class T>
double sum8_in_double(const T* p, int64_t n) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] += p[i + l];
  for (; i < n; ++i) lane[i % 8] += p[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}
inline double sum8(const double* p, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += p[i];
  return s;
}

}  // namespace mg::fast
