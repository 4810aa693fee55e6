// A user's program: its own nn/module.h beside minigrad's, and a line fitted with minigrad.
#include <cmath>
#include <cstdio>

#include "nn/module.h"
#include <minigrad/minigrad.h>

int main() {
  user::nn::Module mine;
  mg::Generator gen(0);
  mg::nn::Linear fit(1, 1, {}, gen);
  mg::optim::SGD opt(fit.parameters(), {.lr = 0.1});
  const mg::Tensor x = mg::linspace(-1, 1, 16).reshape({16, 1});
  const mg::Tensor y = mg::add(mg::mul(x, mg::full({16, 1}, 2.0)), mg::full({16, 1}, 1.0));  // y = 2x + 1
  double loss = 0;
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    mg::Variable l = mg::mse_loss(fit(mg::Variable(x)), mg::Variable(y));
    l.backward();
    opt.step();
    loss = l.item();
  }
  const double w = fit.weight.item(), b = fit.bias.item();
  std::printf("user layers %d; fitted y = %.4f x + %.4f, loss %.2e\n", mine.layers, w, b, loss);
  return std::abs(w - 2) < 1e-2 && std::abs(b - 1) < 1e-2 && mine.layers == 3 ? 0 : 1;
}
