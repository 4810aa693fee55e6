// Optimizers against torch.optim: 5 steps of SGD, Adam, AdamW, RMSprop and Adagrad on a fixed
// problem (gen_golden_nn.py's, to 1e-5), parameter groups, gradient clipping, and RMSprop and
// Adagrad resumed from a checkpoint bit for bit.
#include <cmath>
#include <filesystem>
#include <memory>

#include <unistd.h>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using testing::HasSubstr;

namespace {
// The problem of gen_golden_nn.py: mean((x W^T + b - y)^2), W (3, 4), b (3), float32.
struct Problem {
  Variable w, b;
  Tensor x, y;
  Problem() {
    const auto& c = mgtest::golden("optim_problem");
    w = Variable(c.at("w0").to(DType::Float32), true).set_name("w");
    b = Variable(c.at("b0").to(DType::Float32), true).set_name("b");
    x = c.at("x").to(DType::Float32);
    y = c.at("y").to(DType::Float32);
  }
  Variable loss() const { return mse_loss(linear(Variable(x), w, b), Variable(y)); }
};

std::vector<double> run(Problem& p, optim::Optimizer& opt, int steps = 5, double clip = 0) {
  std::vector<double> norms;
  for (int i = 0; i < steps; ++i) {
    Variable l = p.loss();
    opt.zero_grad();
    l.backward();
    if (clip > 0) norms.push_back(optim::clip_grad_norm_({p.w, p.b}, clip));
    opt.step();
  }
  return norms;
}

void expect_matches(const Problem& p, const std::string& name) {
  SCOPED_TRACE(name);
  const auto& c = mgtest::golden(name);
  expect_close(p.w.data(), c.at("w"), 1e-5, 1e-5);
  expect_close(p.b.data(), c.at("b"), 1e-5, 1e-5);
}
}  // namespace

TEST(Optim, SGDMatchesTorch) {
  Problem a, b, c;
  optim::SGD plain({a.w, a.b}, {.lr = 0.1});
  run(a, plain);
  expect_matches(a, "sgd_plain");
  optim::SGD mom({b.w, b.b}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  run(b, mom);
  expect_matches(b, "sgd_momentum_dampening_wd");
  optim::SGD nes({c.w, c.b}, {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  run(c, nes);
  expect_matches(c, "sgd_nesterov");
}

TEST(Optim, AdamAndAdamWMatchTorch) {
  Problem a, b, c;
  optim::Adam adam({a.w, a.b}, {.lr = 0.01});
  run(a, adam);
  expect_matches(a, "adam");
  optim::Adam adam_wd({b.w, b.b}, {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1});
  run(b, adam_wd);
  expect_matches(b, "adam_wd");
  optim::AdamW adamw({c.w, c.b}, {.lr = 0.01, .weight_decay = 0.1});  // designated initializers, as documented
  EXPECT_EQ(adamw.name(), "AdamW");
  run(c, adamw);
  expect_matches(c, "adamw");
  EXPECT_EQ(adamw.state(c.w).at("step").item(), 5);
}

TEST(Optim, AdamWDefaultsFollowPyTorch) {
  optim::AdamW opt({Variable(zeros({1}), true)});
  EXPECT_EQ(opt.options.lr, 1e-3);
  EXPECT_EQ(opt.options.weight_decay, 1e-2);  // AdamW's default; Adam's is 0
  EXPECT_EQ(optim::Adam({Variable(zeros({1}), true)}).options.weight_decay, 0);
}

TEST(Optim, ParamGroupsMatchTorch) {
  // Weight decay on the matrix only; the bias in its own group with its own lr.
  Problem p;
  optim::AdamW opt({{{p.w}, {}}, {{p.b}, {.lr = 0.02, .weight_decay = 0.0}}}, {.lr = 0.01, .weight_decay = 0.1});
  EXPECT_EQ(opt.groups()[1].lr, 0.02);
  run(p, opt);
  expect_matches(p, "adamw_groups");
  EXPECT_THROW(optim::SGD({{{p.w}, {}}, {{p.w}, {}}}), ValueError);  // a parameter in two groups
  EXPECT_THROW(optim::SGD({p.w}, {.lr = -1}), ValueError);
}

TEST(Optim, ClipGradNormMatchesTorch) {
  Problem p;
  optim::SGD opt({p.w, p.b}, {.lr = 0.1});
  std::vector<double> norms = run(p, opt, 5, 0.5);
  expect_matches(p, "sgd_clipped");
  expect_close(from_vector(norms, {5}), mgtest::golden("sgd_clipped").at("norms"), 1e-5, 1e-5);
}

TEST(Optim, ClipGradNormHandValues) {
  Variable a(zeros({2}), true), b(zeros({1}), true);
  a.set_grad(tensor({3, 0}, {2}));
  b.set_grad(tensor({4}, {1}));
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 1.0), 5.0, 1e-6);  // sqrt(9 + 16)
  mgtest::expect_values(a.grad(), {2}, {0.6, 0}, 1e-6);
  mgtest::expect_values(b.grad(), {1}, {0.8}, 1e-6);
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 10.0), 1.0, 1e-5);  // below the limit: unchanged
  mgtest::expect_values(b.grad(), {1}, {0.8}, 1e-6);
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 10.0, INFINITY), 0.8, 1e-6);
}

TEST(Optim, ClipGradNormPropagatesNaNAsTorchDoes) {
  Variable a(ones({2}), true), b(ones({2}), true);
  a.set_grad(tensor({NAN, 1}, {2}));
  b.set_grad(tensor({3, 4}, {2}));
  EXPECT_TRUE(std::isnan(optim::clip_grad_norm_({a, b}, 1.0, INFINITY)));  // once 0: NaN lost in a max
  EXPECT_TRUE(std::isnan(b.grad().to_vector<float>()[0]));                 // scaled by NaN, as in torch
  Variable c(zeros({0}), true);
  c.set_grad(zeros({0}));
  EXPECT_EQ(optim::clip_grad_norm_({c}, 1.0, INFINITY), 0);  // an empty gradient adds nothing
  EXPECT_THROW(optim::clip_grad_norm_({c}, 1.0, -INFINITY), ValueError);
  EXPECT_THROW(optim::clip_grad_norm_({c}, -1.0), ValueError);
}

TEST(Optim, RMSpropAndAdagradMatchTorch) {
  Problem a, b, c, d;
  optim::RMSprop rms({a.w, a.b}, {.lr = 0.01});
  run(a, rms);
  expect_matches(a, "rmsprop");
  optim::RMSprop rms2({b.w, b.b},
                      {.lr = 0.01, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.1, .momentum = 0.8, .centered = true});
  run(b, rms2);
  expect_matches(b, "rmsprop_centered_momentum_wd");
  EXPECT_EQ(rms2.state_names(), std::vector<std::string>({"step", "square_avg", "momentum_buffer", "grad_avg"}));
  EXPECT_EQ(rms2.state(b.w).at("step").item<int64_t>(), 5);
  optim::Adagrad ada({c.w, c.b}, {.lr = 0.1});
  run(c, ada);
  expect_matches(c, "adagrad");
  optim::Adagrad ada2(
      {d.w, d.b}, {.lr = 0.1, .lr_decay = 0.05, .weight_decay = 0.1, .initial_accumulator_value = 0.5, .eps = 1e-6});
  run(d, ada2);
  expect_matches(d, "adagrad_decay_init_wd");
}

TEST(Optim, RMSpropAndAdagradResumeFromACheckpointExactly) {
  // 5 steps in one go, and 2 + (save, load into a new model and optimizer) + 3: the same numbers,
  // bit for bit
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("minigrad_test_rmsprop_ckpt_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();  // a name of this process's own: ctest runs this binary in parallel copies
  struct Net : nn::Module {                // the problem's w and b as a module's parameters, for the checkpoint
    Variable w, b;
    explicit Net(Problem& p) {
      register_parameter("w", w, p.w.data().clone());
      register_parameter("b", b, p.b.data().clone());
      p.w = w, p.b = b;
    }
    std::string type_name() const override { return "Net"; }
  };
  for (int which = 0; which < 2; ++which) {
    SCOPED_TRACE(which == 0 ? "RMSprop" : "Adagrad");
    auto make = [which](Problem& p) -> std::unique_ptr<optim::Optimizer> {
      if (which == 0)
        return std::make_unique<optim::RMSprop>(std::vector<Variable>{p.w, p.b},
                                                optim::RMSpropOptions{.lr = 0.01, .momentum = 0.5, .centered = true});
      return std::make_unique<optim::Adagrad>(std::vector<Variable>{p.w, p.b},
                                              optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.1});
    };
    Problem whole, parts, resumed;
    Net n1(parts), n2(resumed);
    auto o1 = make(whole), o2 = make(parts), o3 = make(resumed);
    run(whole, *o1, 5);
    run(parts, *o2, 2);
    optim::save_checkpoint(path, n1, *o2, 2);
    EXPECT_EQ(optim::load_checkpoint(path, n2, *o3), 2);
    run(resumed, *o3, 3);
    EXPECT_EQ(resumed.w.data().to_vector<float>(), whole.w.data().to_vector<float>());
    EXPECT_EQ(resumed.b.data().to_vector<float>(), whole.b.data().to_vector<float>());
  }
}

TEST(Optim, RMSpropAndAdagradErrors) {
  Problem p;
  EXPECT_THROW(optim::RMSprop({p.w}, {.alpha = 1.5}), ValueError);
  EXPECT_THROW(optim::RMSprop({p.w}, {.momentum = -1}), ValueError);
  EXPECT_THROW(optim::Adagrad({p.w}, {.lr_decay = -0.1}), ValueError);
  EXPECT_THROW(optim::Adagrad({p.w}, {.eps = NAN}), ValueError);
  // a parameter whose data changed shape after its first step: an error naming the optimizer, and
  // the parameter before it (b, checked first) is not updated either
  optim::Adagrad ada({p.b, p.w}, {.lr = 0.1});
  run(p, ada, 1);
  const std::vector<float> before = p.b.data().to_vector<float>();
  p.w.set_data(ones({4, 4}));
  p.w.set_grad(ones({4, 4}));
  p.b.set_grad(ones({3}));
  try {
    ada.step();
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Adagrad"));
  }
  EXPECT_EQ(p.b.data().to_vector<float>(), before);
  EXPECT_EQ(ada.state(p.b).at("step").item<int64_t>(), 1);
}
