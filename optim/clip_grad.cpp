#include "minigrad/optim/clip_grad.h"

#include <algorithm>
#include <cmath>

#include "minigrad/tensor/ops.h"

namespace mg::optim {

// total = (sum over parameters of |g|^2)^(1/2)   (or max |g| for norm_type = inf)
// g <- g * max_norm / (total + 1e-6)   when that factor is below 1
// A NaN or inf gradient makes the total NaN or inf, and then every gradient NaN or 0, as in
// PyTorch (whose error_if_nonfinite is off by default): the returned total says so.
double clip_grad_norm_(const std::vector<Variable>& params, double max_norm, double norm_type) {
  MG_CHECK(norm_type == 2.0 || norm_type == INFINITY, ValueError,
           "clip_grad_norm_: norm_type must be 2 or infinity, got {}", norm_type);
  MG_CHECK(max_norm >= 0, ValueError, "clip_grad_norm_: max_norm must be >= 0, got {}", max_norm);
  double total = 0;
  for (const Variable& p : params) {
    if (!p.grad().defined() || p.grad().numel() == 0) continue;
    if (norm_type == INFINITY) {
      const double m = max(abs(p.grad())).item();  // NaN wins
      total = std::isnan(m) || m > total ? m : total;
    } else {
      total += sum(p.grad().to(DType::Float64) * p.grad().to(DType::Float64)).item();
    }
  }
  if (norm_type != INFINITY) total = std::sqrt(total);
  const double coef = max_norm / (total + 1e-6);
  if (!(coef >= 1))  // below 1, or NaN
    for (const Variable& p : params)
      if (p.grad().defined()) p.grad().copy_(p.grad() * coef);
  return total;
}

void clip_grad_value_(const std::vector<Variable>& params, double clip_value) {
  MG_CHECK(std::isfinite(clip_value) && clip_value >= 0, ValueError,
           "clip_grad_value_: clip_value must be finite and >= 0, got {}", clip_value);
  for (const Variable& p : params)
    if (p.grad().defined()) p.grad().copy_(clamp(p.grad(), -clip_value, clip_value));
}

}  // namespace mg::optim
