#pragma once
// Exercise 5, the reference solution (docs/04-nn.md, section "Training loop").
#include <cmath>
#include <cstdint>

#include "exercise.h"

namespace exercises {

/// Adam's hyper-parameters, named as in optim::AdamOptions.
struct AdamSettings {
  double lr = 1e-3;
  double beta1 = 0.9;    // decay of m, the running mean of the gradient
  double beta2 = 0.999;  // decay of v, the running mean of its square
  double eps = 1e-8;
  double weight_decay = 0;  // Adam's L2 term: weight_decay * p is added to the gradient
};

/// What Adam keeps for one parameter between steps. Starts as {zeros, zeros, 0}.
struct AdamState {
  mg::Tensor m;   // the parameter's shape
  mg::Tensor v;   // the parameter's shape
  int64_t t = 0;  // steps taken so far
};

/// One Adam step for one parameter: returns the new value of p and updates `state`.
inline mg::Tensor adam_step(const mg::Tensor& p, const mg::Tensor& grad, AdamState& state, const AdamSettings& s) {
  state.t += 1;
  const mg::Tensor g = s.weight_decay != 0 ? grad + p * s.weight_decay : grad;
  // Exponential moving averages of the gradient and of its square (new tensors: the caller's
  // m and v are replaced, not written into).
  state.m = state.m * s.beta1 + g * (1 - s.beta1);
  state.v = state.v * s.beta2 + g * g * (1 - s.beta2);
  // Both averages start at 0, so early on they are too small by the factor 1 - beta^t: divide it out.
  const mg::Tensor m_hat = state.m / (1 - std::pow(s.beta1, static_cast<double>(state.t)));
  const mg::Tensor v_hat = state.v / (1 - std::pow(s.beta2, static_cast<double>(state.t)));
  // Each element moves by about lr, in the direction of -m_hat, scaled by its own gradient's size.
  return p - m_hat / (mg::sqrt(v_hat) + s.eps) * s.lr;
}

}  // namespace exercises
