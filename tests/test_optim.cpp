// Optimizers against torch.optim (5 steps on a fixed problem, to 1e-5), schedules by hand,
// gradient clipping, parameter groups.
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <numbers>

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

TEST(Optim, StepLRByHand) {
  Variable w(zeros({1}), true);
  optim::SGD opt({w}, {.lr = 1.0});
  optim::StepLR sched(opt, 2, 0.5);
  std::vector<double> lrs;
  for (int i = 0; i < 6; ++i) {
    lrs.push_back(sched.get_lr());
    sched.step();
  }
  EXPECT_EQ(lrs, (std::vector<double>{1, 1, 0.5, 0.5, 0.25, 0.25}));
}

TEST(Optim, WarmupCosineByHand) {
  Variable w(zeros({1}), true);
  optim::AdamW opt({w});
  opt.set_lr(1.0);
  optim::WarmupCosineLR sched(opt, 4, 12, 0.1);
  std::vector<double> lrs;
  for (int i = 0; i < 14; ++i) {
    lrs.push_back(sched.get_lr());
    sched.step();
  }
  // warm-up: (t+1)/4
  EXPECT_DOUBLE_EQ(lrs[0], 0.25);
  EXPECT_DOUBLE_EQ(lrs[3], 1.0);
  // cosine from 1 to 0.1 over steps 4..12: halfway (t = 8) is 0.55
  EXPECT_DOUBLE_EQ(lrs[4], 1.0);
  EXPECT_NEAR(lrs[8], 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.5)), 1e-12);
  EXPECT_DOUBLE_EQ(lrs[12], 0.1);
  EXPECT_DOUBLE_EQ(lrs[13], 0.1);
  for (int t = 5; t < 13; ++t) EXPECT_LT(lrs[t], lrs[t - 1]);
  sched.set_step(2);
  EXPECT_DOUBLE_EQ(sched.get_lr(), 0.75);
  EXPECT_THROW(optim::WarmupCosineLR(opt, 5, 5), ValueError);
}

TEST(Optim, SkipsParametersWithoutGradients) {
  Variable a(ones({2}), true), b(ones({2}), true);
  optim::Adam opt({a, b}, {.lr = 0.1});
  sum(a * 2.0).backward();
  opt.step();
  EXPECT_LT(a.data().at({0}), 1.0);
  EXPECT_EQ(b.data().at({0}), 1.0);
  EXPECT_FALSE(opt.has_state(b));
}

TEST(Optim, StateThatNoLongerFitsItsParameterIsNamed) {
  // Adam once read and wrote past its state when a parameter's data changed shape between steps.
  Variable w(ones({2, 3}), true);
  w.set_name("w");
  optim::AdamW opt({w});
  sum(w * w).backward();
  opt.step();
  w.set_data(ones({4, 3}));
  sum(w * w).backward();
  try {
    opt.step();
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("AdamW: parameter 'w' (group 0, #0) has shape (4, 3) but its exp_avg has (2, 3)"));
  }
  // after Module::to(Float64)-like conversion: the state is float32, the parameter float64
  Variable v(ones({2}), true);
  v.set_name("v");
  optim::SGD sgd({v}, {.lr = 0.1, .momentum = 0.9});
  sum(v * v).backward();
  sgd.step();
  v.set_data(v.data().to(DType::Float64));
  sum(v * v).backward();
  try {
    sgd.step();
    FAIL();
  } catch (const DTypeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("SGD: parameter 'v' (group 0, #0) is float64 but its momentum_buffer is float32"));
  }
}

TEST(Optim, NonContiguousParametersStepLikeContiguousOnes) {
  Variable a(tensor({1, 2, 3, 4, 5, 6}, {2, 3}), true), b(tensor({1, 4, 2, 5, 3, 6}, {3, 2}).transpose(0, 1), true);
  optim::AdamW oa({a}, {.lr = 0.1}), ob({b}, {.lr = 0.1});
  for (int i = 0; i < 3; ++i) {
    for (auto [p, o] : {std::pair{&a, &oa}, {&b, &ob}}) {
      o->zero_grad();
      sum(*p * *p * *p).backward();
      o->step();
    }
  }
  expect_close(b.data(), a.data(), 0, 0);
  EXPECT_FALSE(b.data().is_contiguous());  // updated in place, through its own layout
}

namespace {
// AdamW's update written out element by element, as the kernel did before it took many parameters
// at once (torch.optim's order of operations; the constants in double, rounded once to T).
template <class T>
void reference_adamw(Tensor& w, const Tensor& g, std::vector<T>& m, std::vector<T>& v, double lr, double wd,
                     int64_t step) {
  const Tensor gc = g.contiguous();
  Tensor wc = w.contiguous();
  const T b1 = T(0.9), b2 = T(0.999), eps = T(1e-8), lrt = T(lr), wdt = T(wd);
  const T step_size = static_cast<T>(lr / (1 - std::pow(0.9, static_cast<double>(step))));
  const T bc2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(0.999, static_cast<double>(step))));
  T* pw = wc.data<T>();
  const T* pg = gc.data<T>();
  for (int64_t i = 0; i < wc.numel(); ++i) {
    pw[i] *= T(1) - lrt * wdt;
    m[i] = m[i] * b1 + pg[i] * (T(1) - b1);
    v[i] = v[i] * b2 + pg[i] * pg[i] * (T(1) - b2);
    pw[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
  }
  w = wc;
}
}  // namespace

// Adam's step updates all parameters in one kernel call (adam_step_many_, every element of every
// parameter shared out together): the bits are those of the update written out per element, for a
// large parameter (many pieces), small ones, float64 beside float32, and a transposed view; and
// the same again when two parameters are views of one buffer (then updated one after another).
TEST(Optim, OnePassOverAllParametersHasTheBitsOfOneAtATime) {
  Generator g(5);
  const Tensor buffer = uniform({2, 40}, -1, 1, g);
  std::vector<Variable> params{Variable(uniform({300, 257}, -1, 1, g), true), Variable(uniform({7}, -1, 1, g), true),
                               Variable(uniform({3, 5}, -1, 1, g, DType::Float64), true),
                               Variable(uniform({6, 4}, -1, 1, g).transpose(0, 1), true)};
  for (bool shared : {false, true}) {
    if (shared) params = {Variable(buffer.narrow(0, 0, 1), true), Variable(buffer.narrow(0, 1, 1), true)};
    std::vector<Tensor> want;
    std::vector<std::vector<float>> m32, v32;
    std::vector<std::vector<double>> m64, v64;
    for (const Variable& p : params) {
      want.push_back(p.data().clone());
      m32.emplace_back(p.numel(), 0.0f), v32.emplace_back(p.numel(), 0.0f);
      m64.emplace_back(p.numel(), 0.0), v64.emplace_back(p.numel(), 0.0);
    }
    optim::AdamW opt(params, {.lr = 0.01});
    for (int64_t step = 1; step <= 3; ++step) {
      opt.zero_grad();
      for (const Variable& p : params) sum(p * p * p).backward();
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i].dtype() == DType::Float64)
          reference_adamw<double>(want[i], params[i].grad(), m64[i], v64[i], 0.01, 0.01, step);
        else
          reference_adamw<float>(want[i], params[i].grad(), m32[i], v32[i], 0.01, 0.01, step);
      }
      opt.step();
      for (size_t i = 0; i < params.size(); ++i) expect_close(params[i].data(), want[i], 0, 0);
    }
    if (!shared) EXPECT_FALSE(params[3].data().is_contiguous());
  }
}

// A check that fails on one parameter leaves every parameter, state and step count as it was.
TEST(Optim, AFailedStepChangesNothing) {
  Variable a(ones({2}), true), b(ones({3}), true);
  optim::Adam opt({a, b}, {.lr = 0.1});
  sum(a * a).backward();
  sum(b * b).backward();
  opt.step();
  const Tensor a1 = a.data().clone(), m1 = opt.state(a).at("exp_avg").clone();
  b.set_data(ones({4}));
  opt.zero_grad();
  sum(a * a).backward();
  sum(b * b).backward();
  EXPECT_THROW(opt.step(), ShapeError);
  expect_close(a.data(), a1, 0, 0);
  expect_close(opt.state(a).at("exp_avg"), m1, 0, 0);
  EXPECT_EQ(opt.state(a).at("step").data<int64_t>()[0], 1);
  // a parameter's first step, failing on another parameter, leaves it without state
  Variable d(ones({2}), true), e(ones({2}), true);
  optim::Adam opt3({d, e}, {.lr = 0.1});
  sum(e * e).backward();
  opt3.step();  // e's first step (d has no gradient yet)
  e.set_data(ones({5}));
  sum(d * d).backward();
  sum(e * e).backward();
  EXPECT_THROW(opt3.step(), ShapeError);  // e's state (2) no longer fits it; d, first, had none yet
  EXPECT_FALSE(opt3.has_state(d));
  EXPECT_EQ(d.data().at({0}), 1.0);
}

TEST(Optim, BadSettingsAreRefused) {
  EXPECT_THROW(optim::SGD(std::vector<Variable>{}), ValueError);  // an empty parameter list
  Variable w(ones({2}), true);
  optim::SGD sgd({w});
  EXPECT_THROW(sgd.set_lr(NAN), ValueError);
  EXPECT_THROW(sgd.set_lr(-5), ValueError);
  EXPECT_THROW(optim::SGD({w}, {.lr = INFINITY}), ValueError);
  EXPECT_THROW(optim::StepLR(sgd, 2, -1.0), ValueError);
  optim::StepLR sched(sgd, 2);
  sched.set_step(std::numeric_limits<int64_t>::max());
  EXPECT_THROW(sched.step(), StateError);  // the count cannot go on (once a signed overflow)
  // an Adam step counter at its end
  optim::Adam adam({w});
  sum(w * w).backward();
  adam.step();
  adam.state(w)["step"].data<int64_t>()[0] = std::numeric_limits<int64_t>::max();
  EXPECT_THROW(adam.step(), StateError);
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

TEST(Schedules, LambdaLinearAndSequentialMatchTorch) {
  // the lr of group 0 before and after each of 12 steps, against torch.optim.lr_scheduler
  auto check = [](const std::string& name,
                  const std::function<std::unique_ptr<optim::LRScheduler>(optim::SGD&)>& make) {
    SCOPED_TRACE(name);
    Variable w(zeros({1}), true);
    optim::SGD opt({w}, {.lr = 0.1});
    std::vector<std::unique_ptr<optim::LRScheduler>> keep;  // SequentialLR's parts
    auto sched = make(opt);
    std::vector<double> lrs{sched->get_lr()};
    for (int i = 0; i < 12; ++i) sched->step(), lrs.push_back(sched->get_lr());
    expect_close(from_vector(lrs, {13}), mgtest::golden(name).at("lrs"), 1e-15, 1e-12);
  };
  check("sched_lambda", [](optim::SGD& o) {
    return std::make_unique<optim::LambdaLR>(o, [](int64_t t) { return std::pow(0.9, static_cast<double>(t)); });
  });
  check("sched_linear", [](optim::SGD& o) { return std::make_unique<optim::LinearLR>(o, 0.25, 1.0, 4); });
  check("sched_linear_down", [](optim::SGD& o) { return std::make_unique<optim::LinearLR>(o, 1.0, 0.1, 6); });
  // the parts are built first, as in PyTorch; they change the rate, SequentialLR starts from the initial one
  static std::unique_ptr<optim::LinearLR> warm;
  static std::unique_ptr<optim::StepLR> decay;
  check("sched_sequential", [](optim::SGD& o) {
    warm = std::make_unique<optim::LinearLR>(o, 0.1, 1.0, 3);
    decay = std::make_unique<optim::StepLR>(o, 2, 0.5);
    return std::make_unique<optim::SequentialLR>(o, std::vector<optim::LRScheduler*>{warm.get(), decay.get()},
                                                 std::vector<int64_t>{3});
  });
  EXPECT_EQ(decay->base_lrs(), std::vector<double>({0.1}));  // the initial rate, not the warm-up's first
}

TEST(Schedules, OneCycleMatchesTorchRatesAndMomentum) {
  auto run = [](optim::Optimizer& opt, optim::LRScheduler& sched, const std::string& name) {
    SCOPED_TRACE(name);
    std::vector<double> lrs{sched.get_lr()}, moms{opt.groups()[0].momentum.value()};
    for (int i = 0; i < 12; ++i) sched.step(), lrs.push_back(sched.get_lr()), moms.push_back(*opt.groups()[0].momentum);
    expect_close(from_vector(lrs, {13}), mgtest::golden(name).at("lrs"), 1e-15, 1e-12);
    expect_close(from_vector(moms, {13}), mgtest::golden(name).at("momenta"), 1e-15, 1e-12);
    EXPECT_THROW(sched.step(), ValueError);  // a 13th step of a 12-step cycle, as PyTorch
  };
  Variable w(zeros({1}), true);
  optim::SGD sgd({w}, {.lr = 0.1, .momentum = 0.9});
  optim::OneCycleLR one(sgd, 0.5, 12);
  run(sgd, one, "sched_one_cycle");
  optim::Adam adam({w}, {.lr = 0.1});
  optim::OneCycleLR three(adam, 0.02, 12,
                          {.pct_start = 0.25,
                           .anneal_strategy = "linear",
                           .base_momentum = 0.8,
                           .max_momentum = 0.9,
                           .div_factor = 10,
                           .final_div_factor = 100,
                           .three_phase = true});
  run(adam, three, "sched_one_cycle_linear_three_phase_adam");
  // the cycled momentum is the one the optimizer steps with: a least-squares fit, weight for weight
  const mgtest::GoldenCase& fit = mgtest::golden("sched_one_cycle_sgd_fit");
  Variable v(zeros({3}, DType::Float64), true);
  optim::SGD opt({v}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  optim::OneCycleLR sched(opt, 0.2, 10);
  const Variable X(fit.at("X")), Y(fit.at("Y"));
  for (int64_t i = 0; i < 10; ++i) {
    opt.zero_grad();
    mean(pow(matmul(X, v) - Y, 2.0)).backward();
    opt.step();
    sched.step();
    expect_close(v.data(), fit.at("ws").narrow(0, i, 1).reshape({3}), 1e-13, 1e-12);
  }
  // without momentum to cycle: a typed error naming what to pass
  optim::Adagrad ada({w});
  try {
    optim::OneCycleLR bad(ada, 0.1, 10);
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("cycle_momentum = false"));
  }
  optim::OneCycleLR plain(ada, 0.1, 10, {.cycle_momentum = false});
  EXPECT_DOUBLE_EQ(plain.get_lr(), 0.1 / 25);
  EXPECT_FALSE(ada.groups()[0].momentum.has_value());
}

TEST(Schedules, ReduceLROnPlateauMatchesTorch) {
  auto run = [](const std::string& name, optim::PlateauOptions o) {
    SCOPED_TRACE(name);
    Variable w(zeros({1}), true);
    optim::SGD opt({w}, {.lr = 0.1});
    optim::ReduceLROnPlateau sched(opt, o);
    const std::vector<double> metrics = mgtest::golden(name).at("metrics").to_vector<double>();
    std::vector<double> lrs;
    for (double m : metrics) sched.step(m), lrs.push_back(sched.get_lr());
    expect_close(from_vector(lrs, {static_cast<int64_t>(lrs.size())}), mgtest::golden(name).at("lrs"), 1e-15, 1e-12);
  };
  run("sched_plateau_min", {.factor = 0.5, .patience = 2, .threshold = 0.01, .cooldown = 1});
  run("sched_plateau_max_abs",
      {.mode = "max", .factor = 0.2, .patience = 1, .threshold = 0.02, .threshold_mode = "abs", .min_lr = {0.005}});
  Variable w(zeros({1}), true);
  optim::SGD opt({w}, {.lr = 0.1});
  optim::ReduceLROnPlateau sched(opt);
  EXPECT_THROW(sched.step(), StateError);  // it needs the metric
  EXPECT_THROW(sched.step(NAN), ValueError);
  EXPECT_THROW(optim::ReduceLROnPlateau(opt, {.mode = "lowest"}), ValueError);
  EXPECT_THROW(optim::ReduceLROnPlateau(opt, {.factor = 1.0}), ValueError);
  EXPECT_THROW(optim::ReduceLROnPlateau(opt, {.min_lr = {0.1, 0.2}}), ValueError);  // 2 floors, 1 group
  optim::StepLR step(opt, 2);
  EXPECT_THROW(optim::SequentialLR(opt, {&sched, &step}, {3}), ValueError);  // no rate for a step
}

TEST(Schedules, OneCycleAndPlateauResumeFromCheckpoints) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("minigrad_test_cycle_" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  struct Net : nn::Module {
    Variable w;
    Net() { register_parameter("w", w, full({2}, 1.0, DType::Float64)); }
    std::string type_name() const override { return "Net"; }
  };
  const std::vector<double> metrics{1, 0.9, 0.9, 0.9, 0.95, 0.9, 0.9, 0.85, 0.9, 0.9};
  // weights, rates and momenta after 10 steps; the second run saves at step 5, and a third resumes there
  auto run = [&](int save_at, bool resume) {
    Net net;
    optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
    optim::OneCycleLR cycle(opt, 0.3, 10);
    Net net2;
    optim::Adam opt2(net2.parameters(), {.lr = 0.1});
    optim::ReduceLROnPlateau plateau(opt2, {.factor = 0.5, .patience = 1, .cooldown = 1});
    int start = 0;
    if (resume) {
      start = static_cast<int>(optim::load_checkpoint(path, net, opt, &cycle));
      optim::load_checkpoint(path + ".2", net2, opt2, &plateau);
    }
    std::vector<double> out;
    for (int i = start; i < 10; ++i) {
      for (auto* o : std::initializer_list<optim::Optimizer*>{&opt, &opt2}) o->zero_grad();
      sum(net.w * net.w * static_cast<double>(i + 1)).backward();
      sum(net2.w * net2.w).backward();
      opt.step(), cycle.step(), opt2.step(), plateau.step(metrics[i]);
      if (i + 1 == save_at) {
        optim::save_checkpoint(path, net, opt, i + 1, &cycle);
        optim::save_checkpoint(path + ".2", net2, opt2, i + 1, &plateau);
      }
    }
    for (double x : net.w.data().to_vector<double>()) out.push_back(x);
    for (double x : net2.w.data().to_vector<double>()) out.push_back(x);
    out.push_back(opt.groups()[0].lr), out.push_back(*opt.groups()[0].momentum), out.push_back(opt2.groups()[0].lr);
    out.push_back(plateau.best()), out.push_back(static_cast<double>(plateau.num_bad_epochs()));
    return out;
  };
  const std::vector<double> whole = run(5, false), resumed = run(0, true);
  EXPECT_EQ(whole, resumed);
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".2");
}

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
  const std::vector<double> end = run("lbfgs_rosenbrock_strong_wolfe", 6, {.line_search_fn = "strong_wolfe"});
  EXPECT_NEAR(end[0], 1.0, 1e-5);  // the minimum, (1, 1)
  EXPECT_NEAR(end[1], 1.0, 1e-5);
  run("lbfgs_rosenbrock_short_history", 8, {.max_iter = 7, .history_size = 3, .line_search_fn = "strong_wolfe"});
}

TEST(LBFGS, SeveralParametersAreOneFlatVector) {
  const mgtest::GoldenCase& c = mgtest::golden("lbfgs_logistic_two_params");
  Variable W(c.at("start0").clone(), true), b(c.at("start1").clone(), true);
  const Tensor X = c.at("start2"), Y = c.at("start3");
  optim::LBFGS opt({W, b}, {.lr = 0.5, .max_iter = 10, .history_size = 4, .line_search_fn = "strong_wolfe"});
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
    optim::LBFGS opt(net.parameters(), {.max_iter = 3, .history_size = 4, .line_search_fn = "strong_wolfe"});
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
  EXPECT_THROW(optim::LBFGS({w}, {.line_search_fn = "armijo"}), ValueError);
  EXPECT_THROW(optim::LBFGS({w}, {.history_size = 0}), ValueError);
  EXPECT_THROW(optim::LBFGS({w, Variable(zeros({2}), true)}), DTypeError);  // float64 and float32
}

TEST(Schedules, SequentialResumesFromACheckpoint) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("minigrad_test_sequential_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  struct Net : nn::Module {
    Variable w;
    Net() { register_parameter("w", w, zeros({2})); }
    std::string type_name() const override { return "Net"; }
  };
  auto lrs_after = [&](bool resume) {
    Net net;
    optim::SGD opt(net.parameters(), {.lr = 0.2});
    optim::LinearLR warm(opt, 0.5, 1.0, 2);
    optim::LambdaLR decay(opt, [](int64_t t) { return 1.0 / static_cast<double>(t + 1); });
    optim::SequentialLR sched(opt, {&warm, &decay}, {2});
    std::vector<double> lrs;
    int start = 0;
    if (resume) start = static_cast<int>(optim::load_checkpoint(path, net, opt, &sched));
    for (int i = start; i < 6; ++i) {
      sched.step();
      lrs.push_back(sched.get_lr());
      if (!resume && i == 2) optim::save_checkpoint(path, net, opt, 3, &sched);
    }
    return lrs;
  };
  const std::vector<double> whole = lrs_after(false), resumed = lrs_after(true);
  ASSERT_EQ(resumed.size(), 3u);
  EXPECT_EQ(std::vector<double>(whole.end() - 3, whole.end()), resumed);
}

TEST(Schedules, Errors) {
  Variable w(zeros({1}), true);
  optim::SGD opt({w}, {.lr = 0.1});
  EXPECT_THROW(optim::LinearLR(opt, 0.0), ValueError);
  EXPECT_THROW(optim::LinearLR(opt, 0.5, 1.5), ValueError);
  EXPECT_THROW(optim::LinearLR(opt, 0.5, 1.0, 0), ValueError);
  EXPECT_THROW(optim::LambdaLR(opt, nullptr), ValueError);
  EXPECT_THROW(optim::LambdaLR(opt, [](int64_t) { return NAN; }), ValueError);
  optim::StepLR a(opt, 2), b(opt, 3);
  EXPECT_THROW(optim::SequentialLR(opt, {&a, &b}, {}), ValueError);
  EXPECT_THROW(optim::SequentialLR(opt, {&a, &b}, {0}), ValueError);
  EXPECT_THROW(optim::SequentialLR(opt, {&a, nullptr}, {2}), ValueError);
  // a schedule of another optimizer, even one with as many groups (it was accepted)
  Variable w2(zeros({1}), true);
  optim::SGD other({w2}, {.lr = 0.5});
  optim::StepLR c(other, 2);
  try {
    optim::SequentialLR(opt, {&a, &c}, {2});
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_THAT(std::string(e.what()),
                testing::HasSubstr("SequentialLR: scheduler 1 (StepLR) belongs to another optimizer"));
  }
}
