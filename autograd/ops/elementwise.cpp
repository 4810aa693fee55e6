// Elementwise ops. Binary ops return gradients in the broadcast output shape; the engine sums
// them back down to each input's shape (autograd/engine.cpp), so no op here undoes broadcasting.
#include "minigrad/autograd/ops/elementwise.h"

#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/shape.h"

namespace mg {

// y = a + b            da = dy      db = dy
Variable add(const Variable& a, const Variable& b) {
  return record("add", mg::add(a.data(), b.data()), {a, b}, [](const Tensor& dy, const Node&) -> TensorList {
    return {dy, dy};
  });
}

// y = a - b            da = dy      db = -dy
Variable sub(const Variable& a, const Variable& b) {
  return record("sub", mg::sub(a.data(), b.data()), {a, b}, [](const Tensor& dy, const Node& n) -> TensorList {
    return {dy, n.needs(1) ? neg(dy) : Tensor()};
  });
}

// y = a * b            da = dy * b  db = dy * a
Variable mul(const Variable& a, const Variable& b) {
  return record("mul", mg::mul(a.data(), b.data()), {a, b},
                [a = a.data(), b = b.data()](const Tensor& dy, const Node& n) -> TensorList {
                  return {n.needs(0) ? dy * b : Tensor(), n.needs(1) ? dy * a : Tensor()};
                });
}

// y = a / b            da = dy / b  db = -dy * a / b^2
Variable div(const Variable& a, const Variable& b) {
  return record("div", mg::div(a.data(), b.data()), {a, b},
                [a = a.data(), b = b.data()](const Tensor& dy, const Node& n) -> TensorList {
                  return {n.needs(0) ? dy / b : Tensor(), n.needs(1) ? -(dy * a) / (b * b) : Tensor()};
                });
}

// y = -x               dx = -dy
Variable neg(const Variable& x) {
  return record("neg", mg::neg(x.data()), {x}, [](const Tensor& dy, const Node&) -> TensorList { return {neg(dy)}; });
}

// y = x^p              dx = dy * p * x^(p-1)      (p = 0: dx = 0, also at x = 0 where x^-1 is inf)
Variable pow(const Variable& x, double p) {
  return record("pow", mg::pow(x.data(), p), {x}, [x = x.data(), p](const Tensor& dy, const Node&) -> TensorList {
    if (p == 0) return {zeros(dy.shape(), dy.dtype())};
    return {dy * mg::pow(x, p - 1) * p};
  });
}

// y = e^x              dx = dy * y
Variable exp(const Variable& x) {
  Tensor y = mg::exp(x.data());
  return record("exp", y, {x}, [y](const Tensor& dy, const Node&) -> TensorList { return {dy * y}; });
}

// y = log x            dx = dy / x
Variable log(const Variable& x) {
  return record("log", mg::log(x.data()), {x},
                [x = x.data()](const Tensor& dy, const Node&) -> TensorList { return {dy / x}; });
}

// y = sqrt x           dx = dy / (2 y)
Variable sqrt(const Variable& x) {
  Tensor y = mg::sqrt(x.data());
  return record("sqrt", y, {x}, [y](const Tensor& dy, const Node&) -> TensorList { return {dy / (y * 2.0)}; });
}

// y = |x|              dx = dy * sign(x)
Variable abs(const Variable& x) {
  return record("abs", mg::abs(x.data()), {x},
                [x = x.data()](const Tensor& dy, const Node&) -> TensorList { return {dy * sign(x)}; });
}

// y = tanh x           dx = dy * (1 - y^2)
Variable tanh(const Variable& x) {
  Tensor y = mg::tanh(x.data());
  return record("tanh", y, {x}, [y](const Tensor& dy, const Node&) -> TensorList { return {tanh_backward(dy, y)}; });
}

// y = sigmoid x        dx = dy * y * (1 - y)
Variable sigmoid(const Variable& x) {
  Tensor y = mg::sigmoid(x.data());
  return record("sigmoid", y, {x},
                [y](const Tensor& dy, const Node&) -> TensorList { return {sigmoid_backward(dy, y)}; });
}

// y = sin x            dx = dy cos x
Variable sin(const Variable& x) {
  return record("sin", mg::sin(x.data()), {x},
                [x = x.data()](const Tensor& dy, const Node&) -> TensorList { return {dy * mg::cos(x)}; });
}

// y = cos x            dx = -dy sin x
Variable cos(const Variable& x) {
  return record("cos", mg::cos(x.data()), {x},
                [x = x.data()](const Tensor& dy, const Node&) -> TensorList { return {-(dy * mg::sin(x))}; });
}

// y = log(1 + x)       dx = dy / (1 + x)
Variable log1p(const Variable& x) {
  return record("log1p", mg::log1p(x.data()), {x},
                [x = x.data()](const Tensor& dy, const Node&) -> TensorList { return {dy / (x + 1.0)}; });
}

// y = e^x - 1          dx = dy (y + 1)
Variable expm1(const Variable& x) {
  Tensor y = mg::expm1(x.data());
  return record("expm1", y, {x}, [y](const Tensor& dy, const Node&) -> TensorList { return {dy * (y + 1.0)}; });
}

// y = min(max(x, lo), hi)      dx = dy where lo <= x <= hi, else 0
Variable clamp(const Variable& x, std::optional<double> min, std::optional<double> max) {
  return record("clamp", mg::clamp(x.data(), min, max), {x},
                [x = x.data(), min, max](const Tensor& dy, const Node&) -> TensorList {
                  return {clamp_backward(dy, x, min, max)};
                });
}

// y = max(a, b)        da = dy where a > b, db = dy where b > a; a tie splits dy in halves (PyTorch's rule)
Variable maximum(const Variable& a, const Variable& b) {
  return record("maximum", mg::maximum(a.data(), b.data()), {a, b},
                [a = a.data(), b = b.data()](const Tensor& dy, const Node& n) -> TensorList {
                  const Tensor half = dy * 0.5, zero = zeros({}, dy.dtype()), tie = eq(a, b);
                  return {n.needs(0) ? mg::where(tie, half, mg::where(gt(a, b), dy, zero)) : Tensor(),
                          n.needs(1) ? mg::where(tie, half, mg::where(gt(b, a), dy, zero)) : Tensor()};
                });
}

// y = min(a, b)        da = dy where a < b, db = dy where b < a; a tie splits dy in halves
Variable minimum(const Variable& a, const Variable& b) {
  return record("minimum", mg::minimum(a.data(), b.data()), {a, b},
                [a = a.data(), b = b.data()](const Tensor& dy, const Node& n) -> TensorList {
                  const Tensor half = dy * 0.5, zero = zeros({}, dy.dtype()), tie = eq(a, b);
                  return {n.needs(0) ? mg::where(tie, half, mg::where(lt(a, b), dy, zero)) : Tensor(),
                          n.needs(1) ? mg::where(tie, half, mg::where(lt(b, a), dy, zero)) : Tensor()};
                });
}

// y = mask ? value : x     dx = mask ? 0 : dy
Variable masked_fill(const Variable& x, const Tensor& mask, double value) {
  return record("masked_fill", mg::masked_fill(x.data(), mask, value), {x},
                [mask](const Tensor& dy, const Node&) -> TensorList { return {mg::masked_fill(dy, mask, 0.0)}; });
}

// y = cond ? a : b     da = cond ? dy : 0   db = cond ? 0 : dy
Variable where(const Tensor& cond, const Variable& a, const Variable& b) {
  return record(
      "where", mg::where(cond, a.data(), b.data()), {a, b}, [cond](const Tensor& dy, const Node& n) -> TensorList {
        const Tensor zero = zeros({}, dy.dtype());
        return {n.needs(0) ? mg::where(cond, dy, zero) : Tensor(), n.needs(1) ? mg::where(cond, zero, dy) : Tensor()};
      });
}

namespace {
// A number beside a variable: a 0-dim constant of its dtype, if that dtype holds the number exactly.
Variable constant(double v, const Variable& like, std::string_view op) {
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

}  // namespace mg
