#pragma once
// Exercise 2 (chapter 2, autograd): a gradient check by central differences.
//
// backward() computes a gradient from the derivative rules; a numerical gradient needs nothing but
// the function. Comparing the two is how every op in minigrad is tested (mg::gradcheck).
#include <functional>

#include "exercise.h"

namespace exercises {

/// The gradient of the scalar function f at x, by central differences: element i of the result is
///   (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)
/// where e_i is 1 at element i and 0 elsewhere. x: any shape, float64, contiguous; the result has
/// x's shape, float64. Leave x as it was: perturb a copy (x.clone()), or put each element back.
/// Useful: t.clone(), t.numel(), t.data<double>() (a pointer to the elements, in order),
/// mg::zeros_like(t). Why central and not (f(x + eps e_i) - f(x)) / eps? The check asks for an
/// accuracy only the central difference reaches (its error shrinks as eps^2, the other's as eps).
/// Hint: docs/02-autograd.md, section "Checking gradients".
inline mg::Tensor numerical_gradient(const std::function<double(const mg::Tensor&)>& f, const mg::Tensor& x,
                                     double eps = 1e-6) {
  throw NotDone("02_gradient_check", "docs/02-autograd.md, section \"Checking gradients\"");
}

}  // namespace exercises
