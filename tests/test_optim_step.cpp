// How an optimizer's step treats its parameters: those without a gradient are skipped, state that
// no longer fits its parameter is named, any layout steps as a contiguous one does, one pass over all
// parameters has the bits of one at a time, a failed step changes nothing, bad settings are refused.
#include <cmath>
#include <limits>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using testing::HasSubstr;

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
