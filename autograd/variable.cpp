#include "minigrad/autograd/variable.h"

#include "minigrad/autograd/engine.h"
#include "minigrad/tensor/ops.h"

namespace mg {

Variable::Variable(Tensor data, bool requires_grad) : impl_(std::make_shared<VariableImpl>()) {
  MG_CHECK(data.defined(), StateError, "Variable: cannot wrap an undefined tensor");
  MG_CHECK(!requires_grad || is_floating(data.dtype()), DTypeError,
           "Variable: only floating tensors can require gradients, got {}", dtype_name(data.dtype()));
  impl_->data = std::move(data);
  set_requires_grad(requires_grad);
}

Variable Variable::from_node(Tensor data, std::shared_ptr<Node> grad_fn) {
  Variable v;
  v.impl_ = std::make_shared<VariableImpl>();
  v.impl_->data = std::move(data);
  v.impl_->requires_grad = true;
  v.impl_->grad_fn = std::move(grad_fn);
  if (v.impl_->grad_fn) v.impl_->grad_fn->output = v.impl_;
  return v;
}

Variable Variable::from_impl(std::shared_ptr<VariableImpl> impl) {
  Variable v;
  v.impl_ = std::move(impl);
  return v;
}

#define MG_CHECK_DEFINED(op) MG_CHECK(impl_, StateError, "{}: the variable is undefined", op)

const Tensor& Variable::data() const {
  MG_CHECK_DEFINED("data");
  return impl_->data;
}
void Variable::set_data(Tensor data) const {
  MG_CHECK_DEFINED("set_data");
  MG_CHECK(data.defined(), StateError, "set_data: the new tensor is undefined");
  MG_CHECK(!impl_->requires_grad || is_floating(data.dtype()), DTypeError,
           "set_data: a variable that requires grad needs floating data, got {}", dtype_name(data.dtype()));
  impl_->data = std::move(data);
  if (impl_->grad.defined() &&
      (impl_->grad.shape() != impl_->data.shape() || impl_->grad.dtype() != impl_->data.dtype()))
    impl_->grad = Tensor();  // a gradient of the old shape or dtype no longer applies
}

const Tensor& Variable::grad() const {
  MG_CHECK_DEFINED("grad");
  return impl_->grad;
}
void Variable::set_grad(Tensor grad) const {
  MG_CHECK_DEFINED("set_grad");
  if (grad.defined()) {
    MG_CHECK(grad.dtype() == impl_->data.dtype(), DTypeError, "set_grad: the gradient is {} but the variable is {}",
             dtype_name(grad.dtype()), dtype_name(impl_->data.dtype()));
    MG_CHECK(grad.shape() == impl_->data.shape(), ShapeError,
             "set_grad: a gradient of shape {} does not match the variable's shape {}", shape_str(grad.shape()),
             shape_str(impl_->data.shape()));
  }
  impl_->grad = std::move(grad);
}
bool Variable::requires_grad() const { return impl_ && impl_->requires_grad; }
Variable& Variable::set_requires_grad(bool requires_grad) {
  MG_CHECK_DEFINED("set_requires_grad");
  MG_CHECK(is_leaf(), StateError,
           "set_requires_grad: only leaf variables can change requires_grad (this one was made by "
           "'{}'); use detach() to get a leaf",
           impl_->grad_fn->name);
  MG_CHECK(!requires_grad || is_floating(impl_->data.dtype()), DTypeError,
           "set_requires_grad: only floating tensors can require gradients, got {}", dtype_name(impl_->data.dtype()));
  impl_->requires_grad = requires_grad;
  return *this;
}
bool Variable::is_leaf() const { return !impl_ || impl_->grad_fn == nullptr; }
const std::shared_ptr<Node>& Variable::grad_fn() const {
  MG_CHECK_DEFINED("grad_fn");
  return impl_->grad_fn;
}
Variable Variable::detach() const {
  MG_CHECK_DEFINED("detach");
  Variable v(impl_->data, false);
  v.impl_->name = impl_->name;
  return v;
}
const std::string& Variable::name() const {
  MG_CHECK_DEFINED("name");
  return impl_->name;
}
Variable& Variable::set_name(std::string name) {
  MG_CHECK_DEFINED("set_name");
  impl_->name = std::move(name);
  return *this;
}

void Variable::backward(const Tensor& grad, bool retain_graph) const {
  MG_CHECK_DEFINED("backward");
  run_backward({*this}, {grad}, retain_graph);
}

std::shared_ptr<Node> Variable::gradient_edge() const {
  if (!impl_ || !impl_->requires_grad) return nullptr;
  if (impl_->grad_fn) return impl_->grad_fn;
  // One AccumulateGrad per leaf, shared by every op that uses it, so the engine sees a single
  // node and sums all contributions before adding them to .grad once.
  std::shared_ptr<AccumulateGrad> acc = impl_->accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>();
    acc->name = impl_->name.empty() ? "leaf" : impl_->name;
    acc->leaf = impl_;
    acc->out_shape = impl_->data.shape();
    impl_->accumulator = acc;
  }
  return acc;
}

TensorList AccumulateGrad::apply(const Tensor& g_in) {
  std::shared_ptr<VariableImpl> v = leaf.lock();
  if (!v) return {};  // the leaf is gone; nobody can read its gradient
  const Tensor g = v->grad_hooks.empty() ? g_in : run_grad_hooks(v->grad_hooks, g_in, name);
  if (!v->grad.defined()) {
    v->grad = g.clone();  // a private contiguous copy: g may be a view of another buffer
  } else {
    add_(v->grad, g);
  }
  if (!v->post_accumulate_hooks.empty()) {
    const auto hooks = v->post_accumulate_hooks;
    const Variable leaf_variable = Variable::from_impl(v);
    for (auto& [id, hook] : hooks) hook(leaf_variable);
  }
  return {};
}

GradHookHandle Variable::register_hook(GradHook hook) const {
  MG_CHECK(impl_, StateError, "register_hook: the variable is undefined");
  MG_CHECK(hook != nullptr, ValueError, "register_hook: the hook is empty");
  MG_CHECK(impl_->requires_grad, StateError,
           "register_hook: the variable does not require grad, so no gradient will ever reach the hook");
  GradHookHandle h;
  h.id_ = impl_->next_hook_id++;
  if (impl_->grad_fn) {  // a non-leaf: its gradient is what its op receives
    impl_->grad_fn->grad_hooks.emplace_back(h.id_, std::move(hook));
    h.owner_ = impl_->grad_fn, h.hooks_ = &impl_->grad_fn->grad_hooks;
  } else {
    impl_->grad_hooks.emplace_back(h.id_, std::move(hook));
    h.owner_ = impl_, h.hooks_ = &impl_->grad_hooks;
  }
  return h;
}

void Variable::retain_grad() const {
  MG_CHECK(impl_, StateError, "retain_grad: the variable is undefined");
  MG_CHECK(impl_->requires_grad, StateError, "retain_grad: the variable does not require grad, so it never gets one");
  if (!impl_->grad_fn || impl_->retains_grad) return;  // a leaf keeps its gradient anyway
  impl_->retains_grad = true;
  // The hook holds the variable weakly: the node must not keep its own output alive.
  std::weak_ptr<VariableImpl> weak = impl_;
  impl_->grad_fn->grad_hooks.emplace_back(impl_->next_hook_id++, [weak](const Tensor& g) {
    if (std::shared_ptr<VariableImpl> v = weak.lock()) v->grad = v->grad.defined() ? v->grad + g : g.clone();
    return Tensor();
  });
}

bool Variable::retains_grad() const { return impl_ && impl_->retains_grad; }

GradHookHandle Variable::register_post_accumulate_grad_hook(std::function<void(const Variable&)> hook) const {
  MG_CHECK(impl_, StateError, "register_post_accumulate_grad_hook: the variable is undefined");
  MG_CHECK(hook != nullptr, ValueError, "register_post_accumulate_grad_hook: the hook is empty");
  MG_CHECK(is_leaf() && impl_->requires_grad, StateError,
           "register_post_accumulate_grad_hook: only a leaf that requires grad accumulates a gradient (this one {})",
           is_leaf() ? "does not require grad" : "was made by '" + impl_->grad_fn->name + "'");
  GradHookHandle h;
  h.id_ = impl_->next_hook_id++;
  impl_->post_accumulate_hooks.emplace_back(h.id_, std::move(hook));
  h.owner_ = impl_, h.post_hooks_ = &impl_->post_accumulate_hooks;
  return h;
}

void GradHookHandle::remove() {
  const std::shared_ptr<void> alive = owner_.lock();
  if (!alive) return;
  auto drop = [&](auto* hooks) {
    if (hooks) std::erase_if(*hooks, [&](const auto& e) { return e.first == id_; });
  };
  drop(hooks_);
  drop(post_hooks_);
  owner_.reset();
}

Variable record(std::string name, Tensor out, const std::vector<Variable>& inputs, LambdaNode::Backward backward) {
  bool any = false;
  if (GradMode::is_enabled())
    for (const Variable& v : inputs) any = any || v.requires_grad();
  if (!any) return Variable(std::move(out), false);
  auto node = std::make_shared<LambdaNode>();
  node->name = std::move(name);
  for (const Variable& v : inputs) {
    node->next.push_back(v.gradient_edge());
    node->input_shapes.push_back(v.shape());
    node->input_dtypes.push_back(v.dtype());
  }
  node->out_shape = out.shape();
  node->backward = std::move(backward);
  return Variable::from_node(std::move(out), std::move(node));
}

std::ostream& operator<<(std::ostream& os, const Variable& v) {
  if (!v.defined()) return os << "Variable(undefined)";
  std::vector<std::string> suffixes;
  if (v.grad_fn())
    suffixes.push_back("grad_fn=<" + v.grad_fn()->name + ">");
  else if (v.requires_grad())
    suffixes.push_back("requires_grad=True");
  return os << format_tensor(v.data(), suffixes);
}

}  // namespace mg
