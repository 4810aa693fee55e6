#pragma once
// A Node is one recorded operation on the tape: it knows how to turn the gradient of its output
// into gradients of its inputs. Nodes point at the nodes that produced their inputs (`next`), so
// the tape is a graph that ends in AccumulateGrad nodes, one per leaf that requires grad.
// docs/02-autograd.md traces a small graph through these structures by hand.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg {

struct VariableImpl;
class Variable;
using TensorList = std::vector<Tensor>;
/// Gradients with history (backward with create_graph, mg::grad): one per input of a node.
using VariableList = std::vector<Variable>;

/// A gradient hook (Variable::register_hook): sees a gradient as backward computes it and returns
/// a replacement of the same shape and dtype, or an undefined Tensor to leave it as it is.
using GradHook = std::function<Tensor(const Tensor& grad)>;
/// Hooks with the ids their handles remove them by.
using GradHooks = std::vector<std::pair<int64_t, GradHook>>;
/// The id of the hook retain_grad() puts on a node: backward runs it, mg::grad does not (it
/// touches no .grad(), as torch.autograd.grad does not).
inline constexpr int64_t kRetainGradHook = INT64_MIN;

/// A tensor an op saved for its backward, and the version its storage had when the op was recorded
/// (Storage::version). If the tensor is written in place before the backward runs (copy_, fill_, an
/// optimizer step), its version has moved on and the engine refuses to run the rule on the new
/// numbers: a StateError naming the op, instead of a silently wrong gradient (PyTorch does the same).
struct SavedVersion {
  std::weak_ptr<Storage> storage;
  uint64_t version = 0;
  /// Which tensor: input `slot` (>= 0), the op's output (-1), or one the rule captured besides them
  /// (an index, a mask; a custom Function's save_for_backward): number -2 - slot of those.
  int slot = 0;
  /// That last kind's shape, for the error (an input's or the output's is on the node).
  Shape shape;
};

/// One operation recorded on the tape.
struct Node : std::enable_shared_from_this<Node> {
  /// Frees the chain of nodes behind this one iteratively: a graph of a million ops must not
  /// overflow the stack through nested shared_ptr destructors.
  virtual ~Node() {
    std::vector<std::shared_ptr<Node>> stack = std::move(next);
    while (!stack.empty()) {
      std::shared_ptr<Node> n = std::move(stack.back());
      stack.pop_back();
      if (n && n.use_count() == 1) {  // we hold the last reference: take its edges before it dies
        for (auto& m : n->next) stack.push_back(std::move(m));
        n->next.clear();
      }
    }
  }

  /// Op name shown by to_dot and in error messages ("matmul", "add", ...).
  std::string name;
  /// What the op's output stands for, if someone named it ("Q", "scores"): Variable::set_name on a
  /// non-leaf sets it, and to_dot shows it before the op ("scores = div"). Kept on the node because
  /// the graph does not keep the output Variable alive.
  std::string label;
  /// For each input: the node that receives its gradient, or null when it needs none.
  std::vector<std::shared_ptr<Node>> next;
  /// For each input: its shape. The engine sums each returned gradient down to it, so ops that
  /// broadcast need not undo broadcasting themselves.
  std::vector<Shape> input_shapes;
  /// For each input: its dtype, which its gradient must have.
  std::vector<DType> input_dtypes;
  /// Shape of this op's output.
  Shape out_shape;
  /// True once backward has freed what the op saved (after a backward without retain_graph).
  bool released = false;
  /// The tensors the op's rule keeps, with their versions then; the engine checks them before apply().
  std::vector<SavedVersion> saved_versions;
  /// Hooks on the gradient of this op's output (registered on the Variable it made), run by the
  /// engine on the summed gradient before apply().
  GradHooks grad_hooks;
  /// The Variable this op made, while someone still holds it (to_dot shows its value and, after
  /// retain_grad, its gradient). Weak: the tape never keeps activations alive.
  std::weak_ptr<VariableImpl> output;

  /// Whether input i needs a gradient; backward functions skip the work for the others.
  bool needs(size_t i) const { return i < next.size() && next[i] != nullptr; }
  /// Gradients for each input given the gradient of the output (undefined where not needed).
  virtual TensorList apply(const Tensor& grad_out) = 0;
  /// The same gradients as Variables whose computation is recorded (create_graph): the engine
  /// calls this with grad mode on. This default runs apply() and records each gradient as an op
  /// whose own backward is a NotImplementedError naming this node: first derivatives work, and
  /// differentiating through them stops with that error instead of a silent zero. Ops that are
  /// differentiable twice override it (LambdaNode with a rule written for both types).
  virtual VariableList apply_graph(const Variable& grad_out);
  /// Free the tensors saved for backward.
  virtual void release() { released = true; }
};

/// The end of the tape for a leaf: adds the incoming gradient into the leaf's .grad().
struct AccumulateGrad : Node {
  std::weak_ptr<VariableImpl> leaf;
  TensorList apply(const Tensor& grad_out) override;
  /// backward with create_graph: .grad() gets the numbers, grad_variable() the history too.
  VariableList apply_graph(const Variable& grad_out) override;
  /// Nothing is saved here, and the node is shared by every graph that uses the leaf, so it is
  /// never marked released: a later backward through another graph must still reach it.
  void release() override {}
};

/// The node of every built-in op: the backward is a lambda that captured what it needs.
/// Releasing the node destroys the lambda, and with it the saved tensors.
struct LambdaNode : Node {
  using Backward = std::function<TensorList(const Tensor& grad_out, const Node& self)>;
  /// The same rule on Variables (recorded, so differentiable again); null when the op has none.
  using GraphBackward = std::function<VariableList(const Variable& grad_out, Node& self)>;
  Backward backward;
  GraphBackward graph_backward;
  TensorList apply(const Tensor& grad_out) override { return backward(grad_out, *this); }
  VariableList apply_graph(const Variable& grad_out) override;
  void release() override {
    backward = nullptr;
    graph_backward = nullptr;
    released = true;
  }
};

}  // namespace mg
