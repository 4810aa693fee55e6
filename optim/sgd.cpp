#include "minigrad/optim/sgd.h"

#include <cmath>

#include "minigrad/autograd/grad_mode.h"
#include "minigrad/tensor/ops.h"

namespace mg::optim {

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions o)
    : Optimizer(std::move(groups), o.lr, o.weight_decay, "SGD"), options(o) {
  MG_CHECK(o.momentum >= 0 && std::isfinite(o.momentum), ValueError, "SGD: momentum must be >= 0, got {}", o.momentum);
  MG_CHECK(std::isfinite(o.dampening), ValueError, "SGD: dampening must be finite, got {}", o.dampening);
  MG_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), ValueError,
           "SGD: nesterov needs momentum > 0 and dampening 0 (got momentum {}, dampening {})", o.momentum, o.dampening);
}

void SGD::step() {
  for_each_param([&](const Group& group, const Variable& p, size_t gi, size_t pi) {
    Tensor g = p.grad();
    if (group.weight_decay != 0) g = g + p.data() * group.weight_decay;
    if (options.momentum != 0) {
      const double momentum = group.momentum.value_or(options.momentum);  // a schedule may cycle it
      ParamState& st = state(p);
      auto it = st.find("momentum_buffer");
      if (it == st.end()) {
        st["momentum_buffer"] = g.clone();
      } else {
        check_state(gi, pi, {"momentum_buffer"});
        it->second.copy_(it->second * momentum + g * (1 - options.dampening));
      }
      const Tensor& buf = st["momentum_buffer"];
      g = options.nesterov ? g + buf * momentum : buf;
    }
    p.data().copy_(p.data() - g * group.lr);
  });
}

SGD::SGD(const std::vector<Variable>& params, SGDOptions options) : SGD(single_group(params), options) {}

}  // namespace mg::optim
