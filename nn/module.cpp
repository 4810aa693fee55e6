#include "minigrad/nn/module.h"

#include <algorithm>
#include <atomic>
#include <set>

#include <fmt/format.h>

namespace mg::nn {
namespace {
// The modules whose forward is running on this thread, innermost last (ForwardScope).
thread_local std::vector<const Module*> t_forward_stack;

// The prefix of an error raised inside a forward: the innermost running module, named by its
// path in the model. Nothing for a module that is not part of a model (the caller knows which
// one they called).
std::string forward_context() {
  if (t_forward_stack.empty()) return "";
  const Module* m = t_forward_stack.back();
  if (m->parent() == nullptr) return "";
  return fmt::format("in {} ({}): ", m->path(), m->type_name());
}
const bool g_context_installed = (set_error_context(&forward_context), true);

// Hook ids are unique in the process, so a handle can never take off another module's hook.
std::atomic<int64_t> g_next_hook_id{0};

void check_name(const std::string& name, const char* what) {
  MG_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError,
           "register_{}: name \"{}\" must be non-empty and contain no '.'", what, name);
}
}  // namespace

Module::Module() = default;
Module::~Module() = default;

// A name may be used once in a module, by a parameter, a buffer or a submodule.
void Module::check_unused(const std::string& name, const char* what) const {
  auto clash = [&](const char* kind) {
    return ValueError(fmt::format("register_{}: \"{}\" is already a {} of {}", what, name, kind, type_name()));
  };
  for (auto& [n, p] : params_)
    if (n == name) throw clash("parameter");
  for (auto& [n, b] : buffers_)
    if (n == name) throw clash("buffer");
  for (auto& [n, c] : children_)
    if (n == name) throw clash("submodule");
}

Variable& Module::register_parameter(const std::string& name, Variable& slot, Tensor data, bool requires_grad) {
  check_name(name, "parameter");
  check_unused(name, "parameter");
  MG_CHECK(data.defined(), StateError, "register_parameter: \"{}\" is an undefined tensor", name);
  slot = Variable(std::move(data), requires_grad);
  slot.set_name(name);
  params_.emplace_back(name, &slot);
  return slot;
}

void Module::register_parameter(const std::string& name, Tensor data, bool requires_grad) {
  check_name(name, "parameter");
  check_unused(name, "parameter");
  MG_CHECK(data.defined(), StateError, "register_parameter: \"{}\" is an undefined tensor", name);
  owned_params_.emplace_back();
  register_parameter(name, owned_params_.back(), std::move(data), requires_grad);
}

Tensor& Module::register_buffer(const std::string& name, Tensor& slot, Tensor data) {
  check_name(name, "buffer");
  check_unused(name, "buffer");
  MG_CHECK(data.defined(), StateError, "register_buffer: \"{}\" is an undefined tensor", name);
  slot = std::move(data);
  buffers_.emplace_back(name, &slot);
  return slot;
}

void Module::register_buffer(const std::string& name, Tensor data) {
  check_name(name, "buffer");
  check_unused(name, "buffer");
  MG_CHECK(data.defined(), StateError, "register_buffer: \"{}\" is an undefined tensor", name);
  owned_buffers_.emplace_back();
  register_buffer(name, owned_buffers_.back(), std::move(data));
}

void Module::add_child(const std::string& name, Module* child) {
  check_name(name, "module");
  check_unused(name, "module");
  MG_CHECK(child != nullptr, ValueError, "register_module: \"{}\" is a null module", name);
  // A module inside itself would make every walk of the tree endless.
  for (auto& [path, m] : child->named_modules())
    MG_CHECK(m != this, ValueError, "register_module: registering \"{}\" ({}) in {} would put {} inside itself", name,
             child->type_name(), type_name(), type_name());
  children_.emplace_back(name, child);
  if (child->parent() == nullptr) {  // the first registration names it in error messages
    child->parent_ = self_;
    child->name_in_parent_ = name;
  }
}

std::string Module::path() const {
  std::string out;
  for (const Module* m = this; m->parent() != nullptr; m = m->parent())
    out = out.empty() ? m->name_in_parent_ : m->name_in_parent_ + "." + out;
  return out;
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters(bool recurse, bool remove_duplicate) const {
  std::vector<std::pair<std::string, Variable>> all;
  for (auto& [n, slot] : params_)
    if (slot->defined()) all.emplace_back(n, *slot);
  if (recurse)
    for (auto& [cname, child] : children_)
      for (auto& [pname, p] : child->named_parameters(true, false)) all.emplace_back(cname + "." + pname, p);
  if (!remove_duplicate) return all;
  // A parameter reached twice (tied weights, a submodule registered under two names) is listed
  // once, under the first name, as in PyTorch: an optimizer must not step it twice.
  std::vector<std::pair<std::string, Variable>> out;
  std::set<VariableImpl*> seen;
  for (auto& [n, p] : all)
    if (seen.insert(p.impl().get()).second) out.emplace_back(n, p);
  return out;
}

std::vector<Variable> Module::parameters(bool recurse) const {
  std::vector<Variable> out;
  for (auto& [n, p] : named_parameters(recurse)) out.push_back(p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, slot] : buffers_)
    if (slot->defined()) out.emplace_back(n, *slot);
  if (recurse)
    for (auto& [cname, child] : children_)
      for (auto& [bname, b] : child->named_buffers(true)) out.emplace_back(cname + "." + bname, b);
  return out;
}

std::vector<Module*> Module::children() const {
  std::vector<Module*> out;
  for (auto& [n, c] : children_) out.push_back(c);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  std::set<Module*> seen{this};
  for (auto& [cname, child] : children_)
    for (auto& [sub, m] : child->named_modules())
      if (seen.insert(m).second) out.emplace_back(sub.empty() ? cname : cname + "." + sub, m);  // each module once
  return out;
}

Variable Module::parameter(const std::string& name) const {
  for (auto& [n, p] : named_parameters(true, false))  // a tied parameter answers to every name
    if (n == name) return p;
  throw ValueError(fmt::format("parameter: {} has no parameter \"{}\"", type_name(), name));
}

Tensor Module::buffer(const std::string& name) const {
  for (auto& [n, b] : named_buffers())
    if (n == name) return b;
  throw ValueError(fmt::format("buffer: {} has no buffer \"{}\"", type_name(), name));
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad() {
  for (auto& p : parameters()) p.zero_grad();
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& p : parameters()) n = checked_add(n, p.numel(), "num_parameters");  // expanded views can be huge
  return n;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
}

void Module::to(DType dtype) {
  // As PyTorch's Module.to(dtype): floating dtypes only, and only floating tensors convert.
  MG_CHECK(
      dtype != DType::BFloat16, DTypeError,
      "Module::to: minigrad keeps parameters in float32 or float64, not "
      "bfloat16 (it does not compute in bfloat16); to train with bfloat16 matrix products, keep float32 parameters "
      "and run the forward inside an mg::AutocastGuard");
  MG_CHECK(is_floating(dtype), DTypeError,
           "Module::to: {} is not a floating dtype (a module's parameters and buffers "
           "convert to float32 or float64)",
           dtype_name(dtype));
  // Through the slots, so the members change too. A parameter tied into two slots is one
  // Variable: set_data converts it once for both.
  for (auto& [n, p] : params_)
    if (p->defined() && is_floating(p->dtype()) && p->dtype() != dtype) p->set_data(p->data().to(dtype));
  for (auto& [n, b] : buffers_)
    if (b->defined() && is_floating(b->dtype())) *b = b->to(dtype);
  for (auto& [n, c] : children_) c->to(dtype);
}

void Module::summary_into(std::string& out, int indent) const {
  out += type_name() + "(" + extra_repr();
  const std::string pad(indent + 2, ' ');
  if (params_.empty() && children_.empty()) {
    out += ")";
    return;
  }
  out += ")";
  for (auto& [n, p] : params_)
    if (p->defined())
      out += fmt::format("\n{}{}: {}{}", pad, n, shape_str(p->shape()), p->requires_grad() ? "" : " (frozen)");
  for (auto& [n, c] : children_) {
    out += fmt::format("\n{}({}): ", pad, n);
    c->summary_into(out, indent + 2);
  }
  if (!children_.empty()) out += fmt::format("\n{}-- {} parameters", pad, num_parameters());
}

std::string Module::summary() const {
  std::string out;
  summary_into(out, 0);
  return out + fmt::format("\nTotal parameters: {}", num_parameters());
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.summary(); }

// ---------------------------------------------------------------- hooks

HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  MG_CHECK(hook != nullptr, ValueError, "register_forward_pre_hook: the hook is empty ({})", type_name());
  check_runs_hooks("register_forward_pre_hook");
  const int64_t id = g_next_hook_id++;
  pre_hooks_.emplace_back(id, std::move(hook));
  return HookHandle(self_, id);
}

// A hook on a module nothing calls through nn::call would never fire: say so at once.
void Module::check_runs_hooks(const char* what) const {
  MG_CHECK(runs_hooks(), ValueError,
           "{}: {} derives from nn::Module alone, so nothing runs hooks around its forward; derive it from "
           "nn::Callable<{}> and call it as model(x) (as PyTorch calls model(x), not model.forward(x))",
           what, type_name(), type_name());
}

HookHandle Module::register_forward_hook(ForwardHook hook) {
  MG_CHECK(hook != nullptr, ValueError, "register_forward_hook: the hook is empty ({})", type_name());
  check_runs_hooks("register_forward_hook");
  const int64_t id = g_next_hook_id++;
  forward_hooks_.emplace_back(id, std::move(hook));
  return HookHandle(self_, id);
}

void HookHandle::remove() {
  const std::shared_ptr<Module*> box = module_.lock();
  if (!box) return;
  auto drop = [&](auto& hooks) { std::erase_if(hooks, [&](const auto& h) { return h.first == id_; }); };
  drop((*box)->pre_hooks_);
  drop((*box)->forward_hooks_);
  module_.reset();
}

ForwardScope::ForwardScope(const Module& module) {
  (void)g_context_installed;
  t_forward_stack.push_back(&module);
}

ForwardScope::~ForwardScope() { t_forward_stack.pop_back(); }

void Module::run_forward_pre_hooks(std::vector<Variable>& inputs) const {
  const auto hooks = pre_hooks_;  // a hook may remove itself
  const size_t n = inputs.size();
  std::vector<bool> was_defined;  // an optional input (a state) may be undefined to start with
  for (const Variable& v : inputs) was_defined.push_back(v.defined());
  for (auto& [id, hook] : hooks) {
    hook(*this, inputs);
    MG_CHECK(inputs.size() == n, ValueError,
             "forward pre-hook: {} inputs became {}; a hook may replace inputs, not add or drop them", n,
             inputs.size());
    for (size_t i = 0; i < n; ++i)
      MG_CHECK(inputs[i].defined() || !was_defined[i], StateError,
               "forward pre-hook: input {} of {} was replaced by an undefined Variable", i, type_name());
  }
}

void Module::run_forward_hooks(const std::vector<Variable>& inputs, std::vector<Variable>& outputs) const {
  const auto hooks = forward_hooks_;
  const size_t n = outputs.size();
  for (auto& [id, hook] : hooks) {
    hook(*this, inputs, outputs);
    MG_CHECK(outputs.size() == n, ValueError,
             "forward hook: {} outputs became {}; a hook may replace outputs, not add or drop them", n, outputs.size());
    for (size_t i = 0; i < n; ++i)
      MG_CHECK(outputs[i].defined(), StateError, "forward hook: output {} of {} was replaced by an undefined Variable",
               i, type_name());
  }
}

}  // namespace mg::nn
