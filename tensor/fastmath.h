#pragma once
// Branch-free float32 exp and erf that the compiler can vectorise (libm's are scalar calls).
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
  return x < 0 ? -y : y;
}

/// The same names for double: the exact libm functions.
inline double exp(double x) { return std::exp(x); }
inline double erf(double x) { return std::erf(x); }

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
