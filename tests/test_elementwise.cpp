// Differentiable elementwise ops: hand-computed gradients, gradcheck (with broadcast and
// non-contiguous inputs) and PyTorch golden values.
#include <limits>

#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using V = std::vector<Variable>;

TEST(Elementwise, HandComputedGradients) {
  // y = sum(a * b + a / b) at a = (1, 2), b = (4, 8):  dy/da = b + 1/b,  dy/db = a - a/b^2
  Variable a(tensor({1, 2}, {2}), true), b(tensor({4, 8}, {2}), true);
  sum(a * b + a / b).backward();
  expect_values(a.grad(), {2}, {4.25, 8.125});
  expect_values(b.grad(), {2}, {1 - 1.0 / 16, 2 - 2.0 / 64});
  // Broadcasting is undone: a (2, 1) operand added to a (2, 3) gets each row's sum.
  Variable c(zeros({2, 1}), true), d(tensor({1, 2, 3, 4, 5, 6}, {2, 3}), true);
  sum(mul(c + d, d)).backward();  // d/dc = sum over the row of d
  expect_values(c.grad(), {2, 1}, {6, 15});
}

TEST(Elementwise, ReluAndAbsAtZeroFollowPyTorch) {
  Variable x(tensor({-1, 0, 2}, {3}), true);
  sum(relu(x) + abs(x)).backward();
  expect_values(x.grad(), {3}, {-1, 0, 2});  // relu' = (0, 0, 1), abs' = (-1, 0, 1)
}

TEST(Elementwise, Gradcheck) {
  Tensor a = rnd({3, 4}, 1), b = rnd({3, 4}, 2, 0.5, 2), pos = rnd({3, 4}, 3, 0.2, 2);
  expect_gradcheck([](const V& v) { return v[0] + v[1]; }, {a, b});
  expect_gradcheck([](const V& v) { return v[0] - v[1]; }, {a, b});
  expect_gradcheck([](const V& v) { return v[0] * v[1]; }, {a, b});
  expect_gradcheck([](const V& v) { return v[0] / v[1]; }, {a, b});
  expect_gradcheck([](const V& v) { return -v[0]; }, {a});
  expect_gradcheck([](const V& v) { return pow(v[0], 3); }, {a});
  expect_gradcheck([](const V& v) { return pow(v[0], -1.5); }, {pos});
  expect_gradcheck([](const V& v) { return exp(v[0]); }, {a});
  expect_gradcheck([](const V& v) { return log(v[0]); }, {pos});
  expect_gradcheck([](const V& v) { return sqrt(v[0]); }, {pos});
  expect_gradcheck([](const V& v) { return abs(v[0]); }, {a});
  expect_gradcheck([](const V& v) { return tanh(v[0]); }, {a});
  expect_gradcheck([](const V& v) { return sigmoid(v[0]); }, {a});
  expect_gradcheck([](const V& v) { return sin(v[0]) * cos(v[0]); }, {a});
  expect_gradcheck([](const V& v) { return log1p(v[0]); }, {pos});
  expect_gradcheck([](const V& v) { return expm1(v[0]); }, {a});
  expect_gradcheck([](const V& v) { return clamp(v[0], -0.5, 0.5); }, {a});
  expect_gradcheck([](const V& v) { return clamp(v[0], std::nullopt, 0.2) + clamp(v[0], -0.3); }, {a});
  expect_gradcheck([](const V& v) { return maximum(v[0], v[1]) + minimum(v[0], v[1]); }, {a, b});
  expect_gradcheck([](const V& v) { return maximum(v[0], v[1]); }, {a, rnd({4}, 5)});
  expect_gradcheck([](const V& v) { return 2.0 - v[0] * 3.0 + 1.0 / v[1]; }, {a, b});
  const Tensor mask = from_vector<bool>({true, false, false, true}, {1, 4});
  expect_gradcheck([mask](const V& v) { return masked_fill(v[0], mask, -7.5); }, {a});
  expect_gradcheck([mask](const V& v) { return where(mask, v[0], v[1]); }, {a, rnd({4}, 4)});
}

TEST(Elementwise, GradcheckBroadcastAndNonContiguous) {
  // (3, 1, 4) with (2, 4); a transposed view; an expanded view.
  expect_gradcheck([](const V& v) { return v[0] * v[1] + v[0]; }, {rnd({3, 1, 4}, 4), rnd({2, 4}, 5)});
  expect_gradcheck([](const V& v) { return v[0] / v[1]; }, {rnd({4, 3}, 6).transpose(0, 1), rnd({3, 1}, 7, 1, 2)});
  expect_gradcheck([](const V& v) { return tanh(v[0]) * v[1]; }, {rnd({5, 4}, 8).slice(0, 0, 5, 2), rnd({4}, 9)});
  expect_gradcheck([](const V& v) { return sigmoid(v[0]) - v[1]; },
                   {rnd({2, 3}, 10), scalar_tensor(0.5, DType::Float64)});
}

TEST(Elementwise, MaskedFillAndWhere) {
  Tensor mask = from_vector<bool>({true, false, false, true}, {1, 4});
  Variable x(tensor({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}), true);
  Variable y = masked_fill(x, mask, -1);
  expect_values(y.data(), {2, 4}, {-1, 2, 3, -1, -1, 6, 7, -1});
  sum(y).backward();
  expect_values(x.grad(), {2, 4}, {0, 1, 1, 0, 0, 1, 1, 0});
  expect_gradcheck([mask](const V& v) { return masked_fill(v[0], mask, 3.0) * v[0]; }, {rnd({3, 4}, 11)});
  expect_gradcheck([mask](const V& v) { return where(mask, v[0], v[1]); }, {rnd({2, 4}, 12), rnd({4}, 13)});
}

TEST(Elementwise, GoldenPyTorch) {
  expect_golden("add_broadcast", [](const V& v) { return v[0] + v[1]; });
  expect_golden("sub_broadcast", [](const V& v) { return v[0] - v[1]; });
  expect_golden("mul_broadcast", [](const V& v) { return v[0] * v[1]; });
  expect_golden("div", [](const V& v) { return v[0] / v[1]; });
  expect_golden("neg", [](const V& v) { return -v[0]; });
  expect_golden("pow3", [](const V& v) { return pow(v[0], 3); });
  expect_golden("pow_half", [](const V& v) { return pow(v[0], 0.5); });
  expect_golden("exp", [](const V& v) { return exp(v[0]); });
  expect_golden("log", [](const V& v) { return log(v[0]); });
  expect_golden("sqrt", [](const V& v) { return sqrt(v[0]); });
  expect_golden("abs", [](const V& v) { return abs(v[0]); });
  expect_golden("tanh", [](const V& v) { return tanh(v[0]); });
  expect_golden("sigmoid", [](const V& v) { return sigmoid(v[0]); });
  expect_golden("sin", [](const V& v) { return sin(v[0]); });
  expect_golden("cos", [](const V& v) { return cos(v[0]); });
  expect_golden("log1p", [](const V& v) { return log1p(v[0]); });
  expect_golden("expm1", [](const V& v) { return expm1(v[0]); });
  expect_golden("clamp", [](const V& v) { return clamp(v[0], -0.5, 0.7); });
  expect_golden("clamp_min", [](const V& v) { return clamp(v[0], 0.1); });
  expect_golden("clamp_max", [](const V& v) { return clamp(v[0], std::nullopt, -0.2); });
  expect_golden("maximum_ties", [](const V& v) { return maximum(v[0], v[1]); });
  expect_golden("minimum_ties", [](const V& v) { return minimum(v[0], v[1]); });
  expect_golden("masked_fill", [](const V& v) { return masked_fill(v[0], v[1].data(), -7.5); });
  expect_golden("where", [](const V& v) { return where(v[0].data(), v[1], v[2]); });
}

TEST(Elementwise, HandValuesOfTheNewOps) {
  // clamp to [0, 2] at -1, 0, 1, 2, 3: the gradient passes where 0 <= x <= 2, ends included
  Variable x(tensor({-1, 0, 1, 2, 3}, {5}), true);
  Variable y = clamp(x, 0, 2);
  expect_values(y.data(), {5}, {0, 0, 1, 2, 2});
  y.sum().backward();
  expect_values(x.grad(), {5}, {0, 1, 1, 1, 0});
  EXPECT_TRUE(std::isnan(clamp(tensor({NAN}, {1}), 0, 1).item()));
  expect_values(clamp(tensor({5}, {1}), 3, 1), {1}, {1});  // min > max: everything is max, as in torch
  // a tie in maximum splits the gradient: (1, 2, 3) vs (1, 3, 2)
  Variable a(tensor({1, 2, 3}, {3}), true), b(tensor({1, 3, 2}, {3}), true);
  maximum(a, b).sum().backward();
  expect_values(a.grad(), {3}, {0.5, 0, 1});
  expect_values(b.grad(), {3}, {0.5, 1, 0});
  expect_values(minimum(tensor({1, 5}, {2}), tensor({3, 2}, {2})), {2}, {1, 2});
  // log1p and expm1 keep small arguments' digits: 1e-10 in float64
  EXPECT_DOUBLE_EQ(log1p(full({}, 1e-10, DType::Float64)).item(), 9.9999999995e-11);
  EXPECT_DOUBLE_EQ(expm1(full({}, 1e-10, DType::Float64)).item(), 1.00000000005e-10);
}

TEST(Elementwise, Errors) {
  Variable x(zeros({2, 3}), true);
  EXPECT_THROW(x + Variable(zeros({4})), ShapeError);
  EXPECT_THROW(x * Variable(zeros({2, 3}, DType::Float64)), DTypeError);
  EXPECT_THROW(clamp(x, std::nullopt, std::nullopt), ValueError);
  EXPECT_THROW(clamp(x, NAN), ValueError);
  EXPECT_THROW(masked_fill(x, zeros({3}), 0), DTypeError);
}

TEST(Elementwise, NaNPropagatesAsInPyTorch) {
  const Tensor x = tensor({NAN, -1, 2}, {3});
  const std::vector<float> r = relu(x).to_vector<float>();  // relu once turned NaN into 0
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_EQ(r[1], 0);
  EXPECT_EQ(r[2], 2);
  // maximum: NaN wins from either side (it once won only from the right)
  EXPECT_TRUE(std::isnan(maximum(tensor({NAN}, {1}), tensor({0}, {1})).item()));
  EXPECT_TRUE(std::isnan(maximum(tensor({0}, {1}), tensor({NAN}, {1})).item()));
}

TEST(Elementwise, PowZeroHasZeroGradientEverywhere) {
  // d/dx x^0 = 0, also at x = 0, where the rule p x^(p-1) once gave 0 * inf = NaN
  Variable x(tensor({0, 2}, {2}), true);
  sum(pow(x, 0.0)).backward();
  expect_values(x.grad(), {2}, {0, 0});
}

TEST(Elementwise, Int64ArithmeticWrapsAndScalarsMustFit) {
  // int64 overflow wraps around (two's complement), as in PyTorch, instead of undefined behaviour
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ((from_vector<int64_t>({big}, {1}) + from_vector<int64_t>({1}, {1})).to_vector<int64_t>()[0],
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(sum(from_vector<int64_t>({big, 2}, {2})).to_vector<int64_t>()[0], std::numeric_limits<int64_t>::min() + 1);
  // a number an int64 tensor cannot hold is refused, not truncated (t + 0.5 once returned t)
  const Tensor t = arange(3);
  try {
    (void)(t + 0.5);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("add: 0.5 is not an int64 value"));
  }
  EXPECT_THROW((void)(t * 1e30), ValueError);
  EXPECT_THROW(masked_fill(t, from_vector<bool>({true, false, false}, {3}), 2.7), ValueError);
  EXPECT_THROW(masked_fill(t, from_vector<bool>({true, false, false}, {3}), NAN), ValueError);
  expect_values(t * 2.0, {3}, {0, 2, 4});  // whole numbers are fine
  EXPECT_THROW(full({2}, 2.5, DType::Int64), ValueError);
  EXPECT_THROW(tensor({NAN}, {1}).to(DType::Int64), ValueError);             // no int64 is NaN
  expect_values(tensor({2.7f, -2.7f}, {2}).to(DType::Int64), {2}, {2, -2});  // truncation, as torch's
}
