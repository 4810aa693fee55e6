#pragma once
// mlp, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace mlp {
using namespace mg;

constexpr int64_t kPointsPerClass = 200;  // two spirals of this many points each
constexpr int64_t kHidden = 64;           // width of the hidden layer
constexpr double kMomentum = 0.9;         // SGD momentum: v = m v + g;  w -= lr v

struct Config {
  int steps = 3000;   // full-batch gradient steps
  double lr = 0.2;    // SGD step size
  uint64_t seed = 0;  // same seed, same run, bit for bit
  std::string out = "runs/mlp";
};

struct Data {
  Tensor x;  // (N, 2) float32 points
  Tensor y;  // (N,) int64 labels 0 or 1
};

// Two spirals: class c's point at angle t is r(t) * (cos(t + c*pi), sin(t + c*pi)) plus noise.
Data make_spirals(Generator& gen) {
  const int64_t n = 2 * kPointsPerClass;
  std::vector<float> xs(n * 2);
  std::vector<int64_t> ys(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = i % 2;
    const double t = 0.5 + 3.0 * std::numbers::pi * static_cast<double>(i / 2) / kPointsPerClass;
    const double r = t / (3.5 * std::numbers::pi);
    xs[2 * i] = static_cast<float>(r * std::cos(t + c * std::numbers::pi) + 0.02 * gen.next_normal());
    xs[2 * i + 1] = static_cast<float>(r * std::sin(t + c * std::numbers::pi) + 0.02 * gen.next_normal());
    ys[i] = c;
  }
  return {from_vector(xs, {n, 2}), from_vector(ys, {n})};
}

// The model's parameters: ordinary leaf Variables with requires_grad, initialised like PyTorch's
// nn.Linear (uniform in +-1/sqrt(fan_in)).
struct MLP {
  Variable w1, b1, w2, b2;
  explicit MLP(Generator& g) {
    const double k1 = 1 / std::sqrt(2.0), k2 = 1 / std::sqrt(static_cast<double>(kHidden));
    w1 = Variable(uniform({kHidden, 2}, -k1, k1, g), true).set_name("w1");
    b1 = Variable(uniform({kHidden}, -k1, k1, g), true).set_name("b1");
    w2 = Variable(uniform({2, kHidden}, -k2, k2, g), true).set_name("w2");
    b2 = Variable(uniform({2}, -k2, k2, g), true).set_name("b2");
  }
  // x: (N, 2) -> logits (N, 2)
  Variable forward(const Variable& x) const { return linear(tanh(linear(x, w1, b1)), w2, b2); }
  std::vector<Variable> parameters() const { return {w1, b1, w2, b2}; }
};

double accuracy(const MLP& model, const Data& d) {
  NoGradGuard no_grad;
  Tensor pred = argmax(model.forward(Variable(d.x)).data(), 1);
  return mean(eq(pred, d.y).to(DType::Float32)).item();
}

std::vector<double> train(MLP& model, const Data& d, const Config& c) {
  std::vector<Tensor> velocity;  // one running gradient average per parameter
  for (auto& p : model.parameters()) velocity.push_back(zeros(p.shape()));
  viz::ProgressBar bar(c.steps, "train");
  std::vector<double> losses;
  for (int step = 1; step <= c.steps; ++step) {
    Variable loss = cross_entropy(model.forward(Variable(d.x)), d.y);
    for (auto& p : model.parameters()) p.zero_grad();
    loss.backward();
    {
      NoGradGuard no_grad;  // the update itself is not part of the model
      std::vector<Variable> params = model.parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        velocity[i].copy_(velocity[i] * kMomentum + params[i].grad());
        params[i].data().copy_(params[i].data() - velocity[i] * c.lr);
      }
    }
    losses.push_back(loss.item());
    bar.update(step, loss.item(), step % 100 == 0 || step == c.steps ? accuracy(model, d) : -1, d.x.size(0));
  }
  bar.finish();
  return losses;
}

// P(class 1) on a grid over [-1, 1]^2, row 0 at the top: (H, W).
Tensor probability_grid(const MLP& model, int64_t W, int64_t H) {
  std::vector<float> grid;
  for (int64_t r = 0; r < H; ++r)
    for (int64_t c = 0; c < W; ++c) grid.push_back(-1.f + 2.f * c / (W - 1)), grid.push_back(1.f - 2.f * r / (H - 1));
  NoGradGuard no_grad;
  Tensor p = softmax(model.forward(Variable(from_vector(grid, {W * H, 2}))).data(), 1);
  return p.narrow(1, 1, 1).reshape({H, W}).contiguous();
}

// The learned decision boundary as a character map: '#' class 1, '.' class 0, 'o'/'x' the data.
void draw(const MLP& model, const Data& d) {
  constexpr int W = 64, H = 28;
  const std::vector<float> p = probability_grid(model, W, H).to_vector<float>();
  std::vector<std::string> rows(H, std::string(W, ' '));
  for (int i = 0; i < W * H; ++i) rows[i / W][i % W] = p[i] > 0.5f ? '#' : '.';
  const std::vector<float> xs = d.x.to_vector<float>();
  const std::vector<int64_t> ys = d.y.to_vector<int64_t>();
  for (size_t i = 0; i < ys.size(); i += 3) {
    const int c = static_cast<int>(std::lround((xs[2 * i] + 1) / 2 * (W - 1)));
    const int r = static_cast<int>(std::lround((1 - xs[2 * i + 1]) / 2 * (H - 1)));
    if (r >= 0 && r < H && c >= 0 && c < W) rows[r][c] = ys[i] ? 'x' : 'o';
  }
  fmt::print("\nDecision boundary ('#' = class 1, '.' = class 0; x/o = training points):\n");
  for (auto& row : rows) fmt::print("  {}\n", row);
}

}  // namespace mlp
