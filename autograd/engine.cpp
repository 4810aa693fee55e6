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

#include "autograd/engine.h"
#include "tensor/ops.h"

namespace mg {

void run_backward(const std::vector<Variable>& roots, const TensorList& grads, bool retain_graph) {
  MG_CHECK(roots.size() == grads.size(), ValueError, "backward: {} roots but {} gradients",
           roots.size(), grads.size());
  std::unordered_map<Node*, Tensor> pending;  // summed incoming gradient per node
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
    MG_CHECK(g.shape() == r.shape() && g.dtype() == r.dtype(), ShapeError,
             "backward: gradient {} {} does not match the output {} {}", dtype_name(g.dtype()),
             shape_str(g.shape()), dtype_name(r.dtype()), shape_str(r.shape()));
    std::shared_ptr<Node> n = r.gradient_edge();
    if (pending.count(n.get())) add_(pending[n.get()], g);
    else pending[n.get()] = g.clone(), starts.push_back(n);
  }

  // 1. Reachable nodes and how many consumers each has (iterative DFS: deep graphs are fine).
  std::unordered_map<Node*, int> consumers;
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
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

  // 2-4. Run nodes whose consumers have all reported.
  std::vector<Node*> ready;
  for (auto& s : starts)
    if (consumers[s.get()] == 0) ready.push_back(s.get());
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Tensor g = std::move(pending[n]);
    pending.erase(n);
    MG_CHECK(!n->released, StateError,
             "backward: trying to backward through the graph a second time (at '{}'); its saved "
             "tensors were freed after the first backward. Pass retain_graph=true to the first "
             "backward if you need to run it twice",
             n->name);
    TensorList in_grads = n->apply(g);
    if (!retain_graph) n->release();
    for (size_t i = 0; i < n->next.size(); ++i) {
      Node* nx = n->next[i].get();
      if (!nx) continue;
      if (i < in_grads.size() && in_grads[i].defined()) {
        Tensor gi = sum_to_shape(in_grads[i], n->input_shapes[i]);
        MG_CHECK(gi.shape() == n->input_shapes[i], ShapeError,
                 "backward: '{}' returned a gradient of shape {} for input {} of shape {}", n->name,
                 shape_str(in_grads[i].shape()), i, shape_str(n->input_shapes[i]));
        auto it = pending.find(nx);
        if (it == pending.end() || !it->second.defined()) {
          pending[nx] = gi;
        } else {
          // Sum into a buffer we own: gi may alias another node's gradient.
          if (it->second.storage().use_count() > 1 || !it->second.is_contiguous())
            it->second = it->second.clone();
          add_(it->second, gi);
        }
      }
      if (--consumers[nx] == 0) {
        if (pending.count(nx)) ready.push_back(nx);
        else if (!retain_graph) nx->release();  // nothing flowed here; still free it
      }
    }
  }
}

}  // namespace mg
