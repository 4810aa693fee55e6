#pragma once
// Writing your own differentiable op, like torch::autograd::Function.
//
//   // y = x^3      dx = 3 x^2 dy
//   struct Cube : mg::Function {
//     std::string name() const override { return "cube"; }
//     Tensor forward(mg::FunctionCtx& ctx, const std::vector<Tensor>& in) override {
//       ctx.save_for_backward({in[0]});
//       return in[0] * in[0] * in[0];
//     }
//     std::vector<Tensor> backward(mg::FunctionCtx& ctx, const Tensor& dy) override {
//       const Tensor& x = ctx.saved()[0];
//       return {dy * x * x * 3.0};
//     }
//   };
//   Variable y = mg::apply_function<Cube>({x});
//
// forward sees plain Tensors (nothing inside it is recorded); backward returns one gradient per
// input (an undefined Tensor where ctx.needs_input_grad(i) is false is fine). Gradients may be in
// a broadcast shape: the engine sums them down to each input's shape. Check it with mg::gradcheck.
// docs/03-writing-an-op.md walks through one.
#include <memory>
#include <string>
#include <vector>

#include "minigrad/autograd/variable.h"

namespace mg {

/// What forward leaves for backward.
class FunctionCtx {
 public:
  /// Keep tensors for backward; freed after backward unless retain_graph.
  void save_for_backward(std::vector<Tensor> tensors) { saved_ = std::move(tensors); }
  /// The tensors saved by forward; a StateError after they were freed.
  const std::vector<Tensor>& saved() const {
    MG_CHECK(!released_, StateError, "FunctionCtx: the saved tensors were freed by an earlier backward "
             "(pass retain_graph=true to keep them)");
    return saved_;
  }
  /// Whether input i needs a gradient.
  bool needs_input_grad(size_t i) const { return i < needs_.size() && needs_[i]; }

 private:
  friend struct FunctionNode;
  template <class F, class... Args> friend Variable apply_function(const std::vector<Variable>&, Args&&...);
  std::vector<Tensor> saved_;
  std::vector<bool> needs_;
  bool released_ = false;
};

/// Base class of a user-written op.
struct Function {
  virtual ~Function() = default;
  /// Name shown by to_dot and in errors.
  virtual std::string name() const = 0;
  /// The output computed from the inputs' tensors.
  virtual Tensor forward(FunctionCtx& ctx, const std::vector<Tensor>& inputs) = 0;
  /// Gradients of the inputs given the gradient of the output.
  virtual std::vector<Tensor> backward(FunctionCtx& ctx, const Tensor& grad_out) = 0;
};

/// The tape node of a user-written op.
struct FunctionNode : Node {
  std::shared_ptr<Function> fn;
  FunctionCtx ctx;
  TensorList apply(const Tensor& grad_out) override {
    TensorList g = fn->backward(ctx, grad_out);
    MG_CHECK(g.size() == next.size(), ValueError, "{}: backward returned {} gradients for {} inputs", name,
             g.size(), next.size());
    return g;
  }
  void release() override {
    ctx.saved_.clear();
    ctx.released_ = true;
    released = true;
  }
};

/// Run the op F (constructed from args) on `inputs` and record it on the tape.
template <class F, class... Args>
Variable apply_function(const std::vector<Variable>& inputs, Args&&... args) {
  auto node = std::make_shared<FunctionNode>();
  node->fn = std::make_shared<F>(std::forward<Args>(args)...);
  node->name = node->fn->name();
  std::vector<Tensor> data;
  bool any = false;
  for (const Variable& v : inputs) {
    data.push_back(v.data());
    const bool need = GradMode::is_enabled() && v.requires_grad();
    node->ctx.needs_.push_back(need);
    any = any || need;
  }
  Tensor out = node->fn->forward(node->ctx, data);
  MG_CHECK(out.defined(), StateError, "{}: forward returned an undefined tensor", node->name);
  if (!any) return Variable(out, false);
  for (const Variable& v : inputs) {
    node->next.push_back(GradMode::is_enabled() ? v.gradient_edge() : nullptr);
    node->input_shapes.push_back(v.shape());
    node->input_dtypes.push_back(v.dtype());
  }
  node->out_shape = out.shape();
  return Variable::from_node(out, node);
}

}  // namespace mg
