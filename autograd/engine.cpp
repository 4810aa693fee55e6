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
// about, and hands their gradients back instead of adding them into .grad().
#include "minigrad/autograd/engine.h"

#include <unordered_map>
#include <unordered_set>

#include "minigrad/autograd/autocast.h"
#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/autograd/ops/reduce.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops.h"

namespace mg {
namespace {
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
  MG_CHECK(g.dtype() == r.dtype(), DTypeError, "{}: the gradient is {} but the output is {}", op, dtype_name(g.dtype()),
           dtype_name(r.dtype()));
  MG_CHECK(g.shape() == r.shape(), ShapeError, "{}: a gradient of shape {} does not match the output's shape {}", op,
           shape_str(g.shape()), shape_str(r.shape()));
}
const Tensor& data_of(const Tensor& g) { return g; }
Tensor data_of(const Variable& g) { return g.defined() ? g.data() : Tensor(); }
// A private contiguous copy of a given gradient: the rules then read the layout they always read.
Tensor root_grad(const Variable& r, const Tensor& g) { return g.defined() ? g.clone() : ones(r.shape(), r.dtype()); }
Variable root_grad(const Variable& r, const Variable& g) {
  return g.defined() ? g : Variable(ones(r.shape(), r.dtype()));
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
                                              std::unordered_map<Node*, G>& pending, const char* op) {
  MG_CHECK(roots.size() == grads.size(), ValueError, "{}: {} outputs but {} gradients", op, roots.size(), grads.size());
  std::vector<std::shared_ptr<Node>> starts;
  for (size_t i = 0; i < roots.size(); ++i) {
    MG_CHECK(roots[i].defined(), StateError, "{}: output {} is undefined", op, i);
    check_root(roots[i], data_of(grads[i]), op);
    const G g = root_grad(roots[i], grads[i]);
    std::shared_ptr<Node> n = roots[i].gradient_edge();
    if (!pending.count(n.get())) starts.push_back(n);
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

// For mg::grad: the nodes worth running, those with a target (an input's node) somewhere below
// them. Found over a topological order (Kahn's, as the walk itself), read backwards.
std::unordered_set<Node*> leading_to(const std::vector<std::shared_ptr<Node>>& starts,
                                     std::unordered_map<Node*, int> consumers,
                                     const std::unordered_map<Node*, std::vector<size_t>>& targets) {
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
  std::unordered_set<Node*> run, reaches;  // reaches: a target or a node leading to one
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    for (auto& nx : n->next)
      if (nx && reaches.count(nx.get())) run.insert(n);
    if (run.count(n) || targets.count(n)) reaches.insert(n);
  }
  return run;
}

// Where mg::grad collects the gradient of each input: at the node its gradient goes to. `reached`:
// the walk came to that node (a gradient that never arrived there is then zero, not unused).
template <class G>
struct Capture {
  std::unordered_map<Node*, std::vector<size_t>> at;
  std::vector<G> out;
  std::vector<bool> reached;
};

// Steps 2-4. Run nodes whose consumers have all reported. A node that received no gradient at all
// (every path through it was cut: no input needed one, or a backward returned an undefined
// gradient, which counts as zero) does not run, but still reports to the nodes below it, so a node
// reached by another path with a gradient still runs.
template <class G>
void walk(const std::vector<Variable>& roots, const std::vector<G>& grads, bool retain_graph, Capture<G>* capture) {
  const char* op = capture ? "grad" : "backward";
  std::unordered_map<Node*, G> pending;  // summed incoming gradient per node
  const std::vector<std::shared_ptr<Node>> starts = seed_roots(roots, grads, pending, op);
  std::unordered_map<Node*, int> consumers = count_consumers(starts);  // 1.
  std::unordered_set<Node*> worth_running;
  if (capture) worth_running = leading_to(starts, consumers, capture->at);

  std::vector<Node*> ready;
  for (auto& s : starts)
    if (consumers[s.get()] == 0) ready.push_back(s.get());
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    std::vector<G> in_grads;
    bool ran = false;
    const auto target = capture ? capture->at.find(n) : decltype(capture->at.end()){};
    const bool is_target = capture && target != capture->at.end();
    if (is_target)
      for (size_t i : target->second) capture->reached[i] = true;
    const auto it = pending.find(n);
    if (it != pending.end() && capture && !is_target && !worth_running.count(n)) {
      pending.erase(it);  // mg::grad: a gradient that leads to no input is dropped here, not kept to the end
    } else if (it != pending.end()) {
      const G g = capture ? with_hooks(without_retain_grad(n->grad_hooks), it->second, n->name)
                          : with_hooks(n->grad_hooks, it->second, n->name);
      pending.erase(it);
      if (is_target) {
        const G gl = with_hooks(leaf_hooks(*n), g, n->name);  // a leaf input: its own hooks, as backward runs them
        for (size_t i : target->second) capture->out[i] = gl;
      }
      if (!capture || worth_running.count(n)) {
        MG_CHECK(!n->released, StateError,
                 "{}: trying to backward through the graph a second time (at '{}'); its saved "
                 "tensors were freed after the first backward. Pass retain_graph=true to the first "
                 "backward if you need to run it twice",
                 op, n->name);
        check_saved_versions(*n, op);
        in_grads = apply_node(*n, g);
        ran = true;
      }
    }
    if (!retain_graph && (ran || !capture)) n->release();
    for (size_t i = 0; i < n->next.size(); ++i) {
      Node* nx = n->next[i].get();
      if (!nx) continue;
      if (i < in_grads.size() && in_grads[i].defined()) pass_on(fit_gradient(in_grads[i], *n, i), nx, pending);
      if (--consumers[nx] == 0) ready.push_back(nx);
    }
  }
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
  walk<Tensor>(roots, grads, retain_graph, nullptr);
}

// A backward with create_graph records its rules as they are, with float32 or float64 products: an
// AutocastGuard around it would turn them into bfloat16 ones, differentiable once.
void run_backward_graph(const std::vector<Variable>& roots, const VariableList& grads, bool retain_graph) {
  const EnableGradGuard recording;
  const AutocastGuard full_precision(false);
  walk<Variable>(roots, grads, retain_graph, nullptr);
}

VariableList grad(const VariableList& outputs, const VariableList& inputs, const GradOptions& opt) {
  MG_CHECK(!outputs.empty() && !inputs.empty(), ValueError,
           "grad: expected at least one output and one input, got {} and {}", outputs.size(), inputs.size());
  MG_CHECK(opt.grad_outputs.empty() || opt.grad_outputs.size() == outputs.size(), ValueError,
           "grad: {} grad_outputs for {} outputs", opt.grad_outputs.size(), outputs.size());
  std::vector<std::shared_ptr<Node>> edges;  // held: a leaf's accumulator lives as long as someone holds it
  std::unordered_map<Node*, std::vector<size_t>> at;
  for (size_t i = 0; i < inputs.size(); ++i) {
    MG_CHECK(inputs[i].defined(), StateError, "grad: input {} is undefined", i);
    MG_CHECK(inputs[i].requires_grad(), StateError,
             "grad: input {} (shape {}) does not require grad, so it has no gradient", i, shape_str(inputs[i].shape()));
    edges.push_back(inputs[i].gradient_edge());
    at[edges.back().get()].push_back(i);
  }
  const bool retain = opt.retain_graph.value_or(opt.create_graph);
  VariableList result(inputs.size());
  std::vector<bool> reached(inputs.size());
  if (opt.create_graph) {
    const EnableGradGuard recording;
    const AutocastGuard full_precision(false);
    Capture<Variable> c{at, VariableList(inputs.size()), reached};
    VariableList g = opt.grad_outputs;
    g.resize(outputs.size());
    walk<Variable>(outputs, g, retain, &c);
    result = std::move(c.out), reached = c.reached;
  } else {
    Capture<Tensor> c{at, TensorList(inputs.size()), reached};
    TensorList g(outputs.size());
    for (size_t i = 0; i < opt.grad_outputs.size(); ++i) g[i] = data_of(opt.grad_outputs[i]);
    walk<Tensor>(outputs, g, retain, &c);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (c.out[i].defined()) result[i] = Variable(c.out[i], false);
    reached = c.reached;
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
