// cross_entropy and mse_loss: hand values, gradcheck, PyTorch golden values, error texts.
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

TEST(Loss, CrossEntropyHandValues) {
  // Uniform logits over 4 classes: loss = log 4, gradient = (softmax - onehot) / N.
  Variable x(zeros({2, 4}), true);
  Tensor t = from_vector<int64_t>({1, 3}, {2});
  Variable loss = cross_entropy(x, t);
  EXPECT_NEAR(loss.item(), std::log(4.0), 1e-6);
  loss.backward();
  expect_values(x.grad(), {2, 4}, {0.125, -0.375, 0.125, 0.125, 0.125, 0.125, 0.125, -0.375}, 1e-7);
  // ignore_index: the ignored row gets no gradient and is not counted
  Variable y(zeros({2, 4}), true);
  cross_entropy(y, from_vector<int64_t>({-100, 2}, {2})).backward();
  expect_values(y.grad(), {2, 4}, {0, 0, 0, 0, 0.25, 0.25, -0.75, 0.25}, 1e-7);
}

TEST(Loss, MseHandValues) {
  // ((1 - 0)^2 + (3 - 1)^2) / 2 = 2.5; d/dx = 2 (x - t) / 2 = (1, 2)
  Variable x(tensor({1, 3}, {2}), true);
  Variable loss = mse_loss(x, Variable(tensor({0, 1}, {2})));
  EXPECT_NEAR(loss.item(), 2.5, 1e-6);
  loss.backward();
  expect_values(x.grad(), {2}, {1, 2});
}

TEST(Loss, Gradcheck) {
  Tensor x = rnd({3, 5}, 1, -2, 2);
  Tensor t = from_vector<int64_t>({4, 0, 2}, {3});
  expect_gradcheck([](const V& v) { return cross_entropy(v[0], v[1].data()); }, {x, t});
  expect_gradcheck([](const V& v) { return cross_entropy(v[0], v[1].data()); }, {x.transpose(0, 1).contiguous().transpose(0, 1), t});
  expect_gradcheck([](const V& v) { return cross_entropy(v[0], v[1].data(), Reduction::None); }, {x, t});
  expect_gradcheck([](const V& v) { return cross_entropy(v[0], v[1].data(), Reduction::Sum, 0); }, {x, t});
  expect_gradcheck([](const V& v) { return mse_loss(v[0], v[1]); }, {x, rnd({3, 5}, 3)});
  expect_gradcheck([](const V& v) { return mse_loss(v[0], v[1], Reduction::None); }, {x, rnd({3, 5}, 4)});
}

TEST(Loss, GoldenPyTorch) {
  expect_golden("cross_entropy_mean", [](const V& v) { return cross_entropy(v[0], v[1].data()); });
  expect_golden("cross_entropy_sum", [](const V& v) { return cross_entropy(v[0], v[1].data(), Reduction::Sum); });
  expect_golden("cross_entropy_none", [](const V& v) { return cross_entropy(v[0], v[1].data(), Reduction::None); });
  expect_golden("cross_entropy_ignore", [](const V& v) { return cross_entropy(v[0], v[1].data()); });
  expect_golden("mse_loss", [](const V& v) { return mse_loss(v[0], v[1]); });
  expect_golden("mse_loss_sum", [](const V& v) { return mse_loss(v[0], v[1], Reduction::Sum); });
}

TEST(Loss, ErrorsNameTheProblem) {
  Variable logits(zeros({3, 5}), true);
  try {
    cross_entropy(logits, from_vector<int64_t>({1, 5, 0}, {3}));
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cross_entropy: target 5 at position 1 is out of range for 5 classes"));
  }
  EXPECT_THROW(cross_entropy(logits, tensor({1, 2, 3}, {3})), DTypeError);
  EXPECT_THROW(cross_entropy(Variable(zeros({2, 3, 5})), from_vector<int64_t>({1, 2}, {2})), ShapeError);
  EXPECT_THROW(mse_loss(logits, Variable(zeros({5, 3}))), ShapeError);
}
