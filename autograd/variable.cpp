#include "minigrad/autograd/variable.h"

#include "minigrad/autograd/engine.h"
#include "minigrad/autograd/observer.h"
#include "minigrad/autograd/ops/elementwise.h"
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

Variable Variable::from_edge(Tensor data, std::shared_ptr<Node> edge) {
  if (!edge) return Variable(std::move(data), false);
  Variable v;
  v.impl_ = std::make_shared<VariableImpl>();
  v.impl_->data = std::move(data);
  v.impl_->requires_grad = true;
  v.impl_->grad_fn = std::move(edge);  // not registered as the node's output: the node has one already
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
  impl_->grad_graph.reset();
}
Variable Variable::grad_variable() const {
  MG_CHECK_DEFINED("grad_variable");
  if (impl_->grad_graph) return from_impl(impl_->grad_graph);
  return impl_->grad.defined() ? Variable(impl_->grad, false) : Variable();
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
  if (impl_->grad_fn) impl_->grad_fn->label = name;  // to_dot finds an op's output only through its node
  impl_->name = std::move(name);
  return *this;
}

void Variable::backward(const Tensor& grad, bool retain_graph) const {
  MG_CHECK_DEFINED("backward");
  run_backward({*this}, {grad}, retain_graph);
}

void Variable::backward(const BackwardOptions& options) const {
  MG_CHECK_DEFINED("backward");
  const bool retain = options.retain_graph.value_or(options.create_graph);
  if (!options.create_graph) return run_backward({*this}, {options.gradient}, retain);
  run_backward_graph({*this}, {options.gradient.defined() ? Variable(options.gradient) : Variable()}, retain);
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

namespace {
// Add g (after the leaf's hooks) into v's .grad, then run its post-accumulate hooks.
void accumulate(const std::shared_ptr<VariableImpl>& v, const Tensor& g) {
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
}
}  // namespace

TensorList AccumulateGrad::apply(const Tensor& g_in) {
  std::shared_ptr<VariableImpl> v = leaf.lock();
  if (!v) return {};  // the leaf is gone; nobody can read its gradient
  const Tensor g = v->grad_hooks.empty() ? g_in : run_grad_hooks(v->grad_hooks, g_in, name);
  if (v->grad_graph) {  // an earlier backward with create_graph: its history stays, this part has none
    const EnableGradGuard recording;
    v->grad_graph = (Variable::from_impl(v->grad_graph) + Variable(g.clone())).impl();
  }
  accumulate(v, g);
  return {};
}

VariableList AccumulateGrad::apply_graph(const Variable& g) {
  std::shared_ptr<VariableImpl> v = leaf.lock();
  if (!v) return {};
  if (!v->grad_hooks.empty()) check_hooks_keep(v->grad_hooks, g.data(), name);
  const Variable sum = v->grad_graph       ? Variable::from_impl(v->grad_graph) + g
                       : v->grad.defined() ? Variable(v->grad.clone()) + g
                                           : g;
  v->grad_graph = sum.impl();  // before the post-accumulate hooks, which may read grad_variable()
  accumulate(v, g.data());
  return {};
}

VariableList Node::apply_graph(const Variable& g) {
  // The gradients as apply() computes them, each recorded as the output of a node that depends on
  // g and on this op's inputs, and whose backward is the error: differentiating them again needs
  // a rule this op does not have.
  const TensorList t = apply(g.data());
  VariableList out(t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    if (!t[i].defined()) continue;
    auto e = std::make_shared<LambdaNode>();
    e->name = name + "_backward";
    e->next.push_back(g.gradient_edge());
    e->input_shapes.push_back(g.shape());
    e->input_dtypes.push_back(g.dtype());
    for (size_t j = 0; j < next.size(); ++j) {
      e->next.push_back(next[j]);
      e->input_shapes.push_back(j < input_shapes.size() ? input_shapes[j] : Shape{});
      e->input_dtypes.push_back(j < input_dtypes.size() ? input_dtypes[j] : t[i].dtype());
    }
    e->out_shape = t[i].shape();
    e->backward = [op = name](const Tensor&, const Node&) -> TensorList {
      throw NotImplementedError(fmt::format(
          "backward: '{}' is not differentiable twice: its backward has no derivative rule of its own, so the "
          "gradient it computed (with create_graph) cannot be differentiated again (docs/03's table lists the "
          "ops that are differentiable twice)",
          op));
    };
    out[i] = Variable::from_node(t[i], e);
  }
  return out;
}

VariableList LambdaNode::apply_graph(const Variable& grad_out) {
  if (!graph_backward) return Node::apply_graph(grad_out);
  return graph_backward(grad_out, *this);
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
  impl_->grad_fn->grad_hooks.emplace_back(kRetainGradHook, [weak](const Tensor& g) {
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

namespace record_impl {
bool will_record(const std::vector<Variable>& inputs) {
  bool any = false;
  if (GradMode::is_enabled())
    for (const Variable& v : inputs) any = any || v.requires_grad();
  return any;
}

Variable unpack_saved(const Tensor& data, int input, Node& self) {
  if (!data.defined()) return Variable();  // an optional input that was not given
  if (input == kOutput) return Variable::from_edge(data, self.shared_from_this());
  return Variable::from_edge(data, self.next.at(static_cast<size_t>(input)));
}

Variable record_node(std::string name, Tensor out, const std::vector<Variable>& inputs, LambdaNode::Backward backward,
                     LambdaNode::GraphBackward graph_backward, std::span<const int> kept,
                     const std::vector<Tensor>& also_saved) {
  auto node = std::make_shared<LambdaNode>();
  node->name = std::move(name);
  for (const Variable& v : inputs) {  // an undefined input (no bias) keeps its slot, needing nothing
    node->next.push_back(v.gradient_edge());
    node->input_shapes.push_back(v.defined() ? v.shape() : Shape{});
    // a bfloat16 value's gradient is float32 (autograd/autocast.h)
    const DType dtype = v.defined() ? v.dtype() : out.dtype();
    node->input_dtypes.push_back(dtype == DType::BFloat16 ? DType::Float32 : dtype);
  }
  for (int k : kept) {
    const Variable* in = k == kOutput ? nullptr : &inputs.at(static_cast<size_t>(k));
    if (in && !in->defined()) continue;
    const Tensor& t = in ? in->data() : out;
    node->saved_versions.push_back({t.storage(), t.version(), k, {}});
  }
  for (size_t i = 0; i < also_saved.size(); ++i)
    if (also_saved[i].defined())
      node->saved_versions.push_back(
          {also_saved[i].storage(), also_saved[i].version(), -2 - static_cast<int>(i), also_saved[i].shape()});
  node->out_shape = out.shape();
  node->backward = std::move(backward);
  node->graph_backward = std::move(graph_backward);
  if (GraphObserver* o = graph_observer()) o->recorded(*node, out, inputs);  // autograd/observer.h
  return Variable::from_node(std::move(out), std::move(node));
}
}  // namespace record_impl

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
