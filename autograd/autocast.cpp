#include "minigrad/autograd/autocast.h"

namespace mg {
namespace {
thread_local bool autocast_enabled = false;  // per thread, as GradMode
}  // namespace

bool AutocastMode::is_enabled() { return autocast_enabled; }
void AutocastMode::set_enabled(bool enabled) { autocast_enabled = enabled; }

Tensor autocast(const Tensor& t) {
  if (!autocast_enabled || !t.defined() || t.dtype() != DType::Float32) return t;
  // the copy the kernel that wrote t made beside it (layer norm, GELU), if t is unchanged since
  const Tensor copy = bf16_copy_of(t);
  return copy.defined() ? copy : t.to(DType::BFloat16);
}

Tensor autocast_like(const Tensor& dy, std::initializer_list<Tensor> operands) {
  return bfloat16_involved(operands) ? dy.to(DType::BFloat16) : dy;
}

bool bfloat16_involved(std::initializer_list<Tensor> tensors) {
  for (const Tensor& t : tensors)
    if (t.defined() && t.dtype() == DType::BFloat16) return true;
  return false;
}

}  // namespace mg
