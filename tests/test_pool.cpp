// max_pool2d, avg_pool2d, adaptive_avg_pool2d: hand values, gradcheck, PyTorch golden values
// (overlapping windows, padding, ceil_mode, dilation, divisors), errors.
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using V = std::vector<Variable>;

TEST(Pool, HandValues) {
  Variable x(arange(16, DType::Float64).reshape({1, 1, 4, 4}), true);
  auto [y, idx] = max_pool2d_with_indices(x, 2);
  expect_values(y.data(), {1, 1, 2, 2}, {5, 7, 13, 15});
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{5, 7, 13, 15}));
  y.backward(tensor({1, 2, 3, 4}, {1, 1, 2, 2}).to(DType::Float64));
  expect_values(x.grad().reshape({-1}), {16}, {0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4});
  expect_values(avg_pool2d(x, 2).data(), {1, 1, 2, 2}, {2.5, 4.5, 10.5, 12.5});
  // adaptive over a row of 5 into 3: windows [0, 2), [1, 4), [3, 5)
  expect_values(adaptive_avg_pool2d(Variable(arange(5, DType::Float64).reshape({1, 1, 5})), {1, 3}).data(), {1, 1, 3},
                {0.5, 2, 3.5});
  // NaN wins a max window, as in PyTorch
  EXPECT_TRUE(std::isnan(max_pool2d(Variable(tensor({1, NAN, 3, 2}, {1, 2, 2})), 2).data().item()));
  // padding: count_include_pad divides the corner window (1 value, 3 padded) by 4, else by 1
  const Variable one(full({1, 1, 2, 2}, 8.0));
  EXPECT_EQ(avg_pool2d(one, 2, {.stride = 2, .padding = 1}).data().reshape({-1}).to_vector<float>()[0], 2.0f);
  EXPECT_EQ(avg_pool2d(one, 2, {.stride = 2, .padding = 1, .count_include_pad = false})
                .data()
                .reshape({-1})
                .to_vector<float>()[0],
            8.0f);
}

TEST(Pool, Gradcheck) {
  const Tensor x = rnd({2, 2, 6, 7}, 1);
  expect_gradcheck([](const V& v) { return max_pool2d(v[0], 2); }, {x});
  expect_gradcheck([](const V& v) { return max_pool2d(v[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true}); }, {x});
  expect_gradcheck(
      [](const V& v) {
        return max_pool2d(v[0], {2, 3}, {.stride = 1, .dilation = {2, 1}});
      },
      {x.transpose(2, 3)});
  expect_gradcheck(
      [](const V& v) {
        return avg_pool2d(v[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
      },
      {x});
  expect_gradcheck(
      [](const V& v) {
        return avg_pool2d(v[0], {3, 2}, {.stride = {2, 1}, .padding = 1, .divisor_override = 5});
      },
      {x});
  expect_gradcheck([](const V& v) { return adaptive_avg_pool2d(v[0], {4, 3}); }, {x});
  expect_gradcheck([](const V& v) { return adaptive_avg_pool2d(v[0], 1); }, {rnd({3, 4, 5}, 2)});
}

TEST(Pool, GoldenPyTorch) {
  expect_golden("max_pool2d", [](const V& v) { return max_pool2d(v[0], 2); });
  expect_golden("max_pool2d_overlap_pad_ceil",
                [](const V& v) { return max_pool2d(v[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true}); });
  expect_golden("max_pool2d_dilation", [](const V& v) {
    return max_pool2d(v[0], {2, 3}, {.stride = 1, .dilation = {2, 1}});
  });
  expect_golden("avg_pool2d", [](const V& v) { return avg_pool2d(v[0], 2); });
  expect_golden("avg_pool2d_pad_exclude_ceil", [](const V& v) {
    return avg_pool2d(v[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
  });
  expect_golden("avg_pool2d_pad_include", [](const V& v) {
    return avg_pool2d(v[0], {3, 2}, {.stride = {2, 1}, .padding = {1, 1}});
  });
  expect_golden("avg_pool2d_divisor", [](const V& v) { return avg_pool2d(v[0], 2, {.divisor_override = 3}); });
  expect_golden("adaptive_avg_pool2d", [](const V& v) { return adaptive_avg_pool2d(v[0], {3, 4}); });
  expect_golden("adaptive_avg_pool2d_global", [](const V& v) { return adaptive_avg_pool2d(v[0], 1); });
}

TEST(Pool, Errors) {
  const Variable x(zeros({1, 2, 4, 4}));
  EXPECT_THROW(max_pool2d(x, 2, {.padding = 2}), ValueError);  // more than half the kernel
  EXPECT_THROW(max_pool2d(x, 5), ShapeError);                  // a window larger than the input
  EXPECT_THROW(max_pool2d(x, 0), ValueError);
  EXPECT_THROW(avg_pool2d(x, 2, {.divisor_override = 0}), ValueError);
  EXPECT_THROW(adaptive_avg_pool2d(x, 0), ValueError);
  EXPECT_THROW(max_pool2d(Variable(zeros({4, 4})), 2), ShapeError);
  EXPECT_THROW(max_pool2d(Variable(arange(16).reshape({1, 1, 4, 4})), 2), DTypeError);
}
