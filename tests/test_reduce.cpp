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

TEST(Reduce, StatisticsHandValues) {
  // (1, 2, 3, 6): mean 3, squared deviations 4 + 1 + 0 + 9 = 14: var 14/3 unbiased, 14/4 population
  const Tensor x = tensor({1, 2, 3, 6}, {4});
  EXPECT_NEAR(var(x).item(), 14.0 / 3, 1e-6);
  EXPECT_NEAR(var(x, {}, 0).item(), 3.5, 1e-6);
  EXPECT_NEAR(mg::std(x, {0}, 0).item(), std::sqrt(3.5), 1e-6);
  EXPECT_TRUE(std::isinf(var(tensor({2}, {1})).item()) ||
              std::isnan(var(tensor({2}, {1})).item()));  // N - 1 = 0, as torch
  // prod, and its gradient with one zero: only the zero's place gets the product of the others
  Variable p(tensor({2, 0, 3}, {3}), true);
  Variable y = prod(p);
  EXPECT_EQ(y.item(), 0);
  y.backward();
  expect_values(p.grad(), {3}, {0, 6, 0});
  Variable q(tensor({0, 5, 0}, {3}), true);  // two zeros: no gradient anywhere
  prod(q).backward();
  expect_values(q.grad(), {3}, {0, 0, 0});
  // cumsum and its gradient, the reverse running sum
  Variable c(tensor({1, 2, 3}, {3}), true);
  Variable cs = cumsum(c, 0);
  expect_values(cs.data(), {3}, {1, 3, 6});
  cs.backward(tensor({1, 10, 100}, {3}));
  expect_values(c.grad(), {3}, {111, 110, 100});
  // logsumexp: log(e^0 + e^0) = log 2; all -inf gives -inf, as torch
  EXPECT_NEAR(logsumexp(tensor({0, 0}, {2}), {0}).item(), std::log(2.0), 1e-6);
  EXPECT_EQ(logsumexp(tensor({-INFINITY, -INFINITY}, {2}), {0}).item(), -INFINITY);
  EXPECT_NEAR(logsumexp(tensor({1000, 1000}, {2}), {0}).item(), 1000 + std::log(2.0), 1e-3);  // no overflow
  // min, and argmin/argmax over everything (flat indices)
  const Tensor m = tensor({3, -1, 4, -1, 5}, {5});
  EXPECT_EQ(min(m).item(), -1);
  EXPECT_EQ(argmin(m).item(), 1);  // the first of equal values
  EXPECT_EQ(argmax(m.view({5, 1})).item(), 4);
  EXPECT_EQ(argmin(m, 0).item(), 1);
}

TEST(Reduce, GradcheckOfTheStatistics) {
  const Tensor x = rnd({2, 3, 4}, 3);
  expect_gradcheck([](const V& v) { return min(v[0], 1).first; }, {x});
  expect_gradcheck([](const V& v) { return min(v[0]); }, {x});
  expect_gradcheck([](const V& v) { return var(v[0], {1}); }, {x});
  expect_gradcheck([](const V& v) { return var(v[0], {}, 0, true); }, {x.transpose(0, 2)});
  expect_gradcheck([](const V& v) { return mg::std(v[0], {0, 2}); }, {x});
  expect_gradcheck([](const V& v) { return prod(v[0], 1); }, {x});
  expect_gradcheck([](const V& v) { return prod(v[0]); }, {rnd({2, 3}, 4, 0.5, 1.5)});
  expect_gradcheck([](const V& v) { return cumsum(v[0], 2); }, {x});
  expect_gradcheck([](const V& v) { return logsumexp(v[0], {1, 2}); }, {x});
}

TEST(Reduce, GoldenStatistics) {
  expect_golden("min_dim1", [](const V& v) { return min(v[0], 1).first; });
  expect_golden("min_all", [](const V& v) { return min(v[0]); });
  expect_golden("var_dim1", [](const V& v) { return var(v[0], {1}); });
  expect_golden("var_all_population", [](const V& v) { return var(v[0], {0, 1}, 0, true); });
  expect_golden("std_dims02", [](const V& v) { return mg::std(v[0], {0, 2}); });
  expect_golden("prod_dim1", [](const V& v) { return prod(v[0], 1); });
  expect_golden("prod_all_one_zero", [](const V& v) { return prod(v[0]); });
  expect_golden("prod_dim0_keepdim", [](const V& v) { return prod(v[0], 0, true); });
  expect_golden("cumsum_dim1", [](const V& v) { return cumsum(v[0], 1); });
  expect_golden("logsumexp_dims12", [](const V& v) { return logsumexp(v[0], {1, 2}); });
}

TEST(Reduce, OverAnEmptyDimGivesTheIdentityOfEachReduction) {
  // torch: prod 1, sum 0, logsumexp -inf, mean and var NaN, min an error; one row per other index
  // (a zero-size dim once made prod lose the rows: "reshape: shape (2, 1) is invalid")
  const Tensor e = zeros({2, 0}, DType::Float64);
  EXPECT_EQ(prod(e, 1).to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_EQ(sum(e, {1}).to_vector<double>(), (std::vector<double>{0, 0}));
  EXPECT_EQ(logsumexp(e, {1}).to_vector<double>(), (std::vector<double>{-INFINITY, -INFINITY}));
  for (double v : var(e, {1}).to_vector<double>()) EXPECT_TRUE(std::isnan(v));
  for (double v : mean(e, {1}).to_vector<double>()) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(cumsum(e, 1).shape(), (Shape{2, 0}));
  EXPECT_THROW(min(e, 1), ValueError);
  Variable x(e, true);
  sum(prod(x, 1)).backward();
  EXPECT_EQ(x.grad().shape(), (Shape{2, 0}));
}
