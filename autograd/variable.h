#pragma once
// mg::Variable: a Tensor plus what autograd needs -- requires_grad, the accumulated gradient, and
// the Node that produced it. Copies of a Variable share all of that (like a PyTorch tensor).
#include <array>
#include <concepts>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "minigrad/autograd/grad_mode.h"
#include "minigrad/autograd/node.h"
#include "minigrad/tensor/tensor.h"

namespace mg {

class Variable;

/// The shared state behind a Variable.
struct VariableImpl {
  Tensor data;
  Tensor grad;  // accumulated gradient of a leaf, or of a non-leaf after retain_grad()
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;              // the op that made this variable; null for a leaf
  std::weak_ptr<AccumulateGrad> accumulator;  // a leaf's end of the tape, shared by every use
  std::string name;                           // shown by to_dot; nn sets parameter names
  GradHooks grad_hooks;                       // a leaf's gradient hooks, run before it is accumulated
  std::vector<std::pair<int64_t, std::function<void(const Variable&)>>> post_accumulate_hooks;
  int64_t next_hook_id = 0;
  bool retains_grad = false;  // a non-leaf whose gradient backward stores in .grad
  // The gradient with its history, after a backward with create_graph (grad holds its numbers).
  std::shared_ptr<VariableImpl> grad_graph;
};

/// Options of Variable::backward, as PyTorch's Tensor.backward(gradient, retain_graph, create_graph):
///   loss.backward({.create_graph = true});   // .grad_variable() can then be differentiated again
struct BackwardOptions {
  /// The output's gradient (its shape); undefined: ones, for a one-element output.
  Tensor gradient;
  /// Keep the saved tensors for another backward through the same graph; defaults to create_graph.
  std::optional<bool> retain_graph;
  /// Record the backward itself as ops, so the gradients can be differentiated again.
  bool create_graph = false;
};

/// What register_hook returns: remove() takes the hook off again (PyTorch's RemovableHandle).
/// Removing twice, or once the variable or its graph is gone, does nothing.
class GradHookHandle {
 public:
  GradHookHandle() = default;
  /// Take the hook off.
  void remove();

 private:
  friend class Variable;
  std::weak_ptr<void> owner_;  // the VariableImpl or the Node holding the hook
  GradHooks* hooks_ = nullptr;
  std::vector<std::pair<int64_t, std::function<void(const Variable&)>>>* post_hooks_ = nullptr;
  int64_t id_ = -1;
};

class Variable {
 public:
  /// An undefined variable.
  Variable() = default;
  /// A leaf holding `data`; with requires_grad, backward() fills its grad().
  explicit Variable(Tensor data, bool requires_grad = false);

  /// False for a default-constructed variable.
  bool defined() const { return impl_ != nullptr; }
  /// The numbers. Writing through this tensor bypasses autograd (optimizers do this).
  const Tensor& data() const;
  /// Replace the numbers without recording anything (like PyTorch's `p.data = t`): every copy of
  /// this Variable sees the new tensor. Used by nn::Module::to() and checkpoint loading.
  void set_data(Tensor data) const;
  /// The gradient accumulated by backward(); undefined before the first backward.
  const Tensor& grad() const;
  /// Replace the gradient (undefined to clear it); forgets the history grad_variable() had.
  void set_grad(Tensor grad) const;
  /// The gradient as a Variable. After backward({.create_graph = true}) it carries the history of
  /// how it was computed, so it can be differentiated again (a gradient penalty); otherwise it is
  /// grad() without history. Undefined before the first backward. Once it has a history, later
  /// backward calls add to it (recorded) until zero_grad() or set_grad() drops it.
  Variable grad_variable() const;
  /// Whether gradients flow to (or through) this variable.
  bool requires_grad() const;
  /// Mark a leaf as needing gradients; a StateError on a non-leaf.
  Variable& set_requires_grad(bool requires_grad);
  /// True when no recorded op produced it.
  bool is_leaf() const;
  /// The op that produced it (null for a leaf).
  const std::shared_ptr<Node>& grad_fn() const;
  /// Clear the gradient (like PyTorch's zero_grad(set_to_none=True)).
  void zero_grad() const { set_grad(Tensor()); }
  /// Backpropagate from this variable. Without `grad` it must hold one element (a loss); with
  /// `grad` (its shape) it computes the vector-Jacobian product. retain_graph keeps the saved
  /// tensors so a second backward through the same graph is allowed.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  /// Backpropagate with options: backward({.create_graph = true}) records the backward pass, so
  /// grad_variable() of each leaf can be differentiated again.
  void backward(const BackwardOptions& options) const;
  /// The same data, cut off from the graph: no grad_fn, requires_grad false.
  Variable detach() const;
  /// Name shown by to_dot (nn::Module sets "fc1.weight" etc.).
  const std::string& name() const;
  /// Set the display name. On a variable an op made, to_dot shows it on that op's node too
  /// ("scores = div"), after the variable itself is gone.
  Variable& set_name(std::string name);

  /// data().shape() and friends.
  const Shape& shape() const { return data().shape(); }
  int64_t dim() const { return data().dim(); }
  int64_t size(int64_t d) const { return data().size(d); }
  int64_t numel() const { return data().numel(); }
  DType dtype() const { return data().dtype(); }
  /// The value of a one-element variable.
  double item() const { return data().item(); }
  /// The value as T, read in the variable's dtype (Tensor::item<T>).
  template <class T>
  T item() const {
    return data().template item<T>();
  }

  // ---- method forms, as a PyTorch user writes them: x.transpose(-2, -1).pow(2).sum() ----
  // Each calls the free function of the same name (autograd/ops/), so both spellings record the
  // same op. Defined in autograd/variable_methods.cpp.
  /// reshape(*this, shape)
  Variable reshape(const Shape& shape) const;
  /// view(*this, shape)
  Variable view(const Shape& shape) const;
  /// flatten(*this, start_dim, end_dim)
  Variable flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// unflatten(*this, dim, sizes)
  Variable unflatten(int64_t dim, const Shape& sizes) const;
  /// chunk(*this, chunks, dim)
  std::vector<Variable> chunk(int64_t chunks, int64_t dim = 0) const;
  /// transpose(*this, d0, d1)
  Variable transpose(int64_t d0, int64_t d1) const;
  /// permute(*this, dims)
  Variable permute(const std::vector<int64_t>& dims) const;
  /// diagonal(*this, offset, dim1, dim2)
  Variable diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  /// gather(*this, dim, index)
  Variable gather(int64_t dim, const Tensor& index) const;
  /// index_select(*this, dim, index)
  Variable index_select(int64_t dim, const Tensor& index) const;
  /// scatter(*this, dim, index, src)
  Variable scatter(int64_t dim, const Tensor& index, const Variable& src) const;
  /// scatter(*this, dim, index, value)
  Variable scatter(int64_t dim, const Tensor& index, double value) const;
  /// scatter_add(*this, dim, index, src)
  Variable scatter_add(int64_t dim, const Tensor& index, const Variable& src) const;
  /// scatter_reduce(*this, dim, index, src, reduce, include_self)
  Variable scatter_reduce(int64_t dim, const Tensor& index, const Variable& src, const std::string& reduce,
                          bool include_self = true) const;
  /// index_put(*this, indices, values, accumulate)
  Variable index_put(const std::vector<Tensor>& indices, const Variable& values, bool accumulate = false) const;
  /// masked_select(*this, mask)
  Variable masked_select(const Tensor& mask) const;
  /// repeat(*this, repeats)
  Variable repeat(const std::vector<int64_t>& repeats) const;
  /// repeat_interleave(*this, repeats, dim)
  Variable repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  /// lerp(*this, end, weight): *this + weight (end - *this)
  Variable lerp(const Variable& end, const Variable& weight) const;
  /// lerp(*this, end, weight) with one weight for every element
  Variable lerp(const Variable& end, double weight) const;
  /// addmm(*this, mat1, mat2, beta, alpha): beta *this + alpha (mat1 @ mat2)
  Variable addmm(const Variable& mat1, const Variable& mat2, double beta = 1, double alpha = 1) const;
  /// flip(*this, dims)
  Variable flip(const std::vector<int64_t>& dims) const;
  /// narrow(*this, dim, start, length)
  Variable narrow(int64_t dim, int64_t start, int64_t length) const;
  /// slice(*this, dim, start, end, step)
  Variable slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  /// expand(*this, shape)
  Variable expand(const Shape& shape) const;
  /// squeeze(*this): every size-1 dim removed
  Variable squeeze() const;
  /// squeeze(*this, dim)
  Variable squeeze(int64_t dim) const;
  /// unsqueeze(*this, dim)
  Variable unsqueeze(int64_t dim) const;
  /// sum(*this, dims, keepdim)
  Variable sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  /// sum over one dim, PyTorch's int form: v.sum(0, true) (a template: v.sum({}) still means every dim).
  template <std::integral I>
  requires(!std::same_as<I, bool>) Variable sum(I d, bool keepdim = false)
  const { return sum(std::vector<int64_t>{static_cast<int64_t>(d)}, keepdim); }
  /// mean(*this, dims, keepdim)
  Variable mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  /// mean over one dim: v.mean(1).
  template <std::integral I>
  requires(!std::same_as<I, bool>) Variable mean(I d, bool keepdim = false)
  const { return mean(std::vector<int64_t>{static_cast<int64_t>(d)}, keepdim); }
  /// max(*this, dim, keepdim): values and int64 indices
  std::pair<Variable, Tensor> max(int64_t dim, bool keepdim = false) const;
  /// max(*this): the largest element
  Variable max() const;
  /// min(*this, dim, keepdim): values and int64 indices
  std::pair<Variable, Tensor> min(int64_t dim, bool keepdim = false) const;
  /// min(*this): the smallest element
  Variable min() const;
  /// var(*this, dims, correction, keepdim)
  Variable var(const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  /// std(*this, dims, correction, keepdim)
  Variable std(const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  /// var over one dim: v.var(1).
  template <std::integral I>
  requires(!std::same_as<I, bool>) Variable var(I d, int64_t correction = 1, bool keepdim = false)
  const { return var(std::vector<int64_t>{static_cast<int64_t>(d)}, correction, keepdim); }
  /// std over one dim: v.std(1).
  template <std::integral I>
  requires(!std::same_as<I, bool>) Variable std(I d, int64_t correction = 1, bool keepdim = false)
  const { return std(std::vector<int64_t>{static_cast<int64_t>(d)}, correction, keepdim); }
  /// prod(*this, dim, keepdim)
  Variable prod(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  /// cumsum(*this, dim)
  Variable cumsum(int64_t dim) const;
  /// logsumexp(*this, dims, keepdim)
  Variable logsumexp(const std::vector<int64_t>& dims, bool keepdim = false) const;
  /// topk(*this, k, dim, largest, sorted): values and int64 indices
  std::pair<Variable, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  /// sort(*this, dim, descending): values and int64 indices
  std::pair<Variable, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  /// matmul(*this, other)
  Variable matmul(const Variable& other) const;
  /// pow(*this, exponent)
  Variable pow(double exponent) const;
  /// exp(*this)
  Variable exp() const;
  /// log(*this)
  Variable log() const;
  /// sqrt(*this)
  Variable sqrt() const;
  /// abs(*this)
  Variable abs() const;
  /// neg(*this)
  Variable neg() const;
  /// tanh(*this)
  Variable tanh() const;
  /// sigmoid(*this)
  Variable sigmoid() const;
  /// relu(*this)
  Variable relu() const;
  /// sin(*this)
  Variable sin() const;
  /// cos(*this)
  Variable cos() const;
  /// log1p(*this)
  Variable log1p() const;
  /// expm1(*this)
  Variable expm1() const;
  /// clamp(*this, min, max)
  Variable clamp(std::optional<double> min, std::optional<double> max = std::nullopt) const;
  /// softmax(*this, dim)
  Variable softmax(int64_t dim) const;
  /// log_softmax(*this, dim)
  Variable log_softmax(int64_t dim) const;
  /// masked_fill(*this, mask, value)
  Variable masked_fill(const Tensor& mask, double value) const;

  /// Call `hook` with this variable's gradient every time backward computes it (PyTorch's
  /// Tensor.register_hook). The hook may return a replacement (the same shape and dtype), which
  /// is what flows on: into .grad() for a leaf, into the op that made it otherwise; an undefined
  /// Tensor leaves the gradient as it is. A StateError on a variable that needs no gradient.
  GradHookHandle register_hook(GradHook hook) const;
  /// Keep this non-leaf's gradient in .grad() after backward, summed over backward calls like a
  /// leaf's (PyTorch's Tensor.retain_grad). Nothing to do for a leaf.
  void retain_grad() const;
  /// Whether retain_grad() was called on this non-leaf.
  bool retains_grad() const;
  /// Call `hook` on this leaf after backward has added a gradient into its .grad() (PyTorch's
  /// register_post_accumulate_grad_hook): the moment a data-parallel trainer can send that
  /// gradient. A StateError on a non-leaf or a leaf that needs no gradient.
  GradHookHandle register_post_accumulate_grad_hook(std::function<void(const Variable&)> hook) const;

  /// Shared state (for the engine and to_dot).
  const std::shared_ptr<VariableImpl>& impl() const { return impl_; }
  /// A non-leaf variable produced by `grad_fn`.
  static Variable from_node(Tensor data, std::shared_ptr<Node> grad_fn);
  /// A variable whose gradient goes to `edge` without becoming that node's output (how a rule run
  /// with create_graph sees a tensor its op saved: the op's input, routed to the node that made
  /// it, or the op's own output); a constant when edge is null.
  static Variable from_edge(Tensor data, std::shared_ptr<Node> edge);
  /// A Variable sharing `impl` (for hooks that are handed the leaf they belong to).
  static Variable from_impl(std::shared_ptr<VariableImpl> impl);
  /// The node a gradient for this variable should be sent to: its grad_fn, or for a leaf that
  /// requires grad its AccumulateGrad node; null when it needs no gradient.
  std::shared_ptr<Node> gradient_edge() const;

 private:
  std::shared_ptr<VariableImpl> impl_;
};

/// Prints the data as PyTorch prints a tensor, then how it takes part in autograd:
/// "tensor([2., 4.], grad_fn=<mul>)" (the op that made it), or "tensor([1., 2.],
/// requires_grad=True)" for a leaf that wants a gradient.
std::ostream& operator<<(std::ostream& os, const Variable& v);

/// Which tensors an op keeps for its backward: input indices, or kOutput for the op's own output.
/// An optional input that was not given (an undefined Variable, such as a missing bias) keeps its
/// slot: it needs no gradient (n.needs(i) is false) and the rule sees it undefined.
template <size_t K>
using Keep = std::array<int, K>;
/// keep(0, 1): inputs 0 and 1; keep(kOutput): the output; keep(): nothing.
inline constexpr int kOutput = -1;
template <class... I>
constexpr Keep<sizeof...(I)> keep(I... i) {
  return {static_cast<int>(i)...};
}
/// The kept tensors as a rule sees them: Tensors, or Variables under create_graph.
template <class V, size_t K>
using Saved = std::array<V, K>;
/// A rule's result: one gradient per input (undefined where n.needs(i) is false).
template <class V>
using Grads = std::vector<V>;

/// The numbers of a rule's value: the Tensor itself, or a Variable's data (for masks and
/// comparisons, which are constants under create_graph).
inline const Tensor& tensor_of(const Tensor& t) { return t; }
inline const Tensor& tensor_of(const Variable& v) { return v.data(); }

namespace record_impl {
bool will_record(const std::vector<Variable>& inputs);
// The node, with the versions of the tensors `kept` names and of `also_saved` (Node::saved_versions).
Variable record_node(std::string name, Tensor out, const std::vector<Variable>& inputs, LambdaNode::Backward backward,
                     LambdaNode::GraphBackward graph_backward, std::span<const int> kept,
                     const std::vector<Tensor>& also_saved);
Variable unpack_saved(const Tensor& data, int input, Node& self);
// The tensors `kept` names: the inputs' data, or the output.
template <size_t K>
Saved<Tensor, K> save(const Keep<K>& kept, const Tensor& out, const std::vector<Variable>& inputs) {
  Saved<Tensor, K> saved;
  for (size_t k = 0; k < K; ++k) {
    if (kept[k] == kOutput) {
      saved[k] = out;
    } else if (const Variable& in = inputs[static_cast<size_t>(kept[k])]; in.defined()) {
      saved[k] = in.data();  // (an optional input not given stays undefined)
    }
  }
  return saved;
}
// The same tensors as Variables wired into the graph, for a rule run under create_graph.
template <size_t K>
Saved<Variable, K> unpack(const Saved<Tensor, K>& saved, const Keep<K>& kept, Node& self) {
  Saved<Variable, K> s;
  for (size_t k = 0; k < K; ++k) s[k] = unpack_saved(saved[k], kept[k], self);
  return s;
}
// record() with a template rule: the same rule run on Tensors (once) and on Variables (twice).
template <size_t K, class Rule>
Variable record_twice(std::string name, Tensor out, const std::vector<Variable>& inputs, Keep<K> kept, Rule rule,
                      const std::vector<Tensor>& also_saved) {
  const Saved<Tensor, K> saved = save(kept, out, inputs);
  LambdaNode::Backward once = [rule, saved](const Tensor& dy, const Node& n) -> TensorList {
    return rule(dy, saved, n);
  };
  LambdaNode::GraphBackward twice = [rule, saved, kept](const Variable& dy, Node& n) -> VariableList {
    return rule(dy, unpack(saved, kept, n), n);
  };
  return record_node(std::move(name), std::move(out), inputs, std::move(once), std::move(twice), kept, also_saved);
}
}  // namespace record_impl

/// Record an op: `out` computed from `inputs`, with `rule` mapping the output's gradient to the
/// inputs' gradients. Records nothing (returns a plain variable) when grad mode is off or no input
/// requires grad. The rule is usually written once for both kinds of value, a template lambda
///   []<class V>(const V& dy, const Saved<V, K>& saved, const Node& n) -> Grads<V>
/// run on Tensors by an ordinary backward (the kernels as before, nothing recorded), and on
/// Variables by a backward with create_graph, where every op it calls is recorded, so the
/// gradient can be differentiated again. `saved` holds the tensors `kept` names, in that order:
/// under create_graph each comes back as a Variable wired to the node that made it (the op's
/// input's producer, or this node for the output), which is what makes the second derivative see
/// how the first depends on them.
/// A rule on Tensors only, (const Tensor& dy, const Node& n) -> TensorList, captures what it needs
/// itself and makes the op differentiable once (a backward with create_graph through it records a
/// node whose own backward is an error); `kept` then names which of the inputs and output it captured.
/// `also_saved`: the other tensors the rule captured that a caller could write into (an index, a
/// mask, targets). Backward checks that none of these, nor those `kept` names, was written in place
/// since the op ran (Node::saved_versions).
template <size_t K, class Rule>
Variable record(std::string name, Tensor out, const std::vector<Variable>& inputs, Keep<K> kept, Rule rule,
                const std::vector<Tensor>& also_saved = {}) {
  if (!record_impl::will_record(inputs)) return Variable(std::move(out), false);
  if constexpr (std::is_invocable_r_v<TensorList, Rule&, const Tensor&, const Node&>) {
    return record_impl::record_node(std::move(name), std::move(out), inputs, LambdaNode::Backward(std::move(rule)),
                                    nullptr, kept, also_saved);
  } else {
    return record_impl::record_twice(std::move(name), std::move(out), inputs, kept, std::move(rule), also_saved);
  }
}

/// Record an op whose ordinary backward is a fused kernel (`once`, on Tensors, as the first
/// record() above) and whose backward under create_graph is a separate rule on Variables
/// (`twice`): the composed form the kernel computes, written in differentiable ops. `kept` names
/// the tensors `twice` sees, as for the template record(), and every input or output `once` reads;
/// `also_saved` as for record().
/// twice: (const Variable& dy, const Saved<Variable, K>& saved, const Node& n) -> VariableList
template <size_t K, class Twice>
Variable record_fused(std::string name, Tensor out, const std::vector<Variable>& inputs, Keep<K> kept,
                      LambdaNode::Backward once, Twice twice, const std::vector<Tensor>& also_saved = {}) {
  if (!record_impl::will_record(inputs)) return Variable(std::move(out), false);
  const Saved<Tensor, K> saved = record_impl::save(kept, out, inputs);
  LambdaNode::GraphBackward graph = [twice = std::move(twice), saved, kept](const Variable& dy,
                                                                            Node& n) -> VariableList {
    return twice(dy, record_impl::unpack(saved, kept, n), n);
  };
  return record_impl::record_node(std::move(name), std::move(out), inputs, std::move(once), std::move(graph), kept,
                                  also_saved);
}

}  // namespace mg
