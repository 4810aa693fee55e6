// The backward pass.
//
// 1. Collect every node reachable from the roots and count, for each, how many edges point at it.
// 2. Start from the roots with their output gradients. A node runs once all its consumers have
//    handed it their gradient contributions (summed): that is a topological order, reversed.
// 3. Each gradient a node returns is summed down to its input's shape (undoing broadcasting, in
//    this one place for every op) and added to what the next node has received so far.
// 4. Unless retain_graph, each node frees its saved tensors after it ran; running it again is a
//    StateError, as in PyTorch.
#include <unordered_map>

#include "minigrad/autograd/engine.h"
#include "minigrad/tensor/ops.h"

namespace mg {
namespace {
// Input i's gradient as node n returned it, summed down to the input's shape (undoing a
// broadcast). A gradient of another dtype, or of a shape that does not broadcast to the input's,
// is the node's mistake (a custom Function's, usually): the error names it.
Tensor fit_gradient(const Tensor& g, const Node& n, size_t i) {
  const Shape& want = n.input_shapes[i];
  MG_CHECK(i >= n.input_dtypes.size() || g.dtype() == n.input_dtypes[i], DTypeError,
           "backward: '{}' returned a {} gradient for input {}, which is {}", n.name, dtype_name(g.dtype()), i,
           dtype_name(n.input_dtypes[i]));
  bool fits = g.dim() >= static_cast<int64_t>(want.size());
  for (size_t d = 0; fits && d < want.size(); ++d)
    fits = want[d] == 1 || want[d] == g.shape()[g.dim() - want.size() + d];
  MG_CHECK(fits, ShapeError, "backward: '{}' returned a gradient of shape {} for input {} of shape {}", n.name,
           shape_str(g.shape()), i, shape_str(want));
  return sum_to_shape(g, want, n.name);
}

// The roots' gradients, checked (a missing one is ones for a one-element output, as PyTorch's
// implicit gradient) and summed per node into `pending`; returns the nodes to start from (owned:
// a leaf root's accumulator lives only as long as someone holds it).
std::vector<std::shared_ptr<Node>> seed_roots(const std::vector<Variable>& roots, const TensorList& grads,
                                              std::unordered_map<Node*, Tensor>& pending) {
  MG_CHECK(roots.size() == grads.size(), ValueError, "backward: {} roots but {} gradients", roots.size(), grads.size());
  std::vector<std::shared_ptr<Node>> starts;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Variable& r = roots[i];
    MG_CHECK(r.requires_grad(), StateError,
             "backward: the output does not require grad and has no grad_fn (did every input have "
             "requires_grad=false, or was it computed under NoGradGuard?)");
    Tensor g = grads[i];
    if (!g.defined()) {
      MG_CHECK(r.numel() == 1, ShapeError,
               "backward: a gradient can only be created implicitly for a one-element output, got "
               "shape {}; pass the output gradient explicitly",
               shape_str(r.shape()));
      g = ones(r.shape(), r.dtype());
    }
    MG_CHECK(g.dtype() == r.dtype(), DTypeError, "backward: the gradient is {} but the output is {}",
             dtype_name(g.dtype()), dtype_name(r.dtype()));
    MG_CHECK(g.shape() == r.shape(), ShapeError,
             "backward: a gradient of shape {} does not match the output's shape {}", shape_str(g.shape()),
             shape_str(r.shape()));
    std::shared_ptr<Node> n = r.gradient_edge();
    if (pending.count(n.get()))
      add_(pending[n.get()], g);
    else
      pending[n.get()] = g.clone(), starts.push_back(n);
  }
  return starts;
}

// Step 1: every node reachable from `starts`, with how many edges point at it (its consumers).
// An iterative depth-first walk: deep graphs cannot overflow the stack.
std::unordered_map<Node*, int> count_consumers(const std::vector<std::shared_ptr<Node>>& starts) {
  std::unordered_map<Node*, int> consumers;
  std::unordered_map<Node*, bool> seen;
  std::vector<Node*> stack;
  for (auto& s : starts)
    if (!seen[s.get()]) seen[s.get()] = true, stack.push_back(s.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& nx : n->next) {
      if (!nx) continue;
      ++consumers[nx.get()];
      if (!seen[nx.get()]) seen[nx.get()] = true, stack.push_back(nx.get());
    }
  }
  return consumers;
}

// Node n's gradient for input i handed on to the node below: added to what it has received so far.
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

void run_backward(const std::vector<Variable>& roots, const TensorList& grads, bool retain_graph) {
  std::unordered_map<Node*, Tensor> pending;  // summed incoming gradient per node
  const std::vector<std::shared_ptr<Node>> starts = seed_roots(roots, grads, pending);
  std::unordered_map<Node*, int> consumers = count_consumers(starts);  // 1.

  // 2-4. Run nodes whose consumers have all reported. A node that received no gradient at all
  // (every path through it was cut: no input needed one, or a backward returned an undefined
  // gradient, which counts as zero) does not run, but still reports to the nodes below it, so a
  // node reached by another path with a gradient still runs.
  std::vector<Node*> ready;
  for (auto& s : starts)
    if (consumers[s.get()] == 0) ready.push_back(s.get());
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    TensorList in_grads;
    if (auto it = pending.find(n); it != pending.end()) {
      const Tensor g = std::move(it->second);
      pending.erase(it);
      MG_CHECK(!n->released, StateError,
               "backward: trying to backward through the graph a second time (at '{}'); its saved "
               "tensors were freed after the first backward. Pass retain_graph=true to the first "
               "backward if you need to run it twice",
               n->name);
      in_grads = n->apply(n->grad_hooks.empty() ? g : run_grad_hooks(n->grad_hooks, g, n->name));
    }
    if (!retain_graph) n->release();
    for (size_t i = 0; i < n->next.size(); ++i) {
      Node* nx = n->next[i].get();
      if (!nx) continue;
      if (i < in_grads.size() && in_grads[i].defined()) pass_on(fit_gradient(in_grads[i], *n, i), nx, pending);
      if (--consumers[nx] == 0) ready.push_back(nx);
    }
  }
}

}  // namespace mg
