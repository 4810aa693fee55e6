#pragma once
// Derivatives as functions, as torch.autograd.functional has them: vjp, jvp and hvp of a function
// f written in Variable ops (autograd/functional.cpp). Each runs f on its own copy of the inputs,
// so nothing outside is touched, and returns f's value beside the derivative.
//
//   vjp:  v^T J        one backward                        (reverse mode: a row of J per backward)
//   jvp:  J u          two backwards, the double-vjp trick  (forward mode from reverse mode)
//   hvp:  H v          reverse over reverse: the gradient of <grad f, v>
//
// docs/08-higher-order.md derives each one and measures what it costs; autograd/dual.h has forward
// mode with dual numbers, which computes J u in one forward pass instead.
#include <functional>
#include <utility>
#include <vector>

#include "minigrad/autograd/variable.h"

namespace mg {

/// A function of several Variables with one output.
using VariableFunction = std::function<Variable(const VariableList&)>;

/// f(x) and v^T J, one gradient per input (PyTorch's torch.autograd.functional.vjp). v has f's
/// output shape; undefined: ones, for a one-element output. With create_graph the results can be
/// differentiated again (with respect to the inputs, if they require grad). An input f does not use,
/// or an output that depends on no input (a constant, the derivative of a piecewise linear function),
/// gets zeros; with strict (PyTorch's strict=True) either is a ValueError instead.
std::pair<Variable, VariableList> vjp(const VariableFunction& f, const VariableList& inputs,
                                      const Variable& v = Variable(), bool create_graph = false, bool strict = false);

/// f(x) and J u, the directional derivative of f along the tangents u (one per input, each its
/// input's shape) (torch.autograd.functional.jvp). Computed by the double-vjp trick: g(w) = J^T w
/// is linear in a dummy w, so the gradient of <g(w), u> with respect to w is J u. Every op that
/// is differentiable twice works; the price is two backward passes. Unused inputs and constant
/// outputs as for vjp: zeros, or with strict a ValueError.
std::pair<Variable, Variable> jvp(const VariableFunction& f, const VariableList& inputs, const VariableList& tangents,
                                  bool create_graph = false, bool strict = false);

/// f(x) and H v for a function with one output (a loss): H the Hessian of f with respect to all
/// inputs together, v one tensor per input (torch.autograd.functional.hvp). Reverse over reverse:
/// g = grad f with create_graph, then the gradient of sum_i <g_i, v_i>. A column of the Hessian per
/// call (v a unit vector), without ever forming H. Zeros where H is zero because f does not use
/// an input or is linear in it; with strict a ValueError there instead.
std::pair<Variable, VariableList> hvp(const VariableFunction& f, const VariableList& inputs, const VariableList& v,
                                      bool create_graph = false, bool strict = false);

}  // namespace mg
