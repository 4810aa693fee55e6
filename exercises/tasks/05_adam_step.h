#pragma once
// Exercise 5 (chapter 4, nn and optim): one step of Adam, by hand.
//
// An optimizer is not a second network: it is a few lines of arithmetic per parameter, with two
// running averages kept between steps. Write Adam's (the rule of torch.optim.Adam, which
// optim::Adam follows; the check runs both side by side).
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

/// One Adam step for one parameter: returns the new value of p (p itself is left as it was) and
/// updates `state` (t counts this step: 1 on the first). p, grad, state.m, state.v: one shape,
/// float64. Per element, at step t:
///   g = grad + weight_decay * p
///   m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g^2
///   m_hat = m / (1 - beta1^t)                v_hat = v / (1 - beta2^t)     (undo the zero start)
///   p = p - lr * m_hat / (sqrt(v_hat) + eps)
/// Useful: mg::sqrt, std::pow, and the operators on tensors and doubles (t * 0.9, 1.0 - t, ...).
/// Adam, not AdamW: the weight decay is added to the gradient (the first line), not to p apart.
/// Hint: docs/04-nn.md, section "Training loop" (and the rule at the top of optim/adam.h).
inline mg::Tensor adam_step(const mg::Tensor& p, const mg::Tensor& grad, AdamState& state, const AdamSettings& s) {
  throw NotDone("05_adam_step", "docs/04-nn.md, section \"Training loop\"");
}

}  // namespace exercises
