#include "minigrad/autograd/autocast.h"

namespace mg {
namespace {
thread_local bool autocast_enabled = false;  // per thread, as GradMode
}  // namespace

bool AutocastMode::is_enabled() { return autocast_enabled; }
void AutocastMode::set_enabled(bool enabled) { autocast_enabled = enabled; }

Tensor autocast(const Tensor& t) {
  return autocast_enabled && t.defined() && t.dtype() == DType::Float32 ? t.to(DType::BFloat16) : t;
}

Tensor autocast_like(const Tensor& dy, std::initializer_list<Tensor> operands) {
  for (const Tensor& t : operands)
    if (t.dtype() == DType::BFloat16) return dy.to(DType::BFloat16);
  return dy;
}

}  // namespace mg
