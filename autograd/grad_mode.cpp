#include "minigrad/autograd/grad_mode.h"

#include <utility>

#include "minigrad/autograd/observer.h"

namespace mg {
namespace {
thread_local bool grad_enabled = true;           // per thread: a NoGradGuard in one thread leaves the others recording
thread_local GraphObserver* observer = nullptr;  // autograd/observer.h: none unless a tool attaches one
}  // namespace

GraphObserver* graph_observer() { return observer; }
GraphObserver* set_graph_observer(GraphObserver* o) { return std::exchange(observer, o); }

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool enabled) { grad_enabled = enabled; }

}  // namespace mg
