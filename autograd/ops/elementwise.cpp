// Elementwise ops. Binary ops return gradients in the broadcast output shape; the engine sums
// them back down to each input's shape (autograd/engine.cpp), so no op here undoes broadcasting.
#include "minigrad/autograd/ops/elementwise.h"
#include <cmath>

#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/shape.h"

namespace mg {

// Every rule below is written once, as a template over the kind of value V it works on: Tensor for an
// ordinary backward (the kernels run, nothing is recorded), Variable for a backward with
// create_graph (each op in the rule is recorded, so the gradient can be differentiated again).
// See record() in autograd/variable.h and docs/08-higher-order.md.

// y = a + b            da = dy      db = dy
Variable add(const Variable& a, const Variable& b) {
  return record("add", mg::add(a.data(), b.data()), {a, b}, keep(),
                []<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {dy, dy};
                });
}

// y = a - b            da = dy      db = -dy
Variable sub(const Variable& a, const Variable& b) {
  return record("sub", mg::sub(a.data(), b.data()), {a, b}, keep(),
                []<class V>(const V& dy, const Saved<V, 0>&, const Node& n) -> Grads<V> {
                  return {dy, n.needs(1) ? -dy : V()};
                });
}

// y = a * b            da = dy * b  db = dy * a
Variable mul(const Variable& a, const Variable& b) {
  return record("mul", mg::mul(a.data(), b.data()), {a, b}, keep(0, 1),
                []<class V>(const V& dy, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
                  const auto& [a, b] = s;
                  return {n.needs(0) ? dy * b : V(), n.needs(1) ? dy * a : V()};
                });
}

// y = a / b            da = dy / b  db = -dy * a / b^2
Variable div(const Variable& a, const Variable& b) {
  return record("div", mg::div(a.data(), b.data()), {a, b}, keep(0, 1),
                []<class V>(const V& dy, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
                  const auto& [a, b] = s;
                  return {n.needs(0) ? dy / b : V(), n.needs(1) ? -(dy * a) / (b * b) : V()};
                });
}

// y = -x               dx = -dy
Variable neg(const Variable& x) {
  return record("neg", mg::neg(x.data()), {x}, keep(),
                []<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> { return {-dy}; });
}

// y = x^p              dx = dy * p * x^(p-1)      (p = 0: dx = 0, also at x = 0 where x^-1 is inf)
Variable pow(const Variable& x, double p) {
  return record("pow", mg::pow(x.data(), p), {x}, keep(0),
                [p]<class V>(const V& dy, const Saved<V, 1>& s, const Node&) -> Grads<V> {
                  if (p == 0) return {V(zeros(dy.shape(), dy.dtype()))};
                  return {dy * mg::pow(s[0], p - 1) * p};
                });
}

// y = e^x              dx = dy * y
Variable exp(const Variable& x) {
  return record("exp", mg::exp(x.data()), {x}, keep(kOutput),
                []<class V>(const V& dy, const Saved<V, 1>& y, const Node&) -> Grads<V> { return {dy * y[0]}; });
}

// y = log x            dx = dy / x
Variable log(const Variable& x) {
  return record("log", mg::log(x.data()), {x}, keep(0),
                []<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> { return {dy / x[0]}; });
}

// y = sqrt x           dx = dy / (2 y)
Variable sqrt(const Variable& x) {
  return record(
      "sqrt", mg::sqrt(x.data()), {x}, keep(kOutput),
      []<class V>(const V& dy, const Saved<V, 1>& y, const Node&) -> Grads<V> { return {dy / (y[0] * 2.0)}; });
}

// y = |x|              dx = dy * sign(x)
Variable abs(const Variable& x) {
  return record("abs", mg::abs(x.data()), {x}, keep(0),
                []<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> { return {dy * sign(x[0])}; });
}

// y = sign(x) (-1, 0 or 1)     dx = 0 (a step function: flat wherever it has a derivative)
Variable sign(const Variable& x) {
  return record("sign", mg::sign(x.data()), {x}, keep(),
                []<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {V(zeros(dy.shape(), dy.dtype()))};
                });
}

// y = tanh x           dx = dy * (1 - y^2)
Variable tanh(const Variable& x) {
  return record(
      "tanh", mg::tanh(x.data()), {x}, keep(kOutput),
      []<class V>(const V& dy, const Saved<V, 1>& y, const Node&) -> Grads<V> { return {tanh_backward(dy, y[0])}; });
}

// z = dy (1 - y^2)     d(dy) = dz (1 - y^2)     dy_ = -2 dz dy y      (tanh's backward as an op)
Variable tanh_backward(const Variable& dy, const Variable& y) {
  return record("tanh_backward", mg::tanh_backward(dy.data(), y.data()), {dy, y}, keep(0, 1),
                []<class V>(const V& dz, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
                  const auto& [dy, y] = s;
                  return {n.needs(0) ? tanh_backward(dz, y) : V(), n.needs(1) ? dz * dy * y * -2.0 : V()};
                });
}

// y = sigmoid x        dx = dy * y * (1 - y)
Variable sigmoid(const Variable& x) {
  return record(
      "sigmoid", mg::sigmoid(x.data()), {x}, keep(kOutput),
      []<class V>(const V& dy, const Saved<V, 1>& y, const Node&) -> Grads<V> { return {sigmoid_backward(dy, y[0])}; });
}

// z = dy y (1 - y)     d(dy) = dz y (1 - y)     dy_ = dz dy (1 - 2y)  (sigmoid's backward as an op)
Variable sigmoid_backward(const Variable& dy, const Variable& y) {
  return record("sigmoid_backward", mg::sigmoid_backward(dy.data(), y.data()), {dy, y}, keep(0, 1),
                []<class V>(const V& dz, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
                  const auto& [dy, y] = s;
                  return {n.needs(0) ? sigmoid_backward(dz, y) : V(), n.needs(1) ? dz * dy * (y * -2.0 + 1.0) : V()};
                });
}

// y = sin x            dx = dy cos x
Variable sin(const Variable& x) {
  return record(
      "sin", mg::sin(x.data()), {x}, keep(0),
      []<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> { return {dy * mg::cos(x[0])}; });
}

// y = cos x            dx = -dy sin x
Variable cos(const Variable& x) {
  return record(
      "cos", mg::cos(x.data()), {x}, keep(0),
      []<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> { return {-(dy * mg::sin(x[0]))}; });
}

// y = log(1 + x)       dx = dy / (1 + x)
Variable log1p(const Variable& x) {
  return record(
      "log1p", mg::log1p(x.data()), {x}, keep(0),
      []<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> { return {dy / (x[0] + 1.0)}; });
}

// y = e^x - 1          dx = dy (y + 1)
Variable expm1(const Variable& x) {
  return record(
      "expm1", mg::expm1(x.data()), {x}, keep(kOutput),
      []<class V>(const V& dy, const Saved<V, 1>& y, const Node&) -> Grads<V> { return {dy * (y[0] + 1.0)}; });
}

// y = min(max(x, lo), hi)      dx = dy where lo <= x <= hi, else 0
Variable clamp(const Variable& x, std::optional<double> min, std::optional<double> max) {
  return record("clamp", mg::clamp(x.data(), min, max), {x}, keep(0),
                [min, max]<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> {
                  return {clamp_backward(dy, x[0], min, max)};
                });
}

// z = dy where lo <= x <= hi, else 0      d(dy) = the same mask on dz     dx = 0 (x only picks)
Variable clamp_backward(const Variable& dy, const Variable& x, std::optional<double> min, std::optional<double> max) {
  return record("clamp_backward", mg::clamp_backward(dy.data(), x.data(), min, max), {dy, x}, keep(1),
                [min, max]<class V>(const V& dz, const Saved<V, 1>& x, const Node& n) -> Grads<V> {
                  return {n.needs(0) ? clamp_backward(dz, x[0], min, max) : V(), V()};
                });
}

// y = max(a, b)        da = dy where a > b, db = dy where b > a; a tie splits dy in halves (PyTorch's rule)
// Which input won is decided by the numbers alone: under create_graph the masks are constants.
Variable maximum(const Variable& a, const Variable& b) {
  return record("maximum", mg::maximum(a.data(), b.data()), {a, b}, keep(0, 1),
                []<class V>(const V& dy, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
                  const Tensor &a = tensor_of(s[0]), &b = tensor_of(s[1]), tie = eq(a, b);
                  const V half = dy * 0.5, zero(zeros({}, dy.dtype()));
                  return {n.needs(0) ? mg::where(tie, half, mg::where(gt(a, b), dy, zero)) : V(),
                          n.needs(1) ? mg::where(tie, half, mg::where(gt(b, a), dy, zero)) : V()};
                });
}

// y = min(a, b)        da = dy where a < b, db = dy where b < a; a tie splits dy in halves
Variable minimum(const Variable& a, const Variable& b) {
  return record("minimum", mg::minimum(a.data(), b.data()), {a, b}, keep(0, 1),
                []<class V>(const V& dy, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
                  const Tensor &a = tensor_of(s[0]), &b = tensor_of(s[1]), tie = eq(a, b);
                  const V half = dy * 0.5, zero(zeros({}, dy.dtype()));
                  return {n.needs(0) ? mg::where(tie, half, mg::where(lt(a, b), dy, zero)) : V(),
                          n.needs(1) ? mg::where(tie, half, mg::where(lt(b, a), dy, zero)) : V()};
                });
}

// y = mask ? value : x     dx = mask ? 0 : dy
Variable masked_fill(const Variable& x, const Tensor& mask, double value) {
  return record("masked_fill", mg::masked_fill(x.data(), mask, value), {x}, keep(),
                [mask]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {mg::masked_fill(dy, mask, 0.0)};
                },
                {mask});
}

// y = cond ? a : b     da = cond ? dy : 0   db = cond ? 0 : dy
Variable where(const Tensor& cond, const Variable& a, const Variable& b) {
  return record("where", mg::where(cond, a.data(), b.data()), {a, b}, keep(),
                [cond]<class V>(const V& dy, const Saved<V, 0>&, const Node& n) -> Grads<V> {
                  const V zero(zeros({}, dy.dtype()));
                  return {n.needs(0) ? mg::where(cond, dy, zero) : V(), n.needs(1) ? mg::where(cond, zero, dy) : V()};
                },
                {cond});
}

namespace {
// A number beside a variable: a 0-dim constant of its dtype, if that dtype holds the number exactly
// (beside a bfloat16 one, a float32 constant: the number as PyTorch reads it, see tensor's scalar_for).
Variable constant(double v, const Variable& like, std::string_view op) {
  MG_CHECK(like.defined(), StateError, "{}: the variable is undefined", op);
  if (like.dtype() == DType::BFloat16) return Variable(scalar_tensor(v, DType::Float32));
  visit_all(like.dtype(), op, [&]<class T>() { checked_cast<T>(v, op); });
  return Variable(scalar_tensor(v, like.dtype()));
}
}  // namespace

Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
Variable operator-(const Variable& x) { return neg(x); }
Variable operator+(const Variable& a, double b) { return add(a, constant(b, a, "add")); }
Variable operator-(const Variable& a, double b) { return sub(a, constant(b, a, "sub")); }
Variable operator*(const Variable& a, double b) { return mul(a, constant(b, a, "mul")); }
Variable operator/(const Variable& a, double b) { return div(a, constant(b, a, "div")); }
Variable operator+(double a, const Variable& b) { return add(constant(a, b, "add"), b); }
Variable operator-(double a, const Variable& b) { return sub(constant(a, b, "sub"), b); }
Variable operator*(double a, const Variable& b) { return mul(constant(a, b, "mul"), b); }
Variable operator/(double a, const Variable& b) { return div(constant(a, b, "div"), b); }

// y = start + w (end - start) for w < 0.5, end - (end - start)(1 - w) otherwise (the same value,
// rounded closer to end near w = 1); each a differentiable expression, so where() routes the
// gradient: d start = 1 - w, d end = w, d w = end - start.
Variable lerp(const Variable& start, const Variable& end, const Variable& weight) {
  const OpScope scope("lerp");
  MG_CHECK(start.defined() && end.defined() && weight.defined(), StateError, "lerp: an operand is undefined");
  const Variable diff = end - start;
  const Tensor low = lt(weight.data(), full({}, 0.5, weight.dtype()));
  return where(low, start + weight * diff, end - diff * (1.0 - weight));
}

Variable lerp(const Variable& start, const Variable& end, double weight) {
  const OpScope scope("lerp");
  MG_CHECK(start.defined() && end.defined(), StateError, "lerp: an operand is undefined");
  MG_CHECK(std::isfinite(weight), ValueError, "lerp: weight must be finite, got {}", weight);
  const Variable diff = end - start;
  return weight < 0.5 ? start + diff * weight : end - diff * (1 - weight);
}

}  // namespace mg
