// Elementwise ops. Binary ops return gradients in the broadcast output shape; the engine sums
// them back down to each input's shape (autograd/engine.cpp), so no op here undoes broadcasting.
#include <cmath>
#include <numbers>

#include "autograd/ops.h"
#include "tensor/fastmath.h"
#include "tensor/loops.h"

namespace mg {

// y = a + b            da = dy      db = dy
Variable add(const Variable& a, const Variable& b) {
  return record("add", mg::add(a.data(), b.data()), {a, b},
                [](const Tensor& dy, const Node&) -> TensorList { return {dy, dy}; });
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

// y = x^p              dx = dy * p * x^(p-1)
Variable pow(const Variable& x, double p) {
  return record("pow", mg::pow(x.data(), p), {x}, [x = x.data(), p](const Tensor& dy, const Node&) -> TensorList {
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
  return record("log", mg::log(x.data()), {x}, [x = x.data()](const Tensor& dy, const Node&) -> TensorList {
    return {dy / x};
  });
}

// y = sqrt x           dx = dy / (2 y)
Variable sqrt(const Variable& x) {
  Tensor y = mg::sqrt(x.data());
  return record("sqrt", y, {x}, [y](const Tensor& dy, const Node&) -> TensorList { return {dy / (y * 2.0)}; });
}

// y = |x|              dx = dy * sign(x)
Variable abs(const Variable& x) {
  return record("abs", mg::abs(x.data()), {x}, [x = x.data()](const Tensor& dy, const Node&) -> TensorList {
    return {dy * sign(x)};
  });
}

// y = tanh x           dx = dy * (1 - y^2)
Variable tanh(const Variable& x) {
  Tensor y = mg::tanh(x.data());
  return record("tanh", y, {x}, [y](const Tensor& dy, const Node&) -> TensorList {
    return {visit_float(y.dtype(), "tanh backward", [&]<class T>() {
      return detail::map_binary<T, T>(dy, y, [](T g, T t) { return g * (T(1) - t * t); }, "tanh backward");
    })};
  });
}

// y = sigmoid x        dx = dy * y * (1 - y)
Variable sigmoid(const Variable& x) {
  Tensor y = mg::sigmoid(x.data());
  return record("sigmoid", y, {x}, [y](const Tensor& dy, const Node&) -> TensorList {
    return {visit_float(y.dtype(), "sigmoid backward", [&]<class T>() {
      return detail::map_binary<T, T>(dy, y, [](T g, T s) { return g * s * (T(1) - s); }, "sigmoid backward");
    })};
  });
}

// y = max(x, 0)        dx = dy where x > 0, else 0
Variable relu(const Variable& x) {
  return record("relu", mg::relu(x.data()), {x}, [x = x.data()](const Tensor& dy, const Node&) -> TensorList {
    return {visit_float(x.dtype(), "relu backward", [&]<class T>() {
      return detail::map_binary<T, T>(dy, x, [](T g, T v) { return v > 0 ? g : T(0); }, "relu backward");
    })};
  });
}

// erf form:  y = x Phi(x)                      dx = dy * (Phi(x) + x phi(x))
// tanh form: y = x/2 (1 + tanh u), u = c (x + 0.044715 x^3), c = sqrt(2/pi)
//            dx = dy * (1/2 (1 + tanh u) + x/2 (1 - tanh^2 u) c (1 + 3 * 0.044715 x^2))
Variable gelu(const Variable& x, const std::string& approximate) {
  MG_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
  const bool tanh_form = approximate == "tanh";
  Tensor y = tanh_form ? gelu_tanh(x.data()) : mg::gelu(x.data());
  return record(tanh_form ? "gelu_tanh" : "gelu", y, {x},
                [x = x.data(), tanh_form](const Tensor& dy, const Node&) -> TensorList {
                  return {visit_float(x.dtype(), "gelu backward", [&]<class T>() {
                    if (tanh_form)
                      return detail::map_binary<T, T>(dy, x, [](T g, T v) {
                        const T c = T(0.7978845608028654), k = T(0.044715);
                        const T t = std::tanh(c * (v + k * v * v * v));
                        return g * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * c * (T(1) + T(3) * k * v * v));
                      }, "gelu backward");
                    return detail::map_binary<T, T>(dy, x, [](T g, T v) {
                      const T cdf = T(0.5) * (T(1) + fast::erf(v * T(std::numbers::sqrt2 / 2)));
                      const T pdf = fast::exp(T(-0.5) * v * v) * T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
                      return g * (cdf + v * pdf);
                    }, "gelu backward");
                  })};
                });
}

// y = mask ? value : x     dx = mask ? 0 : dy
Variable masked_fill(const Variable& x, const Tensor& mask, double value) {
  return record("masked_fill", mg::masked_fill(x.data(), mask, value), {x},
                [mask](const Tensor& dy, const Node&) -> TensorList { return {mg::masked_fill(dy, mask, 0.0)}; });
}

// y = cond ? a : b     da = cond ? dy : 0   db = cond ? 0 : dy
Variable where(const Tensor& cond, const Variable& a, const Variable& b) {
  return record("where", mg::where(cond, a.data(), b.data()), {a, b},
                [cond](const Tensor& dy, const Node& n) -> TensorList {
                  const Tensor zero = zeros({}, dy.dtype());
                  return {n.needs(0) ? mg::where(cond, dy, zero) : Tensor(),
                          n.needs(1) ? mg::where(cond, zero, dy) : Tensor()};
                });
}

namespace {
Variable constant(double v, const Variable& like) { return Variable(scalar_tensor(v, like.dtype())); }
}  // namespace

Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
Variable operator-(const Variable& x) { return neg(x); }
Variable operator+(const Variable& a, double b) { return add(a, constant(b, a)); }
Variable operator-(const Variable& a, double b) { return sub(a, constant(b, a)); }
Variable operator*(const Variable& a, double b) { return mul(a, constant(b, a)); }
Variable operator/(const Variable& a, double b) { return div(a, constant(b, a)); }
Variable operator+(double a, const Variable& b) { return add(constant(a, b), b); }
Variable operator-(double a, const Variable& b) { return sub(constant(a, b), b); }
Variable operator*(double a, const Variable& b) { return mul(constant(a, b), b); }
Variable operator/(double a, const Variable& b) { return div(constant(a, b), b); }

}  // namespace mg
