// Checks exercise 4, softmax_backward: a hand-computed row, the engine's softmax backward along
// each dim, rows summing to 0, and masked entries getting no gradient.
#include "04_softmax_backward.h"

#include <cmath>

#include "check.h"

namespace exercises {
namespace {

const Hint kHint{"04_softmax_backward", "docs/03-writing-an-op.md", "The math first"};

TEST(SoftmaxBackward, HintNamesARealSection) { expect_hint_is_real(kHint); }

TEST(SoftmaxBackward, HandComputedRow) {
  // y = (0.5, 0.5), dy = (1, 0): the row's dot is 0.5, dx = (0.5 (1 - 0.5), 0.5 (0 - 0.5)) = (0.25, -0.25).
  const mg::Tensor y = mg::tensor({0.5, 0.5}, {1, 2}).to(mg::DType::Float64);
  const mg::Tensor dy = mg::tensor({1, 0}, {1, 2}).to(mg::DType::Float64);
  expect_close(softmax_backward(y, dy, 1), mg::tensor({0.25, -0.25}, {1, 2}), 1e-12,
               "dx for y = (0.5, 0.5), dy = (1, 0)");
}

// The engine's dx for softmax(x, dim) and upstream gradient dy.
mg::Tensor engine_dx(const mg::Tensor& x0, const mg::Tensor& dy, int64_t dim) {
  mg::Variable x(x0.clone(), true);
  mg::softmax(x, dim).backward(dy);
  return x.grad();
}

TEST(SoftmaxBackward, AgreesWithTheEngineAlongEveryDim) {
  const mg::Tensor x = random64({3, 4, 5}, 30), dy = random64({3, 4, 5}, 31);
  for (int64_t dim : {0, 1, 2, -1}) {
    const mg::Tensor y = mg::softmax(x, dim);
    expect_close(softmax_backward(y, dy, dim), engine_dx(x, dy, dim), 1e-12,
                 "dx of softmax along dim " + std::to_string(dim) + " of (3, 4, 5)");
  }
}

TEST(SoftmaxBackward, RowsSumToZero) {
  // Adding a constant to a row leaves softmax unchanged, so no gradient can point that way.
  const mg::Tensor x = random64({4, 6}, 32), dy = random64({4, 6}, 33);
  const mg::Tensor dx = softmax_backward(mg::softmax(x, 1), dy, 1);
  expect_close(mg::sum(dx, {1}), mg::zeros({4}), 1e-12, "row sums of dx");
}

TEST(SoftmaxBackward, MaskedEntriesGetNoGradient) {
  // A score of -inf has weight 0, and its dx is 0 whatever dy says.
  const mg::Tensor mask = mg::triu(mg::ones({4, 4}, mg::DType::Bool), 1);
  const mg::Tensor x = mg::masked_fill(random64({4, 4}, 34), mask, -INFINITY), dy = random64({4, 4}, 35);
  const mg::Tensor dx = softmax_backward(mg::softmax(x, -1), dy, -1);
  expect_close(dx, engine_dx(x, dy, -1), 1e-12, "dx of a causally masked softmax");
  expect_close(mg::masked_fill(dx, mg::logical_not(mask), 0.0), mg::zeros({4, 4}), 0, "dx at the masked entries");
}

}  // namespace
}  // namespace exercises
