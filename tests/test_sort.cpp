// topk, sort and argsort: hand values, stability, NaN as the largest value, gradients through the
// indices, PyTorch golden values, errors.
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using V = std::vector<Variable>;

TEST(Sort, HandValues) {
  const Tensor x = tensor({3, 1, 4, 1, 5}, {5});
  auto [v, i] = sort(x);
  expect_values(v, {5}, {1, 1, 3, 4, 5});
  expect_values(i.to(DType::Float32), {5}, {1, 3, 0, 2, 4});  // stable: the first 1 (index 1) first
  expect_values(argsort(x, 0, true).to(DType::Float32), {5}, {4, 2, 0, 1, 3});
  auto [tv, ti] = topk(x, 2);
  expect_values(tv, {2}, {5, 4});
  expect_values(ti.to(DType::Float32), {2}, {4, 2});
  auto [sv, si] = topk(tensor({2, 7, 1, 8}, {2, 2}), 1, 0, /*largest=*/false);
  expect_values(sv, {1, 2}, {1, 7});
  // NaN sorts after every number, and tops topk, as in PyTorch
  auto [nv, ni] = sort(tensor({2, NAN, 1}, {3}));
  EXPECT_EQ(ni.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(topk(tensor({2, NAN, 1}, {3}), 1).second.item(), 1);
  // the gradient of the values goes back to where each came from
  Variable y(tensor({3, 1, 2}, {3}), true);
  topk(y, 2).first.backward(tensor({10, 20}, {2}));
  expect_values(y.grad(), {3}, {10, 0, 20});
}

TEST(Sort, Gradcheck) {
  const Tensor x = rnd({3, 5}, 1);
  expect_gradcheck([](const V& v) { return topk(v[0], 2).first; }, {x});
  expect_gradcheck([](const V& v) { return topk(v[0], 2, 0, false).first; }, {x.transpose(0, 1)});
  expect_gradcheck([](const V& v) { return sort(v[0], 1, true).first; }, {x});
}

TEST(Sort, GoldenPyTorch) {
  expect_golden("topk_k3", [](const V& v) { return topk(v[0], 3, 1).first; });
  expect_golden("topk_smallest_dim0", [](const V& v) { return topk(v[0], 2, 0, false).first; });
  expect_golden("sort_descending", [](const V& v) { return sort(v[0], -1, true).first; });
}

TEST(Sort, Errors) {
  const Tensor x = zeros({2, 3});
  EXPECT_THROW(topk(x, 4), ValueError);
  EXPECT_THROW(topk(x, -1), ValueError);
  EXPECT_THROW(sort(x, 2), IndexError);
  EXPECT_THROW(argsort(zeros({2}, DType::Bool)), DTypeError);
}
