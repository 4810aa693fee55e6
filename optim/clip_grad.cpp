#include "optim/clip_grad.h"

#include <algorithm>
#include <cmath>

#include "tensor/ops.h"

namespace mg::optim {

// total = (sum over parameters of |g|^2)^(1/2)   (or max |g| for norm_type = inf)
// g <- g * max_norm / (total + 1e-6)   when that factor is below 1
double clip_grad_norm_(const std::vector<Variable>& params, double max_norm, double norm_type) {
  MG_CHECK(norm_type == 2.0 || std::isinf(norm_type), ValueError,
           "clip_grad_norm_: norm_type must be 2 or infinity, got {}", norm_type);
  double total = 0;
  for (const Variable& p : params) {
    if (!p.grad().defined()) continue;
    if (std::isinf(norm_type)) total = std::max(total, max(abs(p.grad())).item());
    else total += sum(p.grad().to(DType::Float64) * p.grad().to(DType::Float64)).item();
  }
  if (!std::isinf(norm_type)) total = std::sqrt(total);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1)
    for (const Variable& p : params)
      if (p.grad().defined()) p.grad().copy_(p.grad() * coef);
  return total;
}

}  // namespace mg::optim
