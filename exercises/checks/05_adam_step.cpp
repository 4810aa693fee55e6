// Checks exercise 5, adam_step: the first step's size, the state after it, and three steps beside
// optim::Adam on the same parameter and gradients, in float64.
#include "05_adam_step.h"

#include "check.h"

namespace exercises {
namespace {

const Hint kHint{"05_adam_step", "docs/04-nn.md", "Training loop"};

TEST(AdamStep, HintNamesARealSection) { expect_hint_is_real(kHint); }

TEST(AdamStep, FirstStepMovesEachElementByLrAgainstTheGradientsSign) {
  // At t = 1, m_hat = g and v_hat = g^2, so the step is lr * g / (|g| + eps): lr times g's sign.
  const mg::Tensor p = random64({2, 3}, 40), g = random64({2, 3}, 41);
  AdamState state{mg::zeros_like(p), mg::zeros_like(p), 0};
  const AdamSettings s{.lr = 0.1};
  const mg::Tensor p1 = adam_step(p, g, state, s);
  expect_close(p1, p - mg::sign(g) * 0.1, 1e-6, "p after one step (p - lr * sign(grad))");
  EXPECT_EQ(state.t, 1) << "the step count after one step";
  expect_close(state.m, g * 0.1, 1e-12, "m after one step ((1 - beta1) * grad)");
  expect_close(state.v, g * g * 0.001, 1e-12, "v after one step ((1 - beta2) * grad^2)");
}

TEST(AdamStep, ThreeStepsAgreeWithOptimAdam) {
  const AdamSettings s{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.01};
  mg::Tensor p = random64({3, 4}, 42);
  mg::Variable w(p.clone(), true);
  mg::optim::Adam adam(std::vector<mg::Variable>{w},
                       {.lr = s.lr, .beta1 = s.beta1, .beta2 = s.beta2, .eps = s.eps, .weight_decay = s.weight_decay});
  AdamState state{mg::zeros_like(p), mg::zeros_like(p), 0};
  for (int step = 1; step <= 3; ++step) {
    const mg::Tensor g = random64({3, 4}, 50 + step);
    const mg::Tensor given = p, before = p.clone();  // given shares p's numbers
    p = adam_step(given, g, state, s);
    expect_close(given, before, 0,
                 "the p passed in after step " + std::to_string(step) + " (adam_step must not write into it)");
    w.set_grad(g.clone());
    adam.step();
    if (!expect_close(p, w.data(), 1e-12, "p after step " + std::to_string(step) + " against optim::Adam")) break;
  }
}

}  // namespace
}  // namespace exercises
