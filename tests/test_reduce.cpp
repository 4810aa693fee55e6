// Differentiable reductions: sum, mean, max.
#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using V = std::vector<Variable>;

TEST(Reduce, HandComputedGradients) {
  Variable x(arange(6, DType::Float32).view({2, 3}), true);
  // mean over dim 1 then sum: each element gets 1/3
  sum(mean(x, {1})).backward();
  expect_values(x.grad(), {2, 3}, {1. / 3, 1. / 3, 1. / 3, 1. / 3, 1. / 3, 1. / 3}, 1e-7);
  // max over dim 1 sends the gradient to the argmax only
  Variable y(tensor({3, 9, 2, 7, 1, 8}, {2, 3}), true);
  auto [m, idx] = max(y, 1);
  expect_values(idx, {2}, {1, 2});
  sum(m * Variable(tensor({10, 100}, {2}))).backward();
  expect_values(y.grad(), {2, 3}, {0, 10, 0, 0, 0, 100});
}

TEST(Reduce, Gradcheck) {
  Tensor x = rnd({2, 3, 4}, 1);
  expect_gradcheck([](const V& v) { return sum(v[0]); }, {x});
  expect_gradcheck([](const V& v) { return sum(v[0], {1}, true); }, {x});
  expect_gradcheck([](const V& v) { return sum(v[0], {0, 2}); }, {x});
  expect_gradcheck([](const V& v) { return mean(v[0], {-1}); }, {x});
  expect_gradcheck([](const V& v) { return mean(v[0]); }, {x.transpose(0, 2)});
  expect_gradcheck([](const V& v) { return max(v[0], 1).first; }, {x});
  expect_gradcheck([](const V& v) { return max(v[0], 0, true).first; }, {x.transpose(1, 2)});
  expect_gradcheck([](const V& v) { return max(v[0]); }, {x});
}

TEST(Reduce, GoldenPyTorch) {
  expect_golden("sum_all", [](const V& v) { return sum(v[0]); });
  expect_golden("sum_dim1_keepdim", [](const V& v) { return sum(v[0], {1}, true); });
  expect_golden("sum_dims02", [](const V& v) { return sum(v[0], {0, 2}); });
  expect_golden("mean_dim0", [](const V& v) { return mean(v[0], {0}); });
  expect_golden("mean_all", [](const V& v) { return mean(v[0]); });
  expect_golden("max_dim1", [](const V& v) { return max(v[0], 1).first; });
  expect_golden("max_all", [](const V& v) { return max(v[0]); });
}

TEST(Reduce, Errors) {
  Variable x(zeros({2, 3}), true);
  EXPECT_THROW(sum(x, {2}), IndexError);
  try {
    mean(x, {5});  // the message names mean, not the sum it is computed with
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("mean: dimension 5 is out of range for a tensor with 2 dims"));
  }
  EXPECT_THROW(max(Variable(zeros({0})), 0), ValueError);
  EXPECT_THROW(max(Variable(zeros({0}))), ValueError);
}

TEST(Reduce, MaxOverTheFirstDimOfAnyRank) {
  // max over dim 0 of a contiguous 3-D tensor once failed in a permute (ShapeError)
  Tensor x = arange(24, DType::Float32).view({2, 3, 4});
  auto [v, i] = max(x, 0);
  expect_values(v, {3, 4}, {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  expect_values(i.to(DType::Float32), {3, 4}, std::vector<double>(12, 1));
  expect_values(argmax(x, 0, true).to(DType::Float32), {1, 3, 4}, std::vector<double>(12, 1));
  expect_gradcheck([](const V& v) { return max(v[0], 0).first; }, {rnd({2, 3, 4}, 9)});
}
