// Derivatives of derivatives, the engine: mg::grad and backward with create_graph (third
// derivatives, mixed partials, grad_outputs, retain_graph, hooks, autocast) and its typed errors.
// The ops' second derivatives are in test_higher_order_ops.cpp, custom ops in
// test_higher_order_custom.cpp, vjp/jvp/hvp and dual numbers in test_higher_order_functional.cpp.
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

// ---- the engine ----

TEST(HigherOrder, ThirdDerivativeOfACube) {
  // y = x^3 at x = 1.5: y' = 3x^2 = 6.75, y'' = 6x = 9, y''' = 6, each a Variable with history
  const Variable x = leaf(1.5);
  const Variable y = x * x * x;
  const Variable d1 = grad({y}, {x}, {.create_graph = true})[0];
  EXPECT_DOUBLE_EQ(d1.item(), 6.75);
  ASSERT_TRUE(d1.requires_grad());
  const Variable d2 = grad({d1}, {x}, {.create_graph = true})[0];
  EXPECT_DOUBLE_EQ(d2.item(), 9);
  const Variable d3 = grad({d2}, {x}, {.create_graph = true})[0];
  EXPECT_DOUBLE_EQ(d3.item(), 6);
}

TEST(HigherOrder, SecondDerivativesOfTranscendentals) {
  // f = sin(x) e^x:  f'' = 2 e^x cos x
  const Variable x = leaf(0.7);
  const Variable f = sin(x) * exp(x);
  const Variable d1 = grad({f}, {x}, {.create_graph = true})[0];
  EXPECT_NEAR(d1.item(), std::exp(0.7) * (std::sin(0.7) + std::cos(0.7)), 1e-15);
  const Variable d2 = grad({d1}, {x})[0];
  EXPECT_NEAR(d2.item(), 2 * std::exp(0.7) * std::cos(0.7), 1e-14);
  EXPECT_FALSE(d2.requires_grad());  // without create_graph: numbers only
}

TEST(HigherOrder, MixedPartialsOfTwoInputs) {
  // f = x^2 y^3: df/dx = 2x y^3, d2f/dxdy = 6 x y^2 (= d2f/dydx)
  const Variable x = leaf(2), y = leaf(-1.5);
  const Variable f = pow(x, 2) * pow(y, 3);
  const V g = grad({f}, {x, y}, {.create_graph = true});
  EXPECT_DOUBLE_EQ(g[0].item(), 2 * 2 * std::pow(-1.5, 3));
  EXPECT_DOUBLE_EQ(g[1].item(), 3 * 4 * 1.5 * 1.5);
  EXPECT_DOUBLE_EQ(grad({g[0]}, {y})[0].item(), 6 * 2 * 1.5 * 1.5);
  EXPECT_DOUBLE_EQ(grad({g[1]}, {x})[0].item(), 6 * 2 * 1.5 * 1.5);
}

TEST(HigherOrder, GradTouchesNoDotGradAndRunsOnlyWhatLeadsToTheInputs) {
  const Variable a(rnd({3}, 1), true), b(rnd({3}, 2), true);
  int calls_b_side = 0;
  const Variable bb = exp(b);
  bb.register_hook([&](const Tensor&) {
    ++calls_b_side;
    return Tensor();
  });
  const Variable y = sum(a * a) + sum(bb);
  const V g = grad({y}, {a});
  expect_close(g[0].data(), a.data() * 2.0, 0, 0);
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  EXPECT_EQ(calls_b_side, 0);  // exp(b) leads to no input asked for: it did not run
}

TEST(HigherOrder, GradOfANonLeafAndGradOutputs) {
  const Variable x(rnd({2, 3}, 3), true);
  const Variable h = x * 2.0;
  const Variable y = h * h;  // dy/dh = 2h, weighted by v
  const Tensor v = rnd({2, 3}, 4);
  const V g = grad({y}, {h, x}, {.grad_outputs = {Variable(v)}});
  expect_close(g[0].data(), h.data() * v * 2.0, 0, 0);
  expect_close(g[1].data(), h.data() * v * 4.0, 1e-15, 1e-15);
}

TEST(HigherOrder, GradErrors) {
  const Variable x = leaf(1), z = leaf(2), c(scalar_tensor(1.0, DType::Float64));
  const Variable y = x * 3.0;
  try {
    grad({y}, {x, z}, {.retain_graph = true});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("grad: input 1"));
    EXPECT_THAT(e.what(), HasSubstr("allow_unused"));
  }
  const V g = grad({y}, {x, z}, {.retain_graph = true, .allow_unused = true});
  EXPECT_EQ(g[0].item(), 3);
  EXPECT_FALSE(g[1].defined());
  EXPECT_THROW(grad({y}, {c}, {.retain_graph = true}), StateError);  // c does not require grad
  EXPECT_THROW(grad({y}, {}, {.retain_graph = true}), ValueError);   // nothing to differentiate by
  EXPECT_THROW(grad({y}, {x}, {.grad_outputs = {Variable(), Variable()}}), ValueError);
  const Variable v2(rnd({2}, 5), true);
  EXPECT_THROW(grad({v2 * 2.0}, {v2}), ShapeError);  // two elements and no grad_output
}

TEST(HigherOrder, RetainGraphDefaultsToCreateGraph) {
  const Variable x = leaf(0.5);
  const Variable y = exp(x) * x;
  grad({y}, {x}, {.create_graph = true});
  EXPECT_NO_THROW(grad({y}, {x}));           // kept by the first call
  EXPECT_THROW(grad({y}, {x}), StateError);  // freed by the second
}

TEST(HigherOrder, BackwardWithCreateGraphGivesADifferentiableGrad) {
  // A gradient penalty: L = sum(w^2 x), dL/dw = 2 w x; P = sum((dL/dw)^2) = 4 sum(w^2 x^2); dP/dw = 8 w x^2
  const Tensor x = rnd({4}, 6);
  const Variable w(rnd({4}, 7), true);
  sum(w * w * Variable(x)).backward({.create_graph = true});
  expect_close(w.grad(), w.data() * x * 2.0, 0, 0);
  const Variable g = w.grad_variable();
  ASSERT_TRUE(g.requires_grad());
  const Variable penalty = sum(g * g);
  w.zero_grad();
  EXPECT_FALSE(w.grad_variable().defined());  // zero_grad forgets the history too
  penalty.backward();
  expect_close(w.grad(), w.data() * x * x * 8.0, 1e-15, 1e-14);
  EXPECT_FALSE(w.grad_variable().requires_grad());  // a plain backward: numbers only
}

TEST(HigherOrder, CreateGraphOffRecordsNothingAndKeepsTheBits) {
  // Without create_graph, mg::grad runs the same Tensor rules as backward(): the same bits, and no
  // history. With it, the rules run as recorded ops (cross_entropy's in its composed form), equal
  // to float32 rounding.
  Generator gen(3);
  nn::Sequential net;
  net.emplace_back<nn::Linear>(5, 8, nn::LinearOptions{}, gen);
  net.emplace_back<nn::GELU>();
  net.emplace_back<nn::Linear>(8, 3, nn::LinearOptions{}, gen);
  const Tensor x = randn({6, 5}, gen), t = ints({0, 2, 1, 1, 0, 2}, {6});
  const V params = net.parameters();
  const Variable loss = cross_entropy(net.forward(Variable(x)), t);
  const V plain = grad({loss}, params, {.retain_graph = true});
  const V graph = grad({loss}, params, {.retain_graph = true, .create_graph = true});
  loss.backward();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_FALSE(plain[i].requires_grad());
    EXPECT_EQ(plain[i].grad_fn(), nullptr);
    EXPECT_TRUE(graph[i].requires_grad());
    expect_close(plain[i].data(), params[i].grad(), 0, 0);
    expect_close(graph[i].data(), plain[i].data(), 1e-7, 1e-5);
  }
}

TEST(HigherOrder, AnOpWithoutASecondRuleSaysSo) {
  // conv2d's backward is a kernel with no rule of its own: its gradient exists with create_graph,
  // and differentiating that gradient is a NotImplementedError naming the op, not a silent zero.
  const Variable x(rnd({1, 1, 4, 4}, 8), true), w(rnd({1, 1, 3, 3}, 9), true);
  const Variable y = sum(pow(conv2d(x, w), 2));
  const V g = grad({y}, {w}, {.create_graph = true});
  expect_close(g[0].data(), grad({sum(pow(conv2d(x, w), 2))}, {w})[0].data(), 0, 0);
  try {
    grad({sum(g[0] * g[0])}, {x});
    FAIL();
  } catch (const NotImplementedError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'conv2d' is not differentiable twice"));
  }
  // conv1d and conv_transpose1d run conv2d's kernels, but the error names the op that was called
  const Variable x1(rnd({1, 1, 5}, 10), true), w1(rnd({1, 1, 3}, 11), true);
  for (int transposed = 0; transposed < 2; ++transposed) {
    auto f = [&] { return transposed ? conv_transpose1d(x1, w1) : conv1d(x1, w1); };
    const V g1 = grad({sum(pow(f(), 2))}, {w1}, {.create_graph = true});
    try {
      grad({sum(g1[0] * g1[0])}, {x1});
      FAIL();
    } catch (const NotImplementedError& e) {
      EXPECT_THAT(e.what(), HasSubstr(transposed ? "'conv_transpose1d' is not differentiable twice"
                                                 : "'conv1d' is not differentiable twice"));
    }
  }
}

TEST(HigherOrder, AHookThatReplacesAGradientCannotBeRecorded) {
  const Variable x = leaf(2);
  const Variable h = x * x;
  h.register_hook([](const Tensor& g) { return g * 2.0; });
  EXPECT_THROW(grad({h * 3.0}, {x}, {.create_graph = true}), NotImplementedError);
  const Variable x2 = leaf(2);
  const Variable h2 = x2 * x2;
  int seen = 0;
  h2.register_hook([&](const Tensor& g) {  // hooks that only look are fine, also one that returns g itself
    ++seen;
    return g;
  });
  h2.retain_grad();
  const Variable g = grad({h2 * 3.0}, {x2}, {.create_graph = true})[0];
  EXPECT_EQ(g.item(), 12);
  EXPECT_EQ(seen, 1);
  EXPECT_FALSE(h2.grad().defined());  // mg::grad touches no .grad(), retain_grad's included
  (h2 * 3.0).backward({.create_graph = true});
  EXPECT_EQ(seen, 2);
  EXPECT_EQ(h2.grad().item(), 3);  // backward fills it
}

TEST(HigherOrder, GradRunsALeafInputsHooks) {
  const Variable x = leaf(2);
  x.register_hook([](const Tensor& g) { return g * 10.0; });
  EXPECT_EQ(grad({x * 3.0}, {x})[0].item(), 30);  // as backward would put into .grad()
  EXPECT_FALSE(x.grad().defined());
}

TEST(HigherOrder, AZeroSecondDerivativeIsZeroNotUnused) {
  // relu's gradient does not depend on x (away from 0): its derivative is 0, and x was used
  const Variable x(away_from_zero({4}, 90), true);
  const Variable g = grad({sum(relu(x))}, {x}, {.create_graph = true})[0];  // 1 where x > 0, else 0
  ASSERT_TRUE(g.requires_grad());
  const Variable d = grad({sum(g)}, {x})[0];  // without allow_unused: x was used, its derivative is 0
  expect_close(d.data(), zeros({4}, DType::Float64), 0, 0);
  const Variable l = leaf(1.5);
  const Variable dl = grad({relu(l)}, {l}, {.create_graph = true})[0];  // relu' = 1, its derivative 0
  EXPECT_EQ(grad({dl}, {l})[0].item(), 0);
}

TEST(HigherOrder, CreateGraphIgnoresAnEnclosingAutocast) {
  // The recorded backward keeps float32 products inside an AutocastGuard, so it is differentiable
  // twice and equals the same backward outside one.
  const Tensor a = rnd({3, 4}, 91).to(DType::Float32), b = rnd({4, 2}, 92).to(DType::Float32);
  Variable x(a, true);
  const Variable y = sum(pow(matmul(x, Variable(b)), 2));  // recorded without autocast
  Variable g_outside = grad({y}, {x}, {.retain_graph = true, .create_graph = true})[0];
  Variable g_inside;
  {
    const AutocastGuard bf16;
    g_inside = grad({y}, {x}, {.retain_graph = true, .create_graph = true})[0];
  }
  expect_close(g_inside.data(), g_outside.data(), 0, 0);
  {
    const AutocastGuard bf16;  // backward with create_graph, the same
    y.backward({.create_graph = true});
  }
  expect_close(x.grad_variable().data(), g_outside.data(), 0, 0);
}

TEST(HigherOrder, ALeafHookThatReplacesItsGradientCannotBeRecorded) {
  const Variable x = leaf(2);
  x.register_hook([](const Tensor& g) { return g * 2.0; });
  EXPECT_EQ(grad({x * x}, {x})[0].item(), 8);  // without create_graph the hook applies
  EXPECT_THROW(grad({x * x}, {x}, {.create_graph = true}), NotImplementedError);
  EXPECT_THROW((x * x).backward({.create_graph = true}), NotImplementedError);
}
