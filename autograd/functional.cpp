// vjp, jvp and hvp on top of mg::grad (autograd/engine.h).
#include "minigrad/autograd/functional.h"

#include "minigrad/autograd/engine.h"
#include "minigrad/autograd/ops.h"

namespace mg {
namespace {
// f's own copies of the inputs: fresh leaves that require grad, or, under create_graph, an alias
// of an input that already has history (so the result stays differentiable with respect to it).
VariableList prepare(const VariableFunction& f, const VariableList& inputs, bool create_graph, const char* op) {
  MG_CHECK(f != nullptr, ValueError, "{}: the function is empty", op);
  MG_CHECK(!inputs.empty(), ValueError, "{}: expected at least one input", op);
  const EnableGradGuard recording;  // the alias below is recorded even inside a NoGradGuard
  VariableList xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Variable& x = inputs[i];
    MG_CHECK(x.defined(), StateError, "{}: input {} is undefined", op, i);
    MG_CHECK(is_floating(x.dtype()), DTypeError, "{}: input {} is {}; only floating inputs have derivatives", op, i,
             dtype_name(x.dtype()));
    xs.push_back(create_graph && x.requires_grad() ? reshape(x, x.shape()) : Variable(x.data(), true));
  }
  return xs;
}

// f(xs), checked: defined and depending on the inputs (else every derivative is 0, said plainly).
Variable run(const VariableFunction& f, const VariableList& xs, const char* op) {
  const EnableGradGuard recording;
  Variable y = f(xs);
  MG_CHECK(y.defined(), StateError, "{}: the function returned an undefined Variable", op);
  MG_CHECK(y.requires_grad(), ValueError,
           "{}: the function's output does not depend on its inputs (it was computed from constants, or "
           "under NoGradGuard)",
           op);
  return y;
}

// One tensor per input, each its input's shape and dtype (tangents, hvp's v).
void check_like(const VariableList& vs, const VariableList& xs, const char* what, const char* op) {
  MG_CHECK(vs.size() == xs.size(), ValueError, "{}: {} {} for {} inputs", op, vs.size(), what, xs.size());
  for (size_t i = 0; i < vs.size(); ++i) {
    MG_CHECK(vs[i].defined(), StateError, "{}: {} {} is undefined", op, what, i);
    MG_CHECK(vs[i].dtype() == xs[i].dtype(), DTypeError, "{}: {} {} is {} but input {} is {}", op, what, i,
             dtype_name(vs[i].dtype()), i, dtype_name(xs[i].dtype()));
    MG_CHECK(vs[i].shape() == xs[i].shape(), ShapeError, "{}: {} {} has shape {} but input {} has {}", op, what, i,
             shape_str(vs[i].shape()), i, shape_str(xs[i].shape()));
  }
}

// An undefined gradient (an input f does not use) as the zeros it means.
VariableList zeros_for_unused(VariableList g, const VariableList& xs) {
  for (size_t i = 0; i < g.size(); ++i)
    if (!g[i].defined()) g[i] = Variable(zeros(xs[i].shape(), xs[i].dtype()));
  return g;
}
}  // namespace

std::pair<Variable, VariableList> vjp(const VariableFunction& f, const VariableList& inputs, const Variable& v,
                                      bool create_graph) {
  const VariableList xs = prepare(f, inputs, create_graph, "vjp");
  const Variable y = run(f, xs, "vjp");
  const VariableList g = grad({y}, xs, {.grad_outputs = {v}, .create_graph = create_graph, .allow_unused = true});
  return {create_graph ? y : y.detach(), zeros_for_unused(g, xs)};
}

std::pair<Variable, Variable> jvp(const VariableFunction& f, const VariableList& inputs, const VariableList& tangents,
                                  bool create_graph) {
  const VariableList xs = prepare(f, inputs, create_graph, "jvp");
  check_like(tangents, xs, "tangents", "jvp");
  const Variable y = run(f, xs, "jvp");
  // g(w) = J^T w, recorded, for a dummy w of y's shape (its value does not matter: g is linear in w)
  const Variable w(zeros(y.shape(), y.dtype()), true);
  const VariableList g = grad({y}, xs, {.grad_outputs = {w}, .create_graph = true, .allow_unused = true});
  // d/dw sum_i <g_i(w), u_i> = J u
  VariableList outs, weights;
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i].defined() && g[i].requires_grad()) outs.push_back(g[i]), weights.push_back(tangents[i]);
  if (outs.empty()) return {y.detach(), Variable(zeros(y.shape(), y.dtype()))};  // f does not depend on x
  const VariableList ju =
      grad(outs, {w}, {.grad_outputs = weights, .create_graph = create_graph, .allow_unused = true});
  return {create_graph ? y : y.detach(), ju[0].defined() ? ju[0] : Variable(zeros(y.shape(), y.dtype()))};
}

std::pair<Variable, VariableList> hvp(const VariableFunction& f, const VariableList& inputs, const VariableList& v,
                                      bool create_graph) {
  const VariableList xs = prepare(f, inputs, create_graph, "hvp");
  check_like(v, xs, "vectors", "hvp");
  const Variable y = run(f, xs, "hvp");
  MG_CHECK(y.numel() == 1, ShapeError, "hvp: the function must return one element (a loss), got shape {}",
           shape_str(y.shape()));
  const VariableList g = grad({y}, xs, {.create_graph = true, .allow_unused = true});
  VariableList outs, weights;
  VariableList hv(xs.size());
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i].defined() && g[i].requires_grad()) outs.push_back(g[i]), weights.push_back(v[i]);
  if (!outs.empty())  // else f is linear in x: H = 0
    hv = grad(outs, xs, {.grad_outputs = weights, .create_graph = create_graph, .allow_unused = true});
  return {create_graph ? y : y.detach(), zeros_for_unused(hv, xs)};
}

}  // namespace mg
