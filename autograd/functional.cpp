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

// f(xs), checked: defined, and under strict depending on the inputs. Without strict an output that
// does not depend on them (a constant, or the derivative of a piecewise linear function such as max)
// has derivative 0, as in torch.autograd.functional.
Variable run(const VariableFunction& f, const VariableList& xs, bool strict, const char* op) {
  const EnableGradGuard recording;
  Variable y = f(xs);
  MG_CHECK(y.defined(), StateError, "{}: the function returned an undefined Variable", op);
  MG_CHECK(!strict || y.requires_grad(), ValueError,
           "{}: the function's output does not depend on its inputs (it was computed from constants, or under "
           "NoGradGuard), which strict mode refuses; without strict the derivative is zero",
           op);
  return y;
}

// strict: every input must reach the output (g[i] defined), as torch.autograd.functional's strict.
void check_every_input_used(const VariableList& g, bool strict, const char* what, const char* op) {
  for (size_t i = 0; strict && i < g.size(); ++i)
    MG_CHECK(g[i].defined(), ValueError,
             "{}: the {} is independent of input {}, which strict mode refuses; without strict that part is zero", op,
             what, i);
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
                                      bool create_graph, bool strict) {
  const VariableList xs = prepare(f, inputs, create_graph, "vjp");
  const Variable y = run(f, xs, strict, "vjp");
  if (!y.requires_grad()) {  // a constant output: v^T J = 0 (v still checked against it)
    MG_CHECK(!v.defined() || v.shape() == y.shape(), ShapeError, "vjp: v has shape {} but the output has {}",
             shape_str(v.shape()), shape_str(y.shape()));
    return {y, zeros_for_unused(VariableList(xs.size()), xs)};
  }
  MG_CHECK(!v.defined() || v.shape() == y.shape(), ShapeError, "vjp: v has shape {} but the function's output has {}",
           shape_str(v.shape()), shape_str(y.shape()));
  MG_CHECK(!v.defined() || v.dtype() == y.dtype(), DTypeError, "vjp: v is {} but the function's output is {}",
           dtype_name(v.dtype()), dtype_name(y.dtype()));
  const OpScope scope("vjp");  // what grad raises names vjp (not the function f, which ran above)
  const VariableList g = grad({y}, xs, {.grad_outputs = {v}, .create_graph = create_graph, .allow_unused = true});
  check_every_input_used(g, strict, "output", "vjp");
  return {create_graph ? y : y.detach(), zeros_for_unused(g, xs)};
}

std::pair<Variable, Variable> jvp(const VariableFunction& f, const VariableList& inputs, const VariableList& tangents,
                                  bool create_graph, bool strict) {
  const VariableList xs = prepare(f, inputs, create_graph, "jvp");
  check_like(tangents, xs, "tangents", "jvp");
  const Variable y = run(f, xs, strict, "jvp");
  if (!y.requires_grad()) return {y, Variable(zeros(y.shape(), y.dtype()))};  // a constant: J u = 0
  // g(w) = J^T w, recorded, for a dummy w of y's shape (its value does not matter: g is linear in w)
  const OpScope scope("jvp");
  const Variable w(zeros(y.shape(), y.dtype()), true);
  const VariableList g = grad({y}, xs, {.grad_outputs = {w}, .create_graph = true, .allow_unused = true});
  check_every_input_used(g, strict, "output", "jvp");
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
                                      bool create_graph, bool strict) {
  const VariableList xs = prepare(f, inputs, create_graph, "hvp");
  check_like(v, xs, "vectors", "hvp");
  const Variable y = run(f, xs, strict, "hvp");
  MG_CHECK(y.numel() == 1, ShapeError, "hvp: the function must return one element (a loss), got shape {}",
           shape_str(y.shape()));
  if (!y.requires_grad()) return {y, zeros_for_unused(VariableList(xs.size()), xs)};  // a constant: H = 0
  const OpScope scope("hvp");
  const VariableList g = grad({y}, xs, {.create_graph = true, .allow_unused = true});
  check_every_input_used(g, strict, "output", "hvp");
  VariableList outs, weights;
  VariableList hv(xs.size());
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i].defined() && g[i].requires_grad()) outs.push_back(g[i]), weights.push_back(v[i]);
  if (!outs.empty())  // else f is linear in x: H = 0
    hv = grad(outs, xs, {.grad_outputs = weights, .create_graph = create_graph, .allow_unused = true});
  check_every_input_used(hv, strict, "gradient (so the Hessian's row)", "hvp");
  return {create_graph ? y : y.detach(), zeros_for_unused(hv, xs)};
}

}  // namespace mg
