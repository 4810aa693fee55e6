#include "minigrad/tensor/error.h"

#include <atomic>

namespace mg {
namespace {
std::atomic<ErrorContext> g_context{nullptr};
}  // namespace

void set_error_context(ErrorContext context) { g_context.store(context, std::memory_order_release); }

std::string error_context() {
  const ErrorContext context = g_context.load(std::memory_order_acquire);
  return context ? context() : std::string();
}

}  // namespace mg
