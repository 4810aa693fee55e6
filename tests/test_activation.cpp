// Activations: relu, gelu, silu, softplus, leaky_relu, elu. Hand values, gradcheck on both sides of
// every kink and branch, PyTorch golden values, error texts.
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using V = std::vector<Variable>;

TEST(Activation, HandValues) {
  const Tensor x = tensor({-2, 0, 1}, {3});
  expect_values(relu(x), {3}, {0, 0, 1});
  expect_values(leaky_relu(x, 0.1), {3}, {-0.2, 0, 1});
  expect_values(elu(x, 2), {3}, {2 * std::expm1(-2.0), 0, 1}, 1e-6);
  expect_values(silu(x), {3}, {-2 / (1 + std::exp(2.0)), 0, 1 / (1 + std::exp(-1.0))}, 1e-6);
  // softplus(0) = log 2; above the threshold it is x itself: softplus(30) = 30
  expect_values(softplus(tensor({0, 30}, {2})), {2}, {std::log(2.0), 30}, 1e-6);
  expect_values(softplus(tensor({1}, {1}), 2), {1}, {std::log1p(std::exp(2.0)) / 2}, 1e-6);
  // gradients: leaky_relu's slope below 0, elu's alpha e^x below 0, silu's s (1 + x (1 - s))
  Variable v(tensor({-1, 2}, {2}), true);
  (leaky_relu(v, 0.25) + elu(v, 0.5)).sum().backward();
  expect_values(v.grad(), {2}, {0.25 + 0.5 * std::exp(-1.0), 2}, 1e-6);
}

TEST(Activation, Gradcheck) {
  // inputs away from 0, so central differences do not straddle a kink
  const Tensor x = rnd({3, 4}, 1, -3, 3);
  expect_gradcheck([](const V& v) { return relu(v[0]); }, {x});
  expect_gradcheck([](const V& v) { return gelu(v[0]); }, {x});
  expect_gradcheck([](const V& v) { return gelu(v[0], "tanh"); }, {x});
  expect_gradcheck([](const V& v) { return silu(v[0]); }, {x});
  expect_gradcheck([](const V& v) { return softplus(v[0]); }, {x});
  expect_gradcheck([](const V& v) { return softplus(v[0], 2.0, 1.5); }, {x});  // both branches
  expect_gradcheck([](const V& v) { return leaky_relu(v[0], 0.2); }, {x});
  expect_gradcheck([](const V& v) { return elu(v[0], 1.5); }, {x.transpose(0, 1)});
}

TEST(Activation, GoldenPyTorch) {
  expect_golden("relu", [](const V& v) { return relu(v[0]); });
  expect_golden("gelu", [](const V& v) { return gelu(v[0]); });
  expect_golden("gelu_tanh", [](const V& v) { return gelu(v[0], "tanh"); });
  expect_golden("silu", [](const V& v) { return silu(v[0]); });
  expect_golden("softplus_beta2_threshold1", [](const V& v) { return softplus(v[0], 2, 1); });
  expect_golden("leaky_relu", [](const V& v) { return leaky_relu(v[0], 0.2); });
  expect_golden("elu", [](const V& v) { return elu(v[0], 1.5); });
}

TEST(Activation, Errors) {
  const Variable x(zeros({2}));
  EXPECT_THROW(gelu(x, "fast"), ValueError);
  EXPECT_THROW(softplus(x, 0), ValueError);
  EXPECT_THROW(softplus(x, NAN), ValueError);
  EXPECT_THROW(leaky_relu(x, INFINITY), ValueError);
  EXPECT_THROW(elu(Variable(arange(2)), 1.0), DTypeError);
}
