#include "minigrad/autograd/grad_mode.h"

namespace mg {
namespace {
thread_local bool grad_enabled = true;  // per thread: a NoGradGuard in one thread leaves the others recording
}  // namespace

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool enabled) { grad_enabled = enabled; }

}  // namespace mg
