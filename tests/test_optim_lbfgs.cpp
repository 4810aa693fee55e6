// L-BFGS against torch.optim.LBFGS step for step (Rosenbrock with and without the strong Wolfe line
// search, a logistic regression over two parameters), resumed from a checkpoint with its history,
// and its typed errors.
#include <cmath>
#include <filesystem>

#include <unistd.h>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;

// L-BFGS against torch.optim.LBFGS (PyTorch 2.x), step for step: the parameters after every
// step(), the loss it returns, and exactly how many times it evaluated the closure. The iterates
// agree to a few parts in 10^7: the first step already differs from PyTorch's in the last bit (its dot
// products run in MKL, its additions fused), and Rosenbrock's curved valley, crossed in hundreds
// of iterations without a line search, magnifies that; the counts of evaluations, which any
// different decision in the iteration or the line search would change, are equal.
TEST(LBFGS, MatchesTorchStepForStepOnRosenbrock) {
  auto rosenbrock = [](const Variable& xy) {
    const Variable x = xy.narrow(0, 0, 1), y = xy.narrow(0, 1, 1);
    return sum(pow(1.0 - x, 2.0) + 100.0 * pow(y - x * x, 2.0));
  };
  auto run = [&](const std::string& name, int steps, optim::LBFGSOptions o) {
    SCOPED_TRACE(name);
    const mgtest::GoldenCase& c = mgtest::golden(name);
    Variable xy(c.at("start0").clone(), true);
    optim::LBFGS opt({xy}, o);
    for (int64_t i = 0; i < steps; ++i) {
      const Variable loss = opt.step([&] {
        opt.zero_grad();
        Variable l = rosenbrock(xy);
        l.backward();
        return l;
      });
      EXPECT_NEAR(loss.item(), c.at("losses").to_vector<double>()[i], 1e-7 * (1 + std::abs(loss.item())));
      expect_close(xy.data(), c.at("xs").narrow(0, i, 1).reshape({2}), 1e-6, 1e-6);
      EXPECT_EQ(opt.func_evals(), static_cast<int64_t>(c.at("evals").to_vector<double>()[i]));
    }
    return xy.data().to_vector<double>();
  };
  run("lbfgs_rosenbrock", 30, {.lr = 0.1});
  const std::vector<double> end =
      run("lbfgs_rosenbrock_strong_wolfe", 6, {.line_search_fn = optim::LineSearch::StrongWolfe});
  EXPECT_NEAR(end[0], 1.0, 1e-5);  // the minimum, (1, 1)
  EXPECT_NEAR(end[1], 1.0, 1e-5);
  run("lbfgs_rosenbrock_short_history", 8,
      {.max_iter = 7, .history_size = 3, .line_search_fn = optim::LineSearch::StrongWolfe});
}

TEST(LBFGS, SeveralParametersAreOneFlatVector) {
  const mgtest::GoldenCase& c = mgtest::golden("lbfgs_logistic_two_params");
  Variable W(c.at("start0").clone(), true), b(c.at("start1").clone(), true);
  const Tensor X = c.at("start2"), Y = c.at("start3");
  optim::LBFGS opt({W, b},
                   {.lr = 0.5, .max_iter = 10, .history_size = 4, .line_search_fn = optim::LineSearch::StrongWolfe});
  for (int64_t i = 0; i < 3; ++i) {
    opt.step([&] {
      opt.zero_grad();
      Variable l =
          binary_cross_entropy_with_logits(flatten(linear(Variable(X), W, b)), Variable(Y)) + 0.1 * sum(pow(W, 4.0));
      l.backward();
      return l;
    });
    const Tensor got = concat({W.data().reshape({3}), b.data()}, 0);
    expect_close(got, c.at("xs").narrow(0, i, 1).reshape({4}), 1e-9, 1e-9);
    EXPECT_EQ(opt.func_evals(), static_cast<int64_t>(c.at("evals").to_vector<double>()[i]));
  }
  EXPECT_LE(opt.history(), 4u);
}

TEST(LBFGS, ResumesFromACheckpointWithItsHistory) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("minigrad_test_lbfgs_" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  struct Net : nn::Module {
    Variable xy;
    Net() { register_parameter("xy", xy, from_vector<double>({-1.5, 2.0}, {2})); }
    std::string type_name() const override { return "Net"; }
  };
  // 4 steps of 3 iterations each; the first run saves after step 2, the second resumes there
  auto run = [&](bool resume) {
    Net net;
    optim::LBFGS opt(net.parameters(),
                     {.max_iter = 3, .history_size = 4, .line_search_fn = optim::LineSearch::StrongWolfe});
    int start = 0;
    if (resume) start = static_cast<int>(optim::load_checkpoint(path, net, opt));
    for (int i = start; i < 4; ++i) {
      opt.step([&] {
        opt.zero_grad();
        const Variable x = net.xy.narrow(0, 0, 1), y = net.xy.narrow(0, 1, 1);
        Variable l = sum(pow(1.0 - x, 2.0) + 100.0 * pow(y - x * x, 2.0));
        l.backward();
        return l;
      });
      if (!resume && i == 1) optim::save_checkpoint(path, net, opt, 2);
    }
    std::vector<double> out = net.xy.data().to_vector<double>();
    out.push_back(static_cast<double>(opt.func_evals())), out.push_back(static_cast<double>(opt.history()));
    return out;
  };
  const std::vector<double> whole = run(false), resumed = run(true);
  EXPECT_EQ(whole, resumed);  // bit for bit: the history came back too
  // an SGD checkpoint is not an L-BFGS one: a typed error
  Net net;
  optim::SGD sgd(net.parameters(), {.lr = 0.1});
  optim::save_checkpoint(path, net, sgd, 1);
  optim::LBFGS opt(net.parameters());
  EXPECT_THROW(optim::load_checkpoint(path, net, opt), FileError);
  std::filesystem::remove(path);
}

TEST(LBFGS, BadUseIsATypedError) {
  Variable w(zeros({2}, DType::Float64), true);
  optim::LBFGS opt({w});
  EXPECT_THROW(opt.step(), StateError);  // it needs the closure
  EXPECT_THROW(opt.step(nullptr), ValueError);
  EXPECT_THROW(opt.step([] { return Variable(zeros({2})); }), ValueError);  // not one number
  EXPECT_THROW(optim::LBFGS({w}, {.history_size = 0}), ValueError);
  EXPECT_THROW(optim::LBFGS({w, Variable(zeros({2}), true)}), DTypeError);  // float64 and float32
}
