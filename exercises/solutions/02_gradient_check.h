#pragma once
// Exercise 2, the reference solution (docs/02-autograd.md, section "Checking gradients").
#include <functional>

#include "exercise.h"

namespace exercises {

/// The gradient of the scalar function f at x, by central differences.
inline mg::Tensor numerical_gradient(const std::function<double(const mg::Tensor&)>& f, const mg::Tensor& x,
                                     double eps = 1e-6) {
  mg::Tensor probe = x.clone();  // perturbed one element at a time; x itself is never written
  mg::Tensor grad = mg::zeros_like(x);
  double* p = probe.data<double>();
  double* g = grad.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double saved = p[i];
    p[i] = saved + eps;
    const double up = f(probe);
    p[i] = saved - eps;
    const double down = f(probe);
    p[i] = saved;  // back, before the next element is moved
    // The symmetric difference: the x^2 terms of the two Taylor series cancel, so the error is
    // O(eps^2), where the one-sided (f(x + eps) - f(x)) / eps is off by O(eps).
    g[i] = (up - down) / (2 * eps);
  }
  return grad;
}

}  // namespace exercises
