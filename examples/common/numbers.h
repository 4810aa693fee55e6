#pragma once
// Small summaries the examples print: a mean over a window of steps, a median, a median time, the
// largest finite magnitude in a tensor (a colour scale that ignores the -inf of masked scores).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "minigrad/minigrad.h"

namespace example {

/// The mean of v over steps [from, to], 1-based and inclusive (v[from - 1] ... v[to - 1]).
inline double window_mean(const std::vector<double>& v, size_t from, size_t to) {
  MG_CHECK(from >= 1 && from <= to && to <= v.size(), ValueError,
           "window_mean: steps {} to {} are not inside the {} recorded", from, to, v.size());
  double s = 0;
  for (size_t i = from; i <= to; ++i) s += v[i - 1];
  return s / static_cast<double>(to - from + 1);
}

/// The median of v (the mean of the two middle values when there is an even number of them).
inline double median(std::vector<double> v) {
  MG_CHECK(!v.empty(), ValueError, "median: no values");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Milliseconds of f(): the median of `reps` timed runs after one untimed warm-up run.
template <class F>
double median_ms(int reps, F&& f) {
  MG_CHECK(reps >= 1, ValueError, "median_ms: reps must be >= 1, got {}", reps);
  f();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(ms);
}

/// The largest |x| over the finite entries of t (0 when there are none): a symmetric colour scale
/// for attention scores whose masked entries are -inf.
inline double finite_abs_max(const mg::Tensor& t) {
  double m = 0;
  for (double v : t.to(mg::DType::Float64).contiguous().to_vector<double>())
    if (std::isfinite(v)) m = std::max(m, std::abs(v));
  return m;
}

}  // namespace example
