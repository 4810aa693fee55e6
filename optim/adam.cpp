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

// Every parameter's state is made and checked first, then one kernel call updates them all
// (tensor/ops/optim.cpp: all their elements shared out over the pool in one pass); the step counts
// move on only after it, so a failed check leaves every parameter and state as it was.
void Adam::step() {
  std::vector<AdamTensors> items;
  std::vector<int64_t*> counts;
  for_each_param([&](const Group& group, const Variable& p, size_t gi, size_t pi) {
    ParamState& st = state(p);
    if (!st.count("step")) {
      st["step"] = zeros({}, DType::Int64);
      st["exp_avg"] = zeros(p.shape(), p.dtype());
      st["exp_avg_sq"] = zeros(p.shape(), p.dtype());
    }
    check_state(gi, pi, {"exp_avg", "exp_avg_sq"});
    int64_t& t = st["step"].data<int64_t>()[0];
    MG_CHECK(t >= 0 && t < std::numeric_limits<int64_t>::max(), StateError,
             "{}: {} has a step count of {}, which cannot go on", name(), describe(gi, pi), t);
    items.push_back({p.data(),
                     p.grad(),
                     st["exp_avg"],
                     st["exp_avg_sq"],
                     {.lr = group.lr,
                      .beta1 = options.beta1,
                      .beta2 = options.beta2,
                      .eps = options.eps,
                      .weight_decay = group.weight_decay,
                      .step = t + 1,
                      .decoupled = decoupled_}});
    counts.push_back(&t);
  });
  adam_step_many_(items);
  for (int64_t* t : counts) ++*t;
}

Adam::Adam(const std::vector<Variable>& params, AdamOptions options) : Adam(single_group(params), options) {}

AdamW::AdamW(const std::vector<Variable>& params, AdamWOptions options) : AdamW(single_group(params), options) {}

}  // namespace mg::optim
