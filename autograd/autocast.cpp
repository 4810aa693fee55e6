#include "minigrad/autograd/autocast.h"

namespace mg {
namespace {
thread_local bool autocast_enabled = false;  // per thread, as GradMode
}  // namespace

bool AutocastMode::is_enabled() { return autocast_enabled; }
void AutocastMode::set_enabled(bool enabled) { autocast_enabled = enabled; }

}  // namespace mg
