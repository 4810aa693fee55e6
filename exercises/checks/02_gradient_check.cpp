// Checks exercise 2, numerical_gradient: an exact derivative, the engine's gradient of a small
// network, the accuracy only a central difference has, and a wrong backward it must expose.
#include "02_gradient_check.h"

#include "check.h"

namespace exercises {
namespace {

const Hint kHint{"02_gradient_check", "docs/02-autograd.md", "Checking gradients"};

TEST(GradientCheck, HintNamesARealSection) { expect_hint_is_real(kHint); }

TEST(GradientCheck, CubesHaveTheDerivativeThreeXSquared) {
  // f(x) = sum(x^3): df/dx_i = 3 x_i^2. x = (1, -2, 0.5) -> (3, 12, 0.75).
  const mg::Tensor x = mg::tensor({1, -2, 0.5}, {3}).to(mg::DType::Float64);
  const auto f = [](const mg::Tensor& t) { return mg::sum(mg::pow(t, 3)).item(); };
  expect_close(numerical_gradient(f, x), mg::tensor({3, 12, 0.75}, {3}), 1e-6, "d/dx sum(x^3) at (1, -2, 0.5)");
}

TEST(GradientCheck, AgreesWithBackwardOnASmallNetwork) {
  // f(x) = sum(tanh(x W) * c), x (3, 4), W (4, 5), c (3, 5): one backward gives df/dx.
  const mg::Tensor x0 = random64({3, 4}, 10), w = random64({4, 5}, 11), c = random64({3, 5}, 12);
  const auto f = [&](const mg::Tensor& t) { return mg::sum(mg::tanh(mg::matmul(t, w)) * c).item(); };
  mg::Variable x(x0.clone(), true);
  mg::sum(mg::tanh(mg::matmul(x, mg::Variable(w))) * mg::Variable(c)).backward();
  expect_close(numerical_gradient(f, x0), x.grad(), 1e-6, "numerical against backward's gradient of x");
}

TEST(GradientCheck, LeavesXAsItWas) {
  const mg::Tensor x = random64({2, 3}, 13), before = x.clone();
  numerical_gradient([](const mg::Tensor& t) { return mg::sum(mg::exp(t)).item(); }, x);
  expect_close(x, before, 0, "x after numerical_gradient (it must not change)");
}

TEST(GradientCheck, IsCentralDifferences) {
  // With eps = 1e-3 on f = sum(exp(x)) at x = 1: the central difference is off by about
  // eps^2 / 6 * e = 4.5e-7, a one-sided one by about eps / 2 * e = 1.4e-3.
  const mg::Tensor x = mg::full({2}, 1.0, mg::DType::Float64);
  const auto f = [](const mg::Tensor& t) { return mg::sum(mg::exp(t)).item(); };
  expect_close(numerical_gradient(f, x, 1e-3), mg::exp(x), 1e-5,
               "d/dx sum(exp(x)) at x = 1 with eps = 1e-3 (a one-sided difference is 1.4e-3 off)");
}

// y = x^3 with a wrong derivative, 2 x (the rule of x^2).
struct WrongCube : mg::Function {
  std::string name() const override { return "wrong_cube"; }
  mg::Tensor forward(mg::FunctionCtx& ctx, const std::vector<mg::Tensor>& in) override {
    ctx.save_for_backward({in[0]});
    return in[0] * in[0] * in[0];
  }
  std::vector<mg::Tensor> backward(mg::FunctionCtx& ctx, const mg::Tensor& dy) override {
    return {dy * ctx.saved()[0] * 2.0};
  }
};

TEST(GradientCheck, ExposesAWrongBackward) {
  const mg::Tensor x0 = mg::tensor({1, 2}, {2}).to(mg::DType::Float64);
  mg::Variable x(x0.clone(), true);
  mg::sum(mg::apply_function<WrongCube>({x})).backward();  // claims (2, 4); the truth is (3, 12)
  const mg::Tensor numeric = numerical_gradient([](const mg::Tensor& t) { return mg::sum(mg::pow(t, 3)).item(); }, x0);
  expect_close(numeric, mg::tensor({3, 12}, {2}), 1e-6, "d/dx sum(x^3) at (1, 2)");
  EXPECT_GT(max_abs_diff(numeric, x.grad()), 0.5) << "the numerical gradient should disagree with the wrong backward";
}

}  // namespace
}  // namespace exercises
