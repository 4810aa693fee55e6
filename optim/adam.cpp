#include "minigrad/optim/adam.h"

#include <limits>

#include "minigrad/autograd/grad_mode.h"
#include "minigrad/tensor/ops/optim.h"

namespace mg::optim {

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions o) : Adam(std::move(groups), o, false) {}

namespace {
// The options with weight_decay set: unset is 0.01 for AdamW (decoupled), 0 for Adam, as in PyTorch.
AdamOptions with_decay(AdamOptions o, bool decoupled) {
  o.weight_decay = o.weight_decay.value_or(decoupled ? 1e-2 : 0.0);
  return o;
}
}  // namespace

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions o, bool decoupled)
    : Optimizer(std::move(groups), o.lr, with_decay(o, decoupled).weight_decay.value(), decoupled ? "AdamW" : "Adam"),
      options(with_decay(o, decoupled)),
      decoupled_(decoupled) {
  MG_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, ValueError,
           "{}: betas must be in [0, 1), got ({}, {})", name(), o.beta1, o.beta2);
  MG_CHECK(o.eps >= 0, ValueError, "{}: eps must be >= 0, got {}", name(), o.eps);
}

// Every parameter is checked first, then one kernel call updates them all (tensor/ops/optim.cpp:
// all their elements shared out over the pool in one pass). The step counts move on, and the state
// of a parameter's first step joins the optimizer, only after it: a failed check leaves the
// parameters and the optimizer's state as they were.
void Adam::step() {
  std::vector<AdamTensors> items;
  std::vector<int64_t*> counts;                        // the step counts of the parameters that have state already
  std::vector<std::pair<Variable, ParamState>> fresh;  // the state made for a first step
  for_each_param([&](const Group& group, const Variable& p, size_t gi, size_t pi) {
    int64_t t = 0;
    Tensor m, v;
    if (has_state(p) && state(p).count("step")) {
      check_state(gi, pi, {"exp_avg", "exp_avg_sq"});
      ParamState& st = state(p);
      int64_t& count = st["step"].data<int64_t>()[0];
      MG_CHECK(count >= 0 && count < std::numeric_limits<int64_t>::max(), StateError,
               "{}: {} has a step count of {}, which cannot go on", name(), describe(gi, pi), count);
      t = count, m = st["exp_avg"], v = st["exp_avg_sq"];
      counts.push_back(&count);
    } else {
      m = zeros(p.shape(), p.dtype()), v = zeros(p.shape(), p.dtype());
      fresh.push_back({p, ParamState{{"step", full({}, 1, DType::Int64)}, {"exp_avg", m}, {"exp_avg_sq", v}}});
    }
    items.push_back({p.data(),
                     p.grad(),
                     m,
                     v,
                     {.lr = group.lr,
                      .beta1 = group.momentum.value_or(options.beta1),  // a schedule may cycle it
                      .beta2 = options.beta2,
                      .eps = options.eps,
                      .weight_decay = group.weight_decay,
                      .step = t + 1,
                      .decoupled = decoupled_}});
  });
  adam_step_many_(items);
  for (int64_t* t : counts) ++*t;
  for (auto& [p, st] : fresh)
    for (auto& [key, value] : st) state(p)[key] = std::move(value);
}

Adam::Adam(const std::vector<Variable>& params, AdamOptions options) : Adam(single_group(params), options) {}

AdamW::AdamW(const std::vector<Variable>& params, AdamWOptions options) : AdamW(single_group(params), options) {}

}  // namespace mg::optim
