#include "minigrad/autograd/autocast.h"

namespace mg {
namespace {
thread_local bool autocast_enabled = false;     // per thread, as GradMode
thread_local AutocastOptions autocast_options;  // the innermost AutocastGuard's

// y = bfloat16(x) or float32(x)     x: float32 or bfloat16, any shape
// dx = dy (float32 either way: the gradient of a bfloat16 value is float32)
Variable cast(const Variable& x, Tensor copy) {
  return record("autocast", std::move(copy), {x}, keep(),
                []<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> { return {dy}; });
}
}  // namespace

bool AutocastMode::is_enabled() { return autocast_enabled; }
void AutocastMode::set_enabled(bool enabled) { autocast_enabled = enabled; }
AutocastOptions AutocastMode::options() { return autocast_options; }
void AutocastMode::set_options(AutocastOptions options) { autocast_options = options; }
bool AutocastMode::bfloat16_outputs() { return autocast_enabled && autocast_options.bfloat16_outputs; }

Tensor autocast_output(Tensor y) {
  if (!AutocastMode::bfloat16_outputs() || !y.defined() || y.dtype() != DType::Float32) return y;
  return y.to(DType::BFloat16);
}

Tensor autocast(const Tensor& t) {
  if (!autocast_enabled || !t.defined() || t.dtype() != DType::Float32) return t;
  // the copy the kernel that wrote t made beside it (layer norm, GELU), if t is unchanged since
  const Tensor copy = bf16_copy_of(t);
  return copy.defined() ? copy : t.to(DType::BFloat16);
}

Variable autocast(const Variable& v) {
  if (!autocast_enabled || !v.defined() || v.dtype() != DType::Float32) return v;
  return cast(v, autocast(v.data()));
}

Variable autocast_float32(const Variable& v) { return autocast_enabled ? widened(v) : v; }

Variable widened(const Variable& v) {
  if (!v.defined() || v.dtype() != DType::BFloat16) return v;
  return cast(v, v.data().to(DType::Float32));
}

Tensor autocast_like(const Tensor& dy, std::initializer_list<Tensor> operands) {
  return bfloat16_involved(operands) ? dy.to(DType::BFloat16) : dy;
}

Variable autocast_like(const Variable& dy, std::initializer_list<Variable> operands) {
  for (const Variable& v : operands)
    if (v.defined() && v.dtype() == DType::BFloat16) return cast(dy, dy.data().to(DType::BFloat16));
  return dy;
}

bool bfloat16_involved(std::initializer_list<Tensor> tensors) {
  for (const Tensor& t : tensors)
    if (t.defined() && t.dtype() == DType::BFloat16) return true;
  return false;
}

}  // namespace mg
