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
//
// backward works on Tensors, so an op made this way is differentiable once: under create_graph its
// gradient is computed, and differentiating that gradient is a NotImplementedError naming the op.
// For an op differentiable twice, call record() with a template rule, as the built-in ops do
// (docs/03-writing-an-op.md, "Differentiable twice").
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
  /// The tensors saved by forward (freed with the op's rule after its backward, unless retain_graph;
  /// running the backward again then is the engine's StateError).
  const std::vector<Tensor>& saved() const { return saved_; }
  /// Whether input i needs a gradient.
  bool needs_input_grad(size_t i) const { return i < needs_.size() && needs_[i]; }

 private:
  template <class F, class... Args>
  friend Variable apply_function(const std::vector<Variable>&, Args&&...);
  std::vector<Tensor> saved_;
  std::vector<bool> needs_;
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

/// Run the op F (constructed from args) on `inputs` and record it on the tape: the same record()
/// every built-in op uses, with F's backward as the rule. The rule holds F and its context, so the
/// saved tensors are freed with it after the backward (unless retain_graph).
template <class F, class... Args>
Variable apply_function(const std::vector<Variable>& inputs, Args&&... args) {
  auto fn = std::make_shared<F>(std::forward<Args>(args)...);
  auto ctx = std::make_shared<FunctionCtx>();
  std::vector<Tensor> data;
  for (const Variable& v : inputs) {
    data.push_back(v.data());
    ctx->needs_.push_back(GradMode::is_enabled() && v.requires_grad());
  }
  Tensor out = fn->forward(*ctx, data);
  MG_CHECK(out.defined(), StateError, "{}: forward returned an undefined tensor", fn->name());
  return record(fn->name(), out, inputs, [fn, ctx](const Tensor& dy, const Node& n) -> TensorList {
    TensorList g = fn->backward(*ctx, dy);
    MG_CHECK(g.size() == n.next.size(), ValueError, "{}: backward returned {} gradients for {} inputs", n.name,
             g.size(), n.next.size());
    return g;
  });
}

}  // namespace mg
