#pragma once
// The backward engine (autograd/engine.cpp): walks the tape from the roots back to the leaves,
// with plain Tensors (backward) or, with create_graph, with Variables whose computation is itself
// recorded, so that gradients can be differentiated again (docs/08-higher-order.md).
#include <optional>
#include <string>
#include <vector>

#include "minigrad/autograd/variable.h"

namespace mg {

/// Backpropagate from `roots` with the given output gradients (undefined: ones, for a one-element
/// root). The engine behind Variable::backward(); retain_graph keeps the saved tensors for a
/// second backward through the same graph.
void run_backward(const std::vector<Variable>& roots, const TensorList& grads, bool retain_graph);

/// The same walk with create_graph: every rule runs on Variables with grad mode on, so what it
/// computes is recorded; leaves get their gradient in .grad() and, with its history, in
/// grad_variable(). The engine behind backward({.create_graph = true}).
void run_backward_graph(const std::vector<Variable>& roots, const VariableList& grads, bool retain_graph);

/// Options of mg::grad, as torch.autograd.grad's.
struct GradOptions {
  /// One per output: the output's gradient (the vector of the vector-Jacobian product). Missing or
  /// undefined: ones, for a one-element output. With create_graph it may itself require grad
  /// (the double-vjp trick of mg::jvp differentiates with respect to it).
  VariableList grad_outputs;
  /// Keep the saved tensors for another backward through the graph; defaults to create_graph.
  std::optional<bool> retain_graph;
  /// Record the backward, so the returned gradients can be differentiated again.
  bool create_graph = false;
  /// An input the outputs do not depend on gets an undefined Variable instead of a ValueError. An
  /// input the graph reaches but whose gradient is zero by its rules (relu's gradient with respect
  /// to x) gets zeros, with or without this.
  bool allow_unused = false;
};

/// The gradients of the sum of `outputs` (each weighted by its grad_output) with respect to each of
/// `inputs`, returned, not accumulated: no .grad() is touched (retain_grad's included) and only the
/// nodes that lead to an input run (PyTorch's torch.autograd.grad). Hooks on the inputs and on the
/// nodes that run see the gradients, as in backward. With create_graph the results carry history.
///   auto [dx] = mg::grad({y}, {x}, {.create_graph = true});   // dy/dx, differentiable again
VariableList grad(const VariableList& outputs, const VariableList& inputs, const GradOptions& options = {});

/// Run gradient hooks in order on `grad`, each on what the one before returned; `where` names the
/// variable or op in the error a hook that returns the wrong shape or dtype gets.
Tensor run_grad_hooks(const GradHooks& hooks, Tensor grad, const std::string& where);

/// Under create_graph hooks may look at a gradient but not replace it (the replacement would have
/// no history): runs them and throws a NotImplementedError naming `where` if one returns a tensor.
void check_hooks_keep(const GradHooks& hooks, const Tensor& grad, const std::string& where);

}  // namespace mg
