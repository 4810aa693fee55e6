// Checks exercise 3, LogAddExp::backward: hand-computed gradients, mg::gradcheck (with a broadcast
// input too), the gradients of the same function composed of the library's ops, and no overflow.
#include "03_logaddexp_backward.h"

#include <cmath>

#include "check.h"

namespace exercises {
namespace {

const Hint kHint{"03_logaddexp_backward", "docs/03-writing-an-op.md", "From your own code: `mg::Function`"};

TEST(LogAddExp, HintNamesARealSection) { expect_hint_is_real(kHint); }

TEST(LogAddExp, HandComputedGradients) {
  // a = log 3, b = 0: y = log 4, dy/da = 3/4, dy/db = 1/4. a = b = 2: 1/2 each.
  mg::Variable a(mg::tensor({static_cast<float>(std::log(3.0)), 2}, {2}).to(mg::DType::Float64), true);
  mg::Variable b(mg::tensor({0, 2}, {2}).to(mg::DType::Float64), true);
  mg::sum(logaddexp(a, b)).backward();
  expect_close(a.grad(), mg::tensor({0.75, 0.5}, {2}), 1e-6, "da at (a, b) = (log 3, 0) and (2, 2)");
  expect_close(b.grad(), mg::tensor({0.25, 0.5}, {2}), 1e-6, "db at (a, b) = (log 3, 0) and (2, 2)");
}

TEST(LogAddExp, Gradcheck) {
  const auto fn = [](const std::vector<mg::Variable>& v) { return logaddexp(v[0], v[1]); };
  const mg::GradcheckResult same = mg::gradcheck(fn, {random64({3, 4}, 20), random64({3, 4}, 21)});
  EXPECT_TRUE(same.ok) << "gradcheck, a and b (3, 4): " << same.message;
  const mg::GradcheckResult broadcast = mg::gradcheck(fn, {random64({3, 4}, 22), random64({4}, 23)});
  EXPECT_TRUE(broadcast.ok) << "gradcheck, a (3, 4) and b (4) broadcast: " << broadcast.message;
}

TEST(LogAddExp, AgreesWithTheComposedOps) {
  // The same function written with the library's exp, add and log: the same gradients.
  const mg::Tensor a0 = random64({2, 5}, 24), b0 = random64({2, 5}, 25), dy = random64({2, 5}, 26);
  mg::Variable a(a0.clone(), true), b(b0.clone(), true), a2(a0.clone(), true), b2(b0.clone(), true);
  logaddexp(a, b).backward(dy);
  mg::log(mg::exp(a2) + mg::exp(b2)).backward(dy);
  expect_close(a.grad(), a2.grad(), 1e-12, "da against log(exp(a) + exp(b)) differentiated by the engine");
  expect_close(b.grad(), b2.grad(), 1e-12, "db against log(exp(a) + exp(b)) differentiated by the engine");
}

TEST(LogAddExp, NoOverflowAtLargeInputs) {
  // exp(1000) is inf in float64, yet y = 1000 + log 2 and both gradients are 1/2.
  mg::Variable a(mg::full({2}, 1000.0, mg::DType::Float64), true), b(mg::full({2}, 1000.0, mg::DType::Float64), true);
  mg::sum(logaddexp(a, b)).backward();
  expect_close(a.grad(), mg::full({2}, 0.5), 1e-12, "da at a = b = 1000");
  expect_close(b.grad(), mg::full({2}, 0.5), 1e-12, "db at a = b = 1000");
}

}  // namespace
}  // namespace exercises
