#include "minigrad/tensor/error.h"

#include <atomic>
#include <cctype>
#include <string_view>

namespace mg {
namespace {
std::atomic<ErrorContext> g_context{nullptr};
}  // namespace

void set_error_context(ErrorContext context) { g_context.store(context, std::memory_order_release); }

std::string error_context() {
  const ErrorContext context = g_context.load(std::memory_order_acquire);
  return context ? context() : std::string();
}

namespace {
thread_local const char* t_scope_op = nullptr;  // the outermost open OpScope's op
thread_local int t_scope_depth = 0;

// "conv2d" of "conv2d: weight ...", or "" when `what` does not start with an op name and ": ".
std::string_view leading_op(std::string_view what) {
  const size_t colon = what.find(": ");
  if (colon == std::string_view::npos || colon == 0) return {};
  for (char c : what.substr(0, colon))
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '.')) return {};
  return what.substr(0, colon);
}
}  // namespace

OpScope::OpScope(const char* op) noexcept {
  if (t_scope_depth++ == 0) t_scope_op = op;
}
OpScope::~OpScope() {
  if (--t_scope_depth == 0) t_scope_op = nullptr;
}

std::string relabel_for_scope(const std::string& what) {
  if (t_scope_op == nullptr) return what;
  const std::string_view outer(t_scope_op), inner = leading_op(what);
  if (inner == outer) return what;
  if (inner.empty()) return fmt::format("{}: {}", outer, what);
  return fmt::format("{}: {} (raised by its {})", outer, std::string_view(what).substr(inner.size() + 2), inner);
}

}  // namespace mg
