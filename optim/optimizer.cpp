#include "optim/optimizer.h"

namespace mg::optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, double wd, const char* who) {
  MG_CHECK(!groups.empty(), ValueError, "{}: got no parameter groups", who);
  std::unordered_map<VariableImpl*, size_t> seen;
  for (size_t g = 0; g < groups.size(); ++g) {
    Group out{groups[g].params, groups[g].options.lr.value_or(lr), groups[g].options.weight_decay.value_or(wd)};
    MG_CHECK(out.lr >= 0, ValueError, "{}: learning rate must be >= 0, got {} (group {})", who, out.lr, g);
    MG_CHECK(out.weight_decay >= 0, ValueError, "{}: weight_decay must be >= 0, got {} (group {})", who, out.weight_decay, g);
    for (const Variable& p : out.params) {
      MG_CHECK(p.defined() && p.is_leaf(), ValueError, "{}: can only optimize defined leaf variables (group {})", who, g);
      MG_CHECK(is_floating(p.dtype()), DTypeError, "{}: parameter {} is {}; only floating tensors can be optimized", who,
               p.name(), dtype_name(p.dtype()));
      auto [it, fresh] = seen.emplace(p.impl().get(), g);
      MG_CHECK(fresh, ValueError, "{}: parameter '{}' appears in groups {} and {}; each may appear once", who, p.name(),
               it->second, g);
    }
    groups_.push_back(std::move(out));
  }
}

void Optimizer::zero_grad() {
  for (Group& g : groups_)
    for (Variable& p : g.params) p.zero_grad();
}

void Optimizer::set_lr(double lr) {
  for (Group& g : groups_) g.lr = lr;
}

std::vector<ParamGroup> single_group(const std::vector<Variable>& params) { return {ParamGroup{params, {}}}; }

}  // namespace mg::optim
