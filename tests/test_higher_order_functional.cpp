// The functional transforms: vjp, jvp and hvp against finite differences, each other and a
// quadratic's Hessian, their errors and their strict mode; H v the same for inputs in any layout,
// zero-size, 0-dim or expanded; and dual numbers (forward mode, one pass) against jvp.
#include <cmath>

#include "higher_order_helpers.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;
using mgtest::away_from_zero;
using mgtest::ints;
using mgtest::leaf;

// ---- vjp, jvp, hvp ----

namespace {
// f(x, y) = sum over rows of tanh(x W) * y, a function of two inputs with a (2, 3) output
Variable two_input_fn(const V& in) {
  const Tensor W = rnd({3, 3}, 40);
  return tanh(matmul(in[0], Variable(W))) * in[1];
}
}  // namespace

TEST(HigherOrder, JvpEqualsFiniteDifferencesAndVjpIsItsTranspose) {
  const Tensor x = rnd({2, 3}, 41), y = rnd({2, 3}, 42), u = rnd({2, 3}, 43), w = rnd({2, 3}, 44);
  const Tensor uy = rnd({2, 3}, 45), v = rnd({2, 3}, 46);
  const auto [fx, ju] = jvp(two_input_fn, {Variable(x), Variable(y)}, {Variable(u), Variable(uy)});
  // central differences of f along (u, uy)
  const double h = 1e-6;
  Tensor fp, fm;
  {
    const NoGradGuard ng;
    fp = two_input_fn({Variable(x + u * h), Variable(y + uy * h)}).data();
    fm = two_input_fn({Variable(x - u * h), Variable(y - uy * h)}).data();
  }
  expect_close(ju.data(), (fp - fm) / (2 * h), 1e-8, 1e-7);
  // <v, J u> = <J^T v, u>
  const auto [fx2, jt] = vjp(two_input_fn, {Variable(x), Variable(y)}, Variable(v));
  expect_close(fx2.data(), fx.data(), 0, 0);
  const double lhs = mg::sum(v * ju.data()).item();
  const double rhs = mg::sum(jt[0].data() * u).item() + mg::sum(jt[1].data() * uy).item();
  EXPECT_NEAR(lhs, rhs, 1e-13);
  (void)w;
}

TEST(HigherOrder, HvpOfAQuadraticIsTheSymmetrisedMatrix) {
  // f(x) = x^T A x has Hessian A + A^T: each hvp with a unit vector is one of its columns, exactly
  const Tensor A = rnd({4, 4}, 47), x = rnd({4}, 48);
  auto f = [A](const V& in) { return matmul(in[0], matmul(Variable(A), in[0])); };
  const Tensor H = A + A.transpose(0, 1);
  for (int64_t j = 0; j < 4; ++j) {
    Tensor e = zeros({4}, DType::Float64);
    e.narrow(0, j, 1).fill_(1);
    const auto [fx, hv] = hvp(f, {Variable(x)}, {Variable(e)});
    expect_close(hv[0].data(), H.narrow(1, j, 1).reshape({4}), 1e-15, 0);
  }
}

TEST(HigherOrder, FunctionalErrors) {
  const Variable x(rnd({3}, 49));
  auto f = [](const V& in) { return sum(exp(in[0])); };
  EXPECT_THROW(jvp(f, {x}, {Variable(rnd({2}, 1))}), ShapeError);
  EXPECT_THROW(jvp(f, {x}, {Variable(rnd({3}, 1).to(DType::Float32))}), DTypeError);
  EXPECT_THROW(vjp(VariableFunction(), {x}), ValueError);
  EXPECT_THROW(gradgradcheck(mgtest::Fn(), {rnd({3}, 1)}), ValueError);
  EXPECT_THROW(
      gradgradcheck([](const V& in) { return Variable(in[0].data().to(DType::Float64)); }, {ints({1, 2}, {2})}),
      ValueError);
  try {
    const Variable w = leaf(1);
    grad({Variable(w.data() * 2.0)}, {w});  // an output with no history
    FAIL();
  } catch (const StateError& e) {
    EXPECT_THAT(e.what(), HasSubstr("grad: the output does not require grad"));
  }
  {
    const NoGradGuard ng;  // functional calls record what they need even inside one
    const Variable xr(rnd({3}, 50), true);
    const auto [value, hv] = hvp(f, {xr}, {Variable(ones({3}, DType::Float64))}, /*create_graph=*/true);
    EXPECT_NEAR(hv[0].data().at({1}), std::exp(xr.data().at({1})), 1e-15);
    EXPECT_TRUE(hv[0].requires_grad());  // through the alias of xr, recorded inside the guard
  }
  EXPECT_THROW(hvp(f, {x}, {}), ValueError);
  EXPECT_THROW(hvp([](const V& in) { return exp(in[0]); }, {x}, {Variable(rnd({3}, 2))}), ShapeError);  // not a scalar
  EXPECT_THROW(vjp([](const V&) { return Variable(zeros({1}, DType::Float64)); }, {x}, Variable(), false, true),
               ValueError);  // strict: an output independent of the inputs
  EXPECT_THROW(jvp(f, {Variable(ints({1, 2}, {2}))}, {Variable(rnd({2}, 3))}), DTypeError);
}

TEST(HigherOrder, OutputsThatDoNotDependOnAnInputGiveZerosUnlessStrict) {
  // The gradient of max is a one-hot vector whatever x is (away from ties): as a function of x it is
  // piecewise constant, its output carries no history, and its Jacobian is 0. torch.autograd.functional
  // returns zeros there (strict=False) and raises with strict=True; so do vjp, jvp and hvp.
  const auto grad_of_max = [](const V& in) { return grad({max(in[0])}, {in[0]}, {.create_graph = true})[0]; };
  const Variable x(tensor({0.5f, 2, -1}, {3}).to(DType::Float64)), u(rnd({3}, 7));
  const auto [gx, ju] = jvp(grad_of_max, {x}, {u});
  mgtest::expect_values(gx.data(), {3}, {0, 1, 0});
  mgtest::expect_values(ju.data(), {3}, {0, 0, 0});
  const auto [gx2, vj] = vjp(grad_of_max, {x}, Variable(rnd({3}, 8)));
  mgtest::expect_values(vj[0].data(), {3}, {0, 0, 0});
  const auto [l, hv] = hvp([](const V& in) { return sum(in[0] * 2.0); }, {x}, {u});  // linear: H = 0
  mgtest::expect_values(hv[0].data(), {3}, {0, 0, 0});
  try {
    jvp(grad_of_max, {x}, {u}, false, /*strict=*/true);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("jvp: the function's output does not depend on its inputs"));
  }
  // an input the function does not use: zeros for it, or with strict an error naming it
  const auto first_only = [](const V& in) { return sum(in[0] * in[0]); };
  const Variable y(rnd({2}, 9));
  const auto [v0, g] = vjp(first_only, {x, y});
  mgtest::expect_values(g[1].data(), {2}, {0, 0});
  try {
    vjp(first_only, {x, y}, Variable(), false, true);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("vjp: the output is independent of input 1"));
  }
  try {
    hvp([](const V& in) { return sum(in[0] * 2.0); }, {x}, {u}, false, true);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("hvp: the gradient (so the Hessian's row) is independent of input 0"));
  }
}

// ---- H v for inputs in any layout and of any size ----

TEST(HigherOrder, SecondDerivativesDoNotDependOnTheInputsLayout) {
  // H v for the same numbers laid out contiguously, transposed, strided and at an offset: the same
  // answer (the rules under create_graph read their saved inputs through any strides).
  const Tensor base = rnd({4, 3}, 80), v = rnd({4, 3}, 81), w = rnd({3, 5}, 82), wv = rnd({4, 3}, 83);
  const Tensor t = ints({0, 2, 1, 1}, {4});
  const Tensor transposed = base.transpose(0, 1).contiguous().transpose(0, 1);
  Tensor wide = zeros({4, 6}, DType::Float64);
  wide.slice(1, 0, 6, 2).copy_(base);
  Tensor padded = zeros({6, 3}, DType::Float64);
  padded.narrow(0, 2, 4).copy_(base);
  const std::vector<Tensor> layouts = {transposed, wide.slice(1, 0, 6, 2), padded.narrow(0, 2, 4)};
  const std::vector<std::pair<std::string, std::function<Variable(const Variable&)>>> fns = {
      {"matmul", [&](const Variable& x) { return matmul(x, transpose(x, 0, 1)) * matmul(x, Variable(w)).sum(); }},
      {"softmax", [&](const Variable& x) { return softmax(x * x, 1) * Variable(wv); }},
      {"log_softmax", [&](const Variable& x) { return log_softmax(x * x, 0) * Variable(wv); }},
      {"layer_norm", [&](const Variable& x) { return layer_norm(x * x, {3}) * Variable(wv); }},
      {"linear_gelu", [&](const Variable& x) { return linear_gelu(x, transpose(Variable(w), 0, 1)); }},
      {"cross_entropy", [&](const Variable& x) { return cross_entropy(x * x, t); }},
      {"logsumexp", [&](const Variable& x) { return logsumexp(x * x, {1}); }},
      {"std", [&](const Variable& x) { return mg::std(x * x, {0}); }},
      {"attention",
       [&](const Variable& x) {
         const Variable q = reshape(x, {1, 1, 4, 3});
         return scaled_dot_product_attention(q, q * 0.5, q * q, {.is_causal = true});
       }},
  };
  for (const auto& named : fns) {
    SCOPED_TRACE(named.first);
    const auto& f = named.second;  // (a name, not a binding: the lambda below captures it)
    const VariableFunction loss = [&](const V& in) { return sum(pow(f(in[0]), 2)); };
    const Tensor want = hvp(loss, {Variable(base)}, {Variable(v)}).second[0].data();
    for (const Tensor& x : layouts) {
      ASSERT_TRUE(!x.is_contiguous() || x.offset() > 0);
      expect_close(hvp(loss, {Variable(x)}, {Variable(v)}).second[0].data(), want, 1e-14, 1e-13);
    }
  }
}

TEST(HigherOrder, SecondDerivativesOfZeroSizeZeroDimAndExpandedInputs) {
  const VariableFunction f = [](const V& in) { return sum(pow(tanh(matmul(in[0], in[1])), 2)); };
  // a batch of zero rows: the input's H v is empty, the weight's is zero (the loss is the empty sum)
  const auto [l0, h0] = hvp(f, {Variable(rnd({0, 3}, 100)), Variable(rnd({3, 2}, 101))},
                            {Variable(zeros({0, 3}, DType::Float64)), Variable(ones({3, 2}, DType::Float64))});
  EXPECT_EQ(h0[0].shape(), (Shape{0, 3}));
  expect_close(h0[1].data(), zeros({3, 2}, DType::Float64), 0, 0);
  EXPECT_TRUE(gradgradcheck([](const V& in) { return softmax(in[0], 1); }, {rnd({0, 3}, 102)}).ok);
  // 0-dim: (e^x sin x)'' = 2 e^x cos x
  const auto [l1, h1] = hvp([](const V& in) { return exp(in[0]) * sin(in[0]); }, {leaf(0.3)}, {leaf(1)});
  EXPECT_NEAR(h1[0].item(), 2 * std::exp(0.3) * std::cos(0.3), 1e-15);
  // an expanded (stride 0) input and weight give the H v of their contiguous copies
  const Tensor xe = rnd({1, 3}, 103).expand({4, 3}), we = rnd({3, 1}, 104).expand({3, 2});
  const V v = {Variable(rnd({4, 3}, 105)), Variable(rnd({3, 2}, 106))};
  const V a = hvp(f, {Variable(xe), Variable(we)}, v).second;
  const V b = hvp(f, {Variable(xe.contiguous()), Variable(we.contiguous())}, v).second;
  expect_close(a[0].data(), b[0].data(), 0, 0);
  expect_close(a[1].data(), b[1].data(), 0, 0);
}

// ---- dual numbers ----

TEST(HigherOrder, DualNumbersAgreeWithTheDoubleVjpOnEveryElementwiseOp) {
  // The same generic function three ways: on Duals (one forward pass), through jvp (two backwards),
  // and by central differences.
  const Tensor x = away_from_zero({2, 3}, 50, 0.2), y = rnd({2, 3}, 51, 0.5, 1.5), u = rnd({2, 3}, 52);
  const Tensor mask = gt(rnd({2, 3}, 53), scalar_tensor(0, DType::Float64));
  std::vector<std::pair<std::string, std::function<Dual(const Dual&, const Dual&)>>> dual_fns;
  std::vector<mgtest::Fn> var_fns;
#define BOTH(name, expr)                                          \
  dual_fns.emplace_back(name, [&](const Dual& a, const Dual& b) { \
    (void)a, (void)b;                                             \
    return expr;                                                  \
  });                                                             \
  var_fns.push_back([&](const V& in) {                            \
    const Variable &a = in[0], &b = in[1];                        \
    (void)a, (void)b;                                             \
    return expr;                                                  \
  })
  BOTH("add", a + b);
  BOTH("sub", a - b);
  BOTH("mul", a * b);
  BOTH("div", a / b);
  BOTH("neg", -a);
  BOTH("scalar", (a + 1.5) * 2.0 - b / 4.0);
  BOTH("exp", exp(a));
  BOTH("log", log(b));
  BOTH("sqrt", sqrt(b));
  BOTH("abs", abs(a));
  BOTH("pow", pow(b, 2.5));
  BOTH("tanh", tanh(a));
  BOTH("sigmoid", sigmoid(a));
  BOTH("sin", sin(a));
  BOTH("cos", cos(a));
  BOTH("log1p", log1p(b));
  BOTH("expm1", expm1(a));
  BOTH("clamp", clamp(a, -0.5, 0.5));
  BOTH("relu", relu(a));
  BOTH("gelu", gelu(a));
  BOTH("gelu_tanh", gelu(a, GeluApproximate::Tanh));
  BOTH("silu", silu(a));
  BOTH("swiglu", swiglu(transpose(a, 0, 1)));
  BOTH("softplus", softplus(a, 2.0, 1.0));
  BOTH("leaky_relu", leaky_relu(a, 0.1));
  BOTH("elu", elu(a, 0.5));
  BOTH("maximum", maximum(a, b));
  BOTH("minimum", minimum(a, b));
  BOTH("where", where(mask, a, b));
  BOTH("masked_fill", masked_fill(a, mask, 3.0));
  BOTH("sum", sum(a * b, {1}, true));
  BOTH("mean", mean(a * b));
  BOTH("matmul", matmul(a, transpose(b, 0, 1)));
  BOTH("chain", tanh(exp(a) * sin(b)) / (b * b + 1.0));
#undef BOTH
  for (size_t i = 0; i < dual_fns.size(); ++i) {
    SCOPED_TRACE(dual_fns[i].first);
    const Dual d = dual_fns[i].second(make_dual(x, u), make_dual(y, u * 0.5));
    const auto [fx, ju] = jvp(var_fns[i], {Variable(x), Variable(y)}, {Variable(u), Variable(u * 0.5)});
    expect_close(d.primal(), fx.data(), 0, 0);
    expect_close(d.tangent(), ju.data(), 1e-14, 1e-13);
  }
}

TEST(HigherOrder, DualNumbersWithANumberOnTheLeft) {
  const Tensor x = rnd({3}, 54, 0.5, 2), u = rnd({3}, 55);
  auto f = [](const auto& a) { return (1.0 - a) * 2.0 + 3.0 / a + (0.5 + a); };
  const Dual d = f(make_dual(x, u));
  const auto [fx, ju] = jvp([&](const V& in) { return f(in[0]); }, {Variable(x)}, {Variable(u)});
  expect_close(d.primal(), fx.data(), 1e-15, 0);
  expect_close(d.tangent(), ju.data(), 1e-14, 1e-13);
}

TEST(HigherOrder, MakeDualChecksItsArguments) {
  EXPECT_THROW(make_dual(rnd({2}, 1), rnd({3}, 2)), ShapeError);
  EXPECT_THROW(make_dual(rnd({2}, 1), tensor({1, 2}, {2})), DTypeError);  // float64 beside float32
  EXPECT_THROW(make_dual(ints({1, 2}, {2}), ints({1, 2}, {2})), DTypeError);
}
