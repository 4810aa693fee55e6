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
// An op with several outputs derives from MultiFunction instead: forward returns a list, backward
// receives one gradient per output (zeros for an output nothing used; undefined for an output that
// is not floating, such as int64 indices, which is returned as a constant), and apply_multi_function
// returns the outputs as Variables.
//
// backward works on Tensors, so an op made this way is differentiable once: under create_graph its
// gradient is computed, and differentiating that gradient is a NotImplementedError naming the op.
// For an op differentiable twice, call record() with a template rule, as the built-in ops do
// (docs/03-writing-an-op.md, "Differentiable twice").
#include <memory>
#include <string>
#include <vector>

#include "minigrad/autograd/variable.h"
#include "minigrad/tensor/ops/shape.h"

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
  template <class F, class... Args>
  friend std::vector<Variable> apply_multi_function(const std::vector<Variable>&, Args&&...);
  // The inputs' tensors, noting which inputs need a gradient.
  std::vector<Tensor> unpack(const std::vector<Variable>& inputs) {
    std::vector<Tensor> data;
    for (const Variable& v : inputs) {
      data.push_back(v.data());
      needs_.push_back(GradMode::is_enabled() && v.requires_grad());
    }
    return data;
  }
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
  const std::vector<Tensor> data = ctx->unpack(inputs);
  Tensor out = fn->forward(*ctx, data);
  MG_CHECK(out.defined(), StateError, "{}: forward returned an undefined tensor", fn->name());
  return record(
      fn->name(), out, inputs, keep(),
      [fn, ctx](const Tensor& dy, const Node& n) -> TensorList {
        TensorList g = fn->backward(*ctx, dy);
        MG_CHECK(g.size() == n.next.size(), ValueError, "{}: backward returned {} gradients for {} inputs", n.name,
                 g.size(), n.next.size());
        return g;
      },
      ctx->saved());  // what save_for_backward kept: backward checks it was not written in place since
}

/// Base class of a user-written op with several outputs (a torch.autograd.Function returning a tuple).
struct MultiFunction {
  virtual ~MultiFunction() = default;
  /// Name shown by to_dot and in errors.
  virtual std::string name() const = 0;
  /// The outputs computed from the inputs' tensors.
  virtual std::vector<Tensor> forward(FunctionCtx& ctx, const std::vector<Tensor>& inputs) = 0;
  /// Gradients of the inputs given one gradient per output: of the output's shape, zeros where the
  /// output was not used (PyTorch's materialized gradients), undefined for a non-floating output.
  virtual std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& grad_outputs) = 0;
};

/// Run the op F (constructed from args) on `inputs` and record it: one tape node whose value is
/// the floating outputs flattened and joined (they share one dtype), each output a view of its
/// part (slice, reshape), so gradients reaching any of them meet in that node and F's backward
/// sees them all at once. Outputs that are not floating come back as constants.
template <class F, class... Args>
std::vector<Variable> apply_multi_function(const std::vector<Variable>& inputs, Args&&... args) {
  auto fn = std::make_shared<F>(std::forward<Args>(args)...);
  auto ctx = std::make_shared<FunctionCtx>();
  const std::vector<Tensor> data = ctx->unpack(inputs);
  const std::vector<Tensor> outs = fn->forward(*ctx, data);
  MG_CHECK(!outs.empty(), StateError, "{}: forward returned no outputs", fn->name());
  std::vector<Tensor> parts;  // the floating outputs, flattened
  std::vector<Shape> shapes;
  std::vector<bool> floating;
  for (size_t i = 0; i < outs.size(); ++i) {
    MG_CHECK(outs[i].defined(), StateError, "{}: forward returned an undefined output {}", fn->name(), i);
    floating.push_back(is_floating(outs[i].dtype()));
    shapes.push_back(outs[i].shape());
    if (!floating.back()) continue;
    MG_CHECK(parts.empty() || outs[i].dtype() == parts.front().dtype(), DTypeError,
             "{}: output {} is {} but an earlier floating output is {}; the differentiable outputs share a dtype",
             fn->name(), i, dtype_name(outs[i].dtype()), dtype_name(parts.front().dtype()));
    parts.push_back(outs[i].reshape({-1}));
  }
  std::vector<Variable> result(outs.size());
  if (parts.empty()) {  // nothing to differentiate
    for (size_t i = 0; i < outs.size(); ++i) result[i] = Variable(outs[i]);
    return result;
  }
  const Variable packed = record(
      fn->name(), concat(parts, 0), inputs, keep(),
      [fn, ctx, shapes, floating](const Tensor& dy, const Node& n) -> TensorList {
        std::vector<Tensor> grads(shapes.size());
        int64_t offset = 0;
        for (size_t i = 0; i < shapes.size(); ++i) {
          if (!floating[i]) continue;
          const int64_t size = numel_of(shapes[i]);
          grads[i] = dy.narrow(0, offset, size).reshape(shapes[i]);
          offset += size;
        }
        TensorList g = fn->backward(*ctx, grads);
        MG_CHECK(g.size() == n.next.size(), ValueError, "{}: backward returned {} gradients for {} inputs", n.name,
                 g.size(), n.next.size());
        return g;
      },
      ctx->saved());
  int64_t offset = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!floating[i]) {
      result[i] = Variable(outs[i]);
      continue;
    }
    const int64_t size = numel_of(shapes[i]);
    result[i] = packed.narrow(0, offset, size).reshape(shapes[i]);
    offset += size;
  }
  return result;
}

}  // namespace mg
