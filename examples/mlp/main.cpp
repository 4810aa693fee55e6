// mlp: the first thing to run. A two-layer perceptron learns to separate two interleaved spirals
// in the plane -- a boundary no straight line can draw -- using nothing but minigrad's autograd:
// the weights are ordinary Variables, the loss is cross-entropy, and "training" is
// a momentum SGD step on each weight after every backward().
//
//   make demo            (or: build/examples/mlp/mlp)
#include <cmath>
#include <cstdio>
#include <numbers>

#include "minigrad.h"

using namespace mg;

constexpr int64_t kPointsPerClass = 200;  // two spirals of this many points each
constexpr int64_t kHidden = 64;           // width of the hidden layer
constexpr int kSteps = 3000;              // full-batch gradient steps
constexpr double kLearningRate = 0.2;     // SGD step size
constexpr double kMomentum = 0.9;         // SGD momentum: v = m v + g;  w -= lr v
constexpr uint64_t kSeed = 0;             // same seed, same run, bit for bit

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

void train(MLP& model, const Data& d) {
  std::vector<Tensor> velocity;  // one running gradient average per parameter
  for (auto& p : model.parameters()) velocity.push_back(zeros(p.shape()));
  for (int step = 1; step <= kSteps; ++step) {
    Variable loss = cross_entropy(model.forward(Variable(d.x)), d.y);
    for (auto& p : model.parameters()) p.zero_grad();
    loss.backward();
    {
      NoGradGuard no_grad;  // the update itself is not part of the model
      std::vector<Variable> params = model.parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        velocity[i].copy_(velocity[i] * kMomentum + params[i].grad());
        params[i].data().copy_(params[i].data() - velocity[i] * kLearningRate);
      }
    }
    if (step == 1 || step % 300 == 0)
      std::printf("step %4d/%d  loss %.4f  accuracy %.1f%%\n", step, kSteps, loss.item(), 100 * accuracy(model, d));
  }
}

// The learned decision boundary as a character map: '#' class 1, '.' class 0, 'o'/'x' the data.
void draw(const MLP& model, const Data& d) {
  constexpr int W = 64, H = 28;
  std::vector<float> grid;
  for (int r = 0; r < H; ++r)
    for (int c = 0; c < W; ++c) grid.push_back(-1.f + 2.f * c / (W - 1)), grid.push_back(1.f - 2.f * r / (H - 1));
  NoGradGuard no_grad;
  std::vector<int64_t> cls = argmax(model.forward(Variable(from_vector(grid, {W * H, 2}))).data(), 1).to_vector<int64_t>();
  std::vector<std::string> rows(H, std::string(W, ' '));
  for (int i = 0; i < W * H; ++i) rows[i / W][i % W] = cls[i] ? '#' : '.';
  const std::vector<float> xs = d.x.to_vector<float>();
  const std::vector<int64_t> ys = d.y.to_vector<int64_t>();
  for (size_t i = 0; i < ys.size(); i += 3) {
    const int c = static_cast<int>(std::lround((xs[2 * i] + 1) / 2 * (W - 1)));
    const int r = static_cast<int>(std::lround((1 - xs[2 * i + 1]) / 2 * (H - 1)));
    if (r >= 0 && r < H && c >= 0 && c < W) rows[r][c] = ys[i] ? 'x' : 'o';
  }
  std::printf("\nDecision boundary ('#' = class 1, '.' = class 0; x/o = training points):\n");
  for (auto& row : rows) std::printf("  %s\n", row.c_str());
}

int main() {
  Generator gen(kSeed);
  const Data data = make_spirals(gen);
  MLP model(gen);
  std::printf("minigrad mlp: 2 -> %lld -> 2 on two spirals (%lld points), full-batch SGD with momentum, %d threads\n",
              static_cast<long long>(kHidden), static_cast<long long>(2 * kPointsPerClass), get_num_threads());
  train(model, data);
  draw(model, data);
  const double acc = accuracy(model, data);
  std::printf("\nfinal training accuracy: %.1f%%\n", 100 * acc);
  return acc > 0.95 ? 0 : 1;
}
