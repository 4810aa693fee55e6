#include "minigrad/optim/optimizer.h"

#include "minigrad/autograd/grad_mode.h"

#include <cmath>

namespace mg::optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, double wd, const char* who) {
  MG_CHECK(!groups.empty(), ValueError, "{}: got no parameter groups", who);
  size_t total = 0;
  for (const ParamGroup& g : groups) total += g.params.size();
  MG_CHECK(total > 0, ValueError, "{}: got an empty parameter list (nothing to optimize)", who);
  std::unordered_map<VariableImpl*, size_t> seen;
  for (size_t g = 0; g < groups.size(); ++g) {
    Group out{groups[g].params, groups[g].options.lr.value_or(lr), groups[g].options.weight_decay.value_or(wd)};
    MG_CHECK(out.lr >= 0 && std::isfinite(out.lr), ValueError, "{}: learning rate must be >= 0, got {} (group {})", who,
             out.lr, g);
    MG_CHECK(out.weight_decay >= 0 && std::isfinite(out.weight_decay), ValueError,
             "{}: weight_decay must be >= 0, got {} (group {})", who, out.weight_decay, g);
    for (const Variable& p : out.params) {
      MG_CHECK(p.defined() && p.is_leaf(), ValueError, "{}: can only optimize defined leaf variables (group {})", who,
               g);
      MG_CHECK(is_floating(p.dtype()), DTypeError, "{}: parameter {} is {}; only floating tensors can be optimized",
               who, p.name(), dtype_name(p.dtype()));
      auto [it, fresh] = seen.emplace(p.impl().get(), g);
      MG_CHECK(fresh, ValueError, "{}: parameter '{}' appears in groups {} and {}; each may appear once", who, p.name(),
               it->second, g);
    }
    groups_.push_back(std::move(out));
  }
}

std::string Optimizer::describe(size_t g, size_t i) const {
  const Variable& p = groups_[g].params[i];
  return fmt::format("parameter '{}' (group {}, #{})", p.name(), g, i);
}

void Optimizer::check_gradient(size_t g, size_t i) const {
  const Variable& p = groups_[g].params[i];
  const Tensor& grad = p.grad();
  MG_CHECK(grad.dtype() == p.dtype(), DTypeError, "{}: {} is {} but its gradient is {}", name(), describe(g, i),
           dtype_name(p.dtype()), dtype_name(grad.dtype()));
  MG_CHECK(grad.shape() == p.shape(), ShapeError, "{}: {} has shape {} but its gradient has {}", name(), describe(g, i),
           shape_str(p.shape()), shape_str(grad.shape()));
}

void Optimizer::check_state(size_t g, size_t i, std::initializer_list<const char*> names) {
  const Variable& p = groups_[g].params[i];
  ParamState& st = state(p);
  for (const char* n : names) {
    auto it = st.find(n);
    MG_CHECK(it != st.end(), StateError, "{}: {} has no '{}' in its state", name(), describe(g, i), n);
    const Tensor& s = it->second;
    MG_CHECK(s.dtype() == p.dtype(), DTypeError,
             "{}: {} is {} but its {} is {} (was the model converted with Module::to after the optimizer's first step? "
             "make the optimizer after converting)",
             name(), describe(g, i), dtype_name(p.dtype()), n, dtype_name(s.dtype()));
    MG_CHECK(
        s.shape() == p.shape(), ShapeError,
        "{}: {} has shape {} but its {} has {} (was its data replaced with set_data after the optimizer's first step?)",
        name(), describe(g, i), shape_str(p.shape()), n, shape_str(s.shape()));
  }
}

void Optimizer::zero_grad() {
  for (Group& g : groups_)
    for (Variable& p : g.params) p.zero_grad();
}

void Optimizer::set_lr(double lr) {
  MG_CHECK(lr >= 0 && std::isfinite(lr), ValueError, "{}: learning rate must be finite and >= 0, got {}", name(), lr);
  for (Group& g : groups_) g.lr = lr;
}

std::vector<ParamGroup> single_group(const std::vector<Variable>& params) { return {ParamGroup{params, {}}}; }

void Optimizer::for_each_param(const std::function<void(const Group&, const Variable&, size_t, size_t)>& fn) {
  NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (size_t pi = 0; pi < groups_[gi].params.size(); ++pi) {
      const Variable& p = groups_[gi].params[pi];
      if (!p.grad().defined()) continue;
      check_gradient(gi, pi);
      fn(groups_[gi], p, gi, pi);
    }
}

void Optimizer::check_shared_state(const std::map<std::string, Tensor>& state) const {
  MG_CHECK(state.empty(), FileError,
           "load_checkpoint: the file holds shared optimizer state \"{}\", which {} does not keep",
           state.begin()->first, name());
}

}  // namespace mg::optim
