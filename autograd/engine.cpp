// The backward pass.
//
// 1. Collect every node reachable from the roots and count, for each, how many edges point at it.
// 2. Start from the roots with their output gradients. A node runs once all its consumers have
//    handed it their gradient contributions (summed): that is a topological order, reversed.
// 3. Each gradient a node returns is summed down to its input's shape (undoing broadcasting, in
//    this one place for every op) and added to what the next node has received so far.
// 4. Unless retain_graph, each node frees its saved tensors after it ran; running it again is a
//    StateError, as in PyTorch.
//
// The walk is written once for two kinds of gradient. With Tensors (backward) each node's rule runs
// on numbers and nothing is recorded. With Variables (create_graph) grad mode is on while the rules
// run, so the backward pass is itself recorded on the tape, and its results can be differentiated
// again. mg::grad walks the same way but only runs the nodes that lead to the inputs it was asked
// about, and hands their gradients back instead of adding them into .grad(): what differs is
// settled before the walk, in a Plan the loop consults (below).
#include "minigrad/autograd/engine.h"

#include <unordered_map>
#include <unordered_set>

#include "minigrad/autograd/autocast.h"
#include "minigrad/autograd/observer.h"
#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/autograd/ops/reduce.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops.h"

namespace mg {
namespace {
// The dtype of a value's gradient: its own, but float32 for bfloat16 (autograd/autocast.h).
DType grad_dtype(DType value) { return value == DType::BFloat16 ? DType::Float32 : value; }

// Whether node n may return gradient g (dtype, shape) for input i: another dtype, or a shape that
// does not broadcast to the input's, is the node's mistake (a custom Function's, usually).
void check_fits(DType dtype, const Shape& shape, const Node& n, size_t i) {
  const Shape& want = n.input_shapes[i];
  MG_CHECK(i >= n.input_dtypes.size() || dtype == n.input_dtypes[i], DTypeError,
           "backward: '{}' returned a {} gradient for input {}, which is {}", n.name, dtype_name(dtype), i,
           dtype_name(n.input_dtypes[i]));
  bool fits = shape.size() >= want.size();
  for (size_t d = 0; fits && d < want.size(); ++d)
    fits = want[d] == 1 || want[d] == shape[shape.size() - want.size() + d];
  MG_CHECK(fits, ShapeError, "backward: '{}' returned a gradient of shape {} for input {} of shape {}", n.name,
           shape_str(shape), i, shape_str(want));
}

// Input i's gradient as node n returned it, summed down to the input's shape (undoing a broadcast).
Tensor fit_gradient(const Tensor& g, const Node& n, size_t i) {
  check_fits(g.dtype(), g.shape(), n, i);
  return sum_to_shape(g, n.input_shapes[i], n.name);
}
// The same with recorded ops: the sum over the broadcast dims is part of the graph.
Variable fit_gradient(const Variable& g, const Node& n, size_t i) {
  check_fits(g.dtype(), g.shape(), n, i);
  const Shape& want = n.input_shapes[i];
  if (g.shape() == want) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(want.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (want[d - lead] == 1 && g.shape()[d] != 1)) dims.push_back(d);
  return reshape(dims.empty() ? g : sum(g, dims, /*keepdim=*/true), want);
}

// A root's gradient, checked; a missing one is ones for a one-element output (PyTorch's implicit
// gradient). `op` is the public call, "backward" or "grad", for the error texts.
void check_root(const Variable& r, const Tensor& g, const char* op) {
  MG_CHECK(r.requires_grad(), StateError,
           "{}: the output does not require grad and has no grad_fn (did every input have "
           "requires_grad=false, or was it computed under NoGradGuard?)",
           op);
  if (!g.defined()) {
    MG_CHECK(r.numel() == 1, ShapeError,
             "{}: a gradient can only be created implicitly for a one-element output, got "
             "shape {}; pass the output gradient explicitly",
             op, shape_str(r.shape()));
    return;
  }
  MG_CHECK(g.dtype() == grad_dtype(r.dtype()), DTypeError, "{}: the gradient is {} but the output is {}{}", op,
           dtype_name(g.dtype()), dtype_name(r.dtype()),
           r.dtype() == DType::BFloat16 ? " (the gradient of a bfloat16 value is float32)" : "");
  MG_CHECK(g.shape() == r.shape(), ShapeError, "{}: a gradient of shape {} does not match the output's shape {}", op,
           shape_str(g.shape()), shape_str(r.shape()));
}
const Tensor& data_of(const Tensor& g) { return g; }
Tensor data_of(const Variable& g) { return g.defined() ? g.data() : Tensor(); }
// A private contiguous copy of a given gradient: the rules then read the layout they always read.
Tensor root_grad(const Variable& r, const Tensor& g) {
  return g.defined() ? g.clone() : ones(r.shape(), grad_dtype(r.dtype()));
}
Variable root_grad(const Variable& r, const Variable& g) {
  return g.defined() ? g : Variable(ones(r.shape(), grad_dtype(r.dtype())));
}

// Node n's gradient for an input handed on to the node below: added to what it has received so far.
void pass_on(const Tensor& gi, Node* nx, std::unordered_map<Node*, Tensor>& pending) {
  auto it = pending.find(nx);
  if (it == pending.end()) {
    pending[nx] = gi;
    return;
  }
  // Sum into a buffer we own: gi may alias another node's gradient.
  if (it->second.storage().use_count() > 1 || !it->second.is_contiguous()) it->second = it->second.clone();
  add_(it->second, gi);
}
void pass_on(const Variable& gi, Node* nx, std::unordered_map<Node*, Variable>& pending) {
  auto [it, fresh] = pending.try_emplace(nx, gi);
  if (!fresh) it->second = it->second + gi;  // recorded: the sum is part of the new graph
}

// The gradient a node receives after the hooks on its output ran (mg::grad leaves out
// retain_grad's, which would write a .grad()), and what the node makes of it.
GradHooks without_retain_grad(const GradHooks& hooks) {
  GradHooks out;
  for (const auto& h : hooks)
    if (h.first != kRetainGradHook) out.push_back(h);
  return out;
}
Tensor with_hooks(const GradHooks& hooks, const Tensor& g, const std::string& where) {
  return hooks.empty() ? g : run_grad_hooks(hooks, g, where);
}
Variable with_hooks(const GradHooks& hooks, const Variable& g, const std::string& where) {
  if (!hooks.empty()) check_hooks_keep(hooks, g.data(), where);
  return g;
}
// The hooks of the leaf an AccumulateGrad node feeds (mg::grad runs them on a leaf input's gradient).
GradHooks leaf_hooks(const Node& n) {
  if (const auto* acc = dynamic_cast<const AccumulateGrad*>(&n))
    if (const std::shared_ptr<VariableImpl> v = acc->leaf.lock()) return v->grad_hooks;
  return {};
}
// Before a node's rule runs: the tensors it saved must hold what they held when the op ran
// (Node::saved_versions). One written in place since (copy_, fill_, an optimizer step) would make
// the rule compute a gradient from the new numbers, silently wrong; PyTorch refuses it the same way.
void check_saved_versions(const Node& n, const char* op) {
  for (const SavedVersion& s : n.saved_versions) {
    const std::shared_ptr<Storage> storage = s.storage.lock();
    if (!storage || storage->version() == s.version) continue;
    const std::string what =
        s.slot >= 0    ? fmt::format("its input {} (shape {})", s.slot, shape_str(n.input_shapes.at(s.slot)))
        : s.slot == -1 ? fmt::format("its output (shape {})", shape_str(n.out_shape))
                       : fmt::format(
                             "a tensor it captured besides its inputs (shape {}: an index, a mask, targets, or "
                             "what a custom Function saved)",
                             shape_str(s.shape));
    throw StateError(fmt::format(
        "{}: a tensor needed for the gradient has been modified by an in-place operation: '{}'{} saved {}, which is "
        "now at version {}; the op ran at version {}. Hint: something wrote into it after the forward pass (copy_, "
        "fill_, add_, an optimizer step, loading weights); write into a clone() instead, or run backward before the write",
        op, n.name, n.label.empty() ? "" : " (" + n.label + ")", what, storage->version(), s.version));
  }
}

TensorList apply_node(Node& n, const Tensor& g) { return n.apply(g); }
VariableList apply_node(Node& n, const Variable& g) { return n.apply_graph(g); }

// The roots' gradients, checked and summed per node into `pending`; returns the nodes to start
// from (owned: a leaf root's accumulator lives only as long as someone holds it).
template <class G>
std::vector<std::shared_ptr<Node>> seed_roots(const std::vector<Variable>& roots, const std::vector<G>& grads,
                                              std::unordered_map<Node*, G>& pending, const char* op,
                                              GraphObserver* obs) {
  MG_CHECK(roots.size() == grads.size(), ValueError, "{}: {} outputs but {} gradients", op, roots.size(), grads.size());
  std::vector<std::shared_ptr<Node>> starts;
  for (size_t i = 0; i < roots.size(); ++i) {
    MG_CHECK(roots[i].defined(), StateError, "{}: output {} is undefined", op, i);
    check_root(roots[i], data_of(grads[i]), op);
    const G g = root_grad(roots[i], grads[i]);
    std::shared_ptr<Node> n = roots[i].gradient_edge();
    if (!pending.count(n.get())) starts.push_back(n);
    if (obs) obs->seeded(*n, data_of(g));
    pass_on(g, n.get(), pending);
  }
  return starts;
}

// Step 1: every node reachable from `starts`, with how many edges point at it (its consumers).
// An iterative depth-first walk: deep graphs cannot overflow the stack.
std::unordered_map<Node*, int> count_consumers(const std::vector<std::shared_ptr<Node>>& starts) {
  std::unordered_map<Node*, int> consumers;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (auto& s : starts)
    if (seen.insert(s.get()).second) stack.push_back(s.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& nx : n->next) {
      if (!nx) continue;
      ++consumers[nx.get()];
      if (seen.insert(nx.get()).second) stack.push_back(nx.get());
    }
  }
  return consumers;
}

// What the walk is asked for, settled before it starts (PyTorch's GraphTask::exec_info_). A plain
// backward (no targets) runs every node that receives a gradient, runs every hook, collects
// nothing and frees every node it passes. mg::grad names targets: the node each input's gradient
// goes to. It then uses only the nodes with a target below them (and the targets themselves),
// runs no retain_grad hook (which would write a .grad()), collects each input's gradient at its
// target, and frees only the nodes whose rule ran.
template <class G>
class Plan {
 public:
  Plan() = default;  // backward
  Plan(std::unordered_map<const Node*, std::vector<size_t>> targets, size_t inputs)
      : grad_(true), targets_(std::move(targets)), out_(inputs), reached_(inputs) {}

  /// Called after step 1: mg::grad's nodes worth running, those with a target somewhere below
  /// them, found over a topological order (Kahn's, as the walk itself) read backwards.
  void prune(const std::vector<std::shared_ptr<Node>>& starts, std::unordered_map<Node*, int> consumers) {
    if (!grad_) return;
    std::vector<Node*> order, ready;
    for (auto& s : starts)
      if (consumers[s.get()] == 0) ready.push_back(s.get());
    while (!ready.empty()) {
      Node* n = ready.back();
      ready.pop_back();
      order.push_back(n);
      for (auto& nx : n->next)
        if (nx && --consumers[nx.get()] == 0) ready.push_back(nx.get());
    }
    std::unordered_set<const Node*> reaches;  // a target or a node leading to one
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node* n = *it;
      for (auto& nx : n->next)
        if (nx && reaches.count(nx.get())) runs_.insert(n);
      if (runs_.count(n) || targets_.count(n)) reaches.insert(n);
    }
  }

  const char* op() const { return grad_ ? "grad" : "backward"; }
  /// Whether a gradient arriving at n is used at all (else it is dropped there, not kept to the end).
  bool wanted(const Node& n) const { return !grad_ || runs(n) || targets_.count(&n); }
  /// Whether n's rule runs.
  bool runs(const Node& n) const { return !grad_ || runs_.count(&n); }
  /// Whether n's saved tensors are freed after the walk passed it (without retain_graph).
  bool frees(bool ran) const { return !grad_ || ran; }
  /// The hooks on n's output that run on the gradient arriving there.
  GradHooks hooks(const Node& n) const { return grad_ ? without_retain_grad(n.grad_hooks) : n.grad_hooks; }
  /// The walk came to n: an input whose target it is has gradient zero if none arrives.
  void arrive(const Node& n) {
    if (const auto t = targets_.find(&n); t != targets_.end())
      for (size_t i : t->second) reached_[i] = true;
  }
  /// Collect g for the inputs whose target n is, after a leaf input's own hooks, as backward runs them.
  void collect(const Node& n, const G& g) {
    const auto t = targets_.find(&n);
    if (t == targets_.end()) return;
    const G gl = with_hooks(leaf_hooks(n), g, n.name);
    for (size_t i : t->second) out_[i] = gl;
  }
  std::vector<G>& out() { return out_; }
  const std::vector<bool>& reached() const { return reached_; }

 private:
  bool grad_ = false;
  std::unordered_map<const Node*, std::vector<size_t>> targets_;
  std::unordered_set<const Node*> runs_;
  std::vector<G> out_;
  std::vector<bool> reached_;
};

// Steps 2-4. Run nodes whose consumers have all reported. A node that received no gradient at all
// (every path through it was cut: no input needed one, or a backward returned an undefined
// gradient, which counts as zero) does not run, but still reports to the nodes below it, so a node
// reached by another path with a gradient still runs.
// An attached GraphObserver (autograd/observer.h) hears of the walk's start and end, even when a rule throws.
struct ObservedWalk {
  GraphObserver* obs;
  bool completed = false;
  ObservedWalk(GraphObserver* o, bool create_graph) : obs(o) {
    if (obs) obs->walk_started(create_graph);
  }
  ~ObservedWalk() {
    if (obs) obs->walk_finished(completed);
  }
  ObservedWalk(const ObservedWalk&) = delete;
  ObservedWalk& operator=(const ObservedWalk&) = delete;
};

template <class G>
void walk(const std::vector<Variable>& roots, const std::vector<G>& grads, bool retain_graph, Plan<G>& plan) {
  const char* op = plan.op();
  GraphObserver* const obs = graph_observer();  // null unless a tool watches (autograd/observer.h)
  ObservedWalk observed(obs, std::is_same_v<G, Variable>);
  std::unordered_map<Node*, G> pending;  // summed incoming gradient per node
  const std::vector<std::shared_ptr<Node>> starts = seed_roots(roots, grads, pending, op, obs);
  std::unordered_map<Node*, int> consumers = count_consumers(starts);  // 1.
  plan.prune(starts, consumers);

  std::vector<Node*> ready;
  for (auto& s : starts)
    if (consumers[s.get()] == 0) ready.push_back(s.get());
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    plan.arrive(*n);
    std::vector<G> in_grads;
    bool ran = false;
    if (const auto it = pending.find(n); it != pending.end()) {
      const G arrived = std::move(it->second);
      pending.erase(it);
      if (plan.wanted(*n)) {
        const G g = with_hooks(plan.hooks(*n), arrived, n->name);
        if (obs) obs->arrived(*n, data_of(arrived), data_of(g));
        plan.collect(*n, g);
        if (plan.runs(*n)) {
          MG_CHECK(!n->released, StateError,
                   "{}: trying to backward through the graph a second time (at '{}'); its saved "
                   "tensors were freed after the first backward. Pass retain_graph=true to the first "
                   "backward if you need to run it twice",
                   op, n->name);
          check_saved_versions(*n, op);
          in_grads = apply_node(*n, g);
          ran = true;
          if (obs) obs->ran(*n);
        }
      }
    }
    if (!retain_graph && plan.frees(ran)) n->release();
    for (size_t i = 0; i < n->next.size(); ++i) {
      Node* nx = n->next[i].get();
      if (!nx) continue;
      if (i < in_grads.size() && in_grads[i].defined()) {
        const G fitted = fit_gradient(in_grads[i], *n, i);
        if (obs) obs->sent(*n, i, data_of(in_grads[i]), data_of(fitted), *nx);
        pass_on(fitted, nx, pending);
      }
      if (--consumers[nx] == 0) ready.push_back(nx);
    }
  }
  observed.completed = true;
}
}  // namespace

// Hooks run in registration order, each on what the one before returned. A copy of the list is
// walked, so a hook may remove itself.
Tensor run_grad_hooks(const GradHooks& hooks, Tensor g, const std::string& where) {
  const GradHooks copy = hooks;
  for (auto& [id, hook] : copy) {
    Tensor r = hook(g);
    if (!r.defined()) continue;
    MG_CHECK(r.dtype() == g.dtype(), DTypeError,
             "register_hook: a hook on '{}' returned a {} gradient for a {} gradient", where, dtype_name(r.dtype()),
             dtype_name(g.dtype()));
    MG_CHECK(r.shape() == g.shape(), ShapeError,
             "register_hook: a hook on '{}' returned a gradient of shape {} for a gradient of shape {}", where,
             shape_str(r.shape()), shape_str(g.shape()));
    g = std::move(r);
  }
  return g;
}

void check_hooks_keep(const GradHooks& hooks, const Tensor& g, const std::string& where) {
  const GradHooks copy = hooks;
  for (auto& [id, hook] : copy) {
    const Tensor r = hook(g);
    const bool same = !r.defined() || (r.storage() == g.storage() && r.offset() == g.offset() &&
                                       r.shape() == g.shape() && r.strides() == g.strides());
    MG_CHECK(same, NotImplementedError,
             "register_hook: a hook on '{}' replaced a gradient during a backward with create_graph; the "
             "replacement would have no history, so the gradient could not be differentiated again",
             where);
  }
}

void run_backward(const std::vector<Variable>& roots, const TensorList& grads, bool retain_graph) {
  Plan<Tensor> everything;
  walk(roots, grads, retain_graph, everything);
}

// A backward with create_graph records its rules as they are: a product recorded under autocast
// rounds as its forward did (the rule's autocast_like), one recorded outside stays float32 or
// float64, whether or not an AutocastGuard is open around the backward.
void run_backward_graph(const std::vector<Variable>& roots, const VariableList& grads, bool retain_graph) {
  const EnableGradGuard recording;
  const AutocastGuard full_precision(false);
  Plan<Variable> everything;
  walk(roots, grads, retain_graph, everything);
}

VariableList grad(const VariableList& outputs, const VariableList& inputs, const GradOptions& opt) {
  MG_CHECK(!outputs.empty() && !inputs.empty(), ValueError,
           "grad: expected at least one output and one input, got {} and {}", outputs.size(), inputs.size());
  MG_CHECK(opt.grad_outputs.empty() || opt.grad_outputs.size() == outputs.size(), ValueError,
           "grad: {} grad_outputs for {} outputs", opt.grad_outputs.size(), outputs.size());
  std::vector<std::shared_ptr<Node>> edges;  // held: a leaf's accumulator lives as long as someone holds it
  std::unordered_map<const Node*, std::vector<size_t>> at;  // where each input's gradient is collected
  for (size_t i = 0; i < inputs.size(); ++i) {
    MG_CHECK(inputs[i].defined(), StateError, "grad: input {} is undefined", i);
    MG_CHECK(inputs[i].requires_grad(), StateError,
             "grad: input {} (shape {}) does not require grad, so it has no gradient", i, shape_str(inputs[i].shape()));
    edges.push_back(inputs[i].gradient_edge());
    at[edges.back().get()].push_back(i);
  }
  const bool retain = opt.retain_graph.value_or(opt.create_graph);
  VariableList result(inputs.size());
  std::vector<bool> reached;
  if (opt.create_graph) {
    const EnableGradGuard recording;
    const AutocastGuard full_precision(false);
    Plan<Variable> plan(at, inputs.size());
    VariableList g = opt.grad_outputs;
    g.resize(outputs.size());
    walk(outputs, g, retain, plan);
    result = std::move(plan.out()), reached = plan.reached();
  } else {
    Plan<Tensor> plan(at, inputs.size());
    TensorList g(outputs.size());
    for (size_t i = 0; i < opt.grad_outputs.size(); ++i) g[i] = data_of(opt.grad_outputs[i]);
    walk(outputs, g, retain, plan);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (plan.out()[i].defined()) result[i] = Variable(plan.out()[i], false);
    reached = plan.reached();
  }
  // An input the walk reached whose gradient never arrived (every rule on the way had a zero
  // derivative for it, such as relu's backward with respect to x) has gradient zero.
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!result[i].defined() && reached[i]) result[i] = Variable(zeros(inputs[i].shape(), inputs[i].dtype()));
  for (size_t i = 0; i < inputs.size(); ++i)
    MG_CHECK(result[i].defined() || opt.allow_unused, ValueError,
             "grad: input {} (shape {}) was not used to compute the outputs; pass allow_unused=true to get an "
             "undefined gradient for it",
             i, shape_str(inputs[i].shape()));
  return result;
}

}  // namespace mg
