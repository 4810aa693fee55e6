#pragma once
// Small summaries the examples print: a mean over a window of steps, a median, a matrix's numerical
// rank, a median time, the largest finite magnitude in a tensor (a colour scale that ignores the -inf
// of masked scores).
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

/// The numerical rank of a small matrix (rows, cols), computed in float64: Gaussian elimination with
/// partial pivoting, counting the pivots above `tol` times the largest entry.
inline int64_t numerical_rank(const mg::Tensor& m, double tol = 1e-9) {
  MG_CHECK(m.dim() == 2, ShapeError, "numerical_rank: expected a matrix, got shape {}", mg::shape_str(m.shape()));
  const int64_t rows = m.size(0), cols = m.size(1);
  std::vector<double> a = m.to(mg::DType::Float64).contiguous().to_vector<double>();
  double largest = 0;
  for (double x : a) largest = std::max(largest, std::abs(x));
  int64_t rank = 0;
  for (int64_t col = 0; col < cols && rank < rows; ++col) {
    int64_t pivot = rank;
    for (int64_t r = rank + 1; r < rows; ++r)
      if (std::abs(a[r * cols + col]) > std::abs(a[pivot * cols + col])) pivot = r;
    if (std::abs(a[pivot * cols + col]) <= tol * largest) continue;
    for (int64_t j = 0; j < cols; ++j) std::swap(a[pivot * cols + j], a[rank * cols + j]);
    for (int64_t r = rank + 1; r < rows; ++r) {
      const double f = a[r * cols + col] / a[rank * cols + col];
      for (int64_t j = col; j < cols; ++j) a[r * cols + j] -= f * a[rank * cols + j];
    }
    ++rank;
  }
  return rank;
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
