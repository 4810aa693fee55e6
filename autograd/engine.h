#pragma once
// The backward engine (autograd/engine.cpp): walks the tape from the roots back to the leaves.
#include <string>
#include <vector>

#include "minigrad/autograd/variable.h"

namespace mg {

/// Backpropagate from `roots` with the given output gradients (undefined: ones, for a one-element
/// root). The engine behind Variable::backward(); retain_graph keeps the saved tensors for a
/// second backward through the same graph.
void run_backward(const std::vector<Variable>& roots, const TensorList& grads, bool retain_graph);

/// Run gradient hooks in order on `grad`, each on what the one before returned; `where` names the
/// variable or op in the error a hook that returns the wrong shape or dtype gets.
Tensor run_grad_hooks(const GradHooks& hooks, Tensor grad, const std::string& where);

}  // namespace mg
