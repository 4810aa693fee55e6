// Learning-rate schedules: StepLR and warm-up cosine by hand; LambdaLR, LinearLR, SequentialLR,
// OneCycleLR (with the momentum it cycles) and ReduceLROnPlateau against torch.optim.lr_scheduler;
// schedules resumed from checkpoints; and their errors.
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <numbers>

#include <unistd.h>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;

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

TEST(Schedules, CosineAnnealingAndWarmRestartsMatchTorch) {
  // group 0's lr before each step; PyTorch 2.15's numbers (its recursive form drifts by 4e-16 past a
  // period, which the closed form here does not)
  auto lrs = [](optim::SGD& opt, optim::LRScheduler& sched, int n) {
    std::vector<double> out;
    for (int i = 0; i < n; ++i) out.push_back(opt.groups().front().lr), sched.step();
    return from_vector(out, {n});
  };
  Variable w(zeros({1}), true);
  {
    optim::SGD opt({w}, {.lr = 0.1});
    optim::CosineAnnealingLR sched(opt, 10, 0.01);  // past T_max the cosine rises again, as PyTorch's
    expect_close(lrs(opt, sched, 25),
                 from_vector<double>({0.1,
                                      0.09779754323328192,
                                      0.09140576474687263,
                                      0.08145033635316129,
                                      0.06890576474687264,
                                      0.05500000000000001,
                                      0.04109423525312737,
                                      0.028549663646838717,
                                      0.01859423525312737,
                                      0.012202456766718092,
                                      0.01,
                                      0.012202456766718092,
                                      0.0185942352531274,
                                      0.028549663646838794,
                                      0.04109423525312751,
                                      0.05500000000000021,
                                      0.0689057647468729,
                                      0.08145033635316161,
                                      0.09140576474687301,
                                      0.09779754323328231,
                                      0.10000000000000041,
                                      0.09779754323328231,
                                      0.09140576474687302,
                                      0.08145033635316161,
                                      0.06890576474687289},
                                     {25}),
                 1e-14, 0);
  }
  {
    optim::SGD opt({w}, {.lr = 0.1});
    optim::CosineAnnealingWarmRestarts sched(opt, 3, 2, 0.001);  // periods 3, 6, 12
    expect_close(lrs(opt, sched, 22),
                 from_vector<double>({0.1,
                                      0.07525000000000001,
                                      0.025750000000000012,
                                      0.1,
                                      0.09336825748732973,
                                      0.07525000000000001,
                                      0.0505,
                                      0.025750000000000012,
                                      0.007631742512670284,
                                      0.1,
                                      0.09831332840130888,
                                      0.09336825748732973,
                                      0.0855017856687341,
                                      0.07525000000000001,
                                      0.06331154273257478,
                                      0.0505,
                                      0.03768845726742523,
                                      0.025750000000000012,
                                      0.0154982143312659,
                                      0.007631742512670284,
                                      0.0026866715986911243,
                                      0.1},
                                     {22}),
                 1e-15, 0);
  }
  {
    optim::SGD opt({w}, {.lr = 0.1});
    optim::CosineAnnealingWarmRestarts sched(opt, 4);
    expect_close(lrs(opt, sched, 10),
                 from_vector<double>({0.1, 0.08535533905932738, 0.05, 0.014644660940672627, 0.1, 0.08535533905932738,
                                      0.05, 0.014644660940672627, 0.1, 0.08535533905932738},
                                     {10}),
                 1e-15, 0);
  }
  {
    // warm-up then cosine, PyTorch's SequentialLR(LinearLR, CosineAnnealingLR), which WarmupCosineLR
    // (warm-up as (t + 1) / warmup) is not
    optim::SGD opt({w}, {.lr = 0.1});
    optim::LinearLR warm(opt, 0.1, 1.0, 4);
    optim::CosineAnnealingLR cosine(opt, 10);
    optim::SequentialLR sched(opt, {&warm, &cosine}, {4});
    expect_close(
        lrs(opt, sched, 16),
        from_vector<double>({0.010000000000000002, 0.03250000000000001, 0.055000000000000014, 0.07750000000000003, 0.1,
                             0.09755282581475769, 0.09045084971874738, 0.07938926261462367, 0.06545084971874739,
                             0.05000000000000001, 0.03454915028125264, 0.020610737385376353, 0.009549150281252635,
                             0.002447174185242324, 0.0, 0.0024471741852423235},
                            {16}),
        1e-15, 1e-15);
  }
  optim::SGD opt({w}, {.lr = 0.1});
  EXPECT_THROW(optim::CosineAnnealingLR(opt, 0), ValueError);
  EXPECT_THROW(optim::CosineAnnealingLR(opt, 5, -1.0), ValueError);
  EXPECT_THROW(optim::CosineAnnealingWarmRestarts(opt, 0), ValueError);
  EXPECT_THROW(optim::CosineAnnealingWarmRestarts(opt, 2, 0), ValueError);
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
                           .anneal_strategy = optim::AnnealStrategy::Linear,
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
  run("sched_plateau_max_abs", {.mode = optim::PlateauMode::Max,
                                .factor = 0.2,
                                .patience = 1,
                                .threshold = 0.02,
                                .threshold_mode = optim::ThresholdMode::Abs,
                                .min_lr = {0.005}});
  Variable w(zeros({1}), true);
  optim::SGD opt({w}, {.lr = 0.1});
  optim::ReduceLROnPlateau sched(opt);
  EXPECT_THROW(sched.step(), StateError);  // it needs the metric
  EXPECT_THROW(sched.step(NAN), ValueError);
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
