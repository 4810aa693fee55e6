#pragma once
// Gradient clipping, as torch.nn.utils.clip_grad_norm_: one bad batch with a huge gradient
// must not throw a run off course.
#include <vector>

#include "minigrad/autograd/variable.h"

namespace mg::optim {

/// Scale all gradients in place so that their joint norm is at most max_norm:
/// coef = max_norm / (total + 1e-6), applied when coef < 1. norm_type 2 or infinity. Returns
/// the total norm before clipping. Parameters without a gradient are skipped.
double clip_grad_norm_(const std::vector<Variable>& params, double max_norm, double norm_type = 2.0);
/// Clamp every gradient element to [-clip_value, clip_value] in place (torch.nn.utils.clip_grad_value_).
/// Parameters without a gradient are skipped; NaN stays NaN.
void clip_grad_value_(const std::vector<Variable>& params, double clip_value);

}  // namespace mg::optim
