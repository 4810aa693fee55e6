// Checks exercise 1, unbroadcast: hand-computed sums, the library's sum_to_shape, and the
// gradient the engine gives a broadcast input.
#include "01_unbroadcast.h"

#include "check.h"

namespace exercises {
namespace {

const Hint kHint{"01_unbroadcast", "docs/01-tensors.md", "Broadcasting"};

TEST(Unbroadcast, HintNamesARealSection) { expect_hint_is_real(kHint); }

TEST(Unbroadcast, HandComputedSums) {
  // g = [[0, 1, 2], [3, 4, 5]]
  const mg::Tensor g = mg::arange(6, mg::DType::Float64).reshape({2, 3});
  expect_close(unbroadcast(g, {2, 3}), g, 0, "shape (2, 3) from (2, 3): nothing to sum");
  expect_close(unbroadcast(g, {3}), mg::tensor({3, 5, 7}, {3}), 1e-12, "shape (3) from (2, 3): column sums");
  expect_close(unbroadcast(g, {1, 3}), mg::tensor({3, 5, 7}, {1, 3}), 1e-12,
               "shape (1, 3) from (2, 3): column sums, dim kept");
  expect_close(unbroadcast(g, {2, 1}), mg::tensor({3, 12}, {2, 1}), 1e-12, "shape (2, 1) from (2, 3): row sums");
  expect_close(unbroadcast(g, {}), mg::scalar_tensor(15), 1e-12, "shape () from (2, 3): the sum of all");
}

TEST(Unbroadcast, AgreesWithSumToShape) {
  const mg::Tensor g = random64({4, 2, 3}, 1);
  for (const mg::Shape& shape : std::vector<mg::Shape>{{2, 1}, {1, 3}, {4, 1, 1}, {3}, {1, 1, 3}, {1, 2, 1}, {}})
    expect_close(unbroadcast(g, shape), mg::sum_to_shape(g, shape), 1e-12,
                 "shape " + mg::shape_str(shape) + " from (4, 2, 3)");
}

TEST(Unbroadcast, GivesTheGradientTheEngineGivesABroadcastInput) {
  // z = x * y with x (2, 1) broadcast against y (4, 2, 3); for an upstream gradient dz, the
  // gradient of x is dz * y summed down to x's shape.
  mg::Variable x(random64({2, 1}, 2), true);
  const mg::Tensor y = random64({4, 2, 3}, 3), dz = random64({4, 2, 3}, 4);
  mg::mul(x, mg::Variable(y)).backward(dz);
  expect_close(unbroadcast(dz * y, {2, 1}), x.grad(), 1e-12, "gradient of x (2, 1) in x * y");
}

}  // namespace
}  // namespace exercises
