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

Tensor autocast_like(const Tensor& dy, const Tensor& like) {
  return like.dtype() == DType::BFloat16 && dy.dtype() != DType::BFloat16 ? dy.to(DType::BFloat16) : dy;
}

}  // namespace mg
