#pragma once
// The base of every optimizer: parameter groups, zero_grad, and per-parameter state.
//
// A parameter group is a list of parameters with its own learning rate and weight decay, e.g.
// weight decay on matrices but not on biases and LayerNorm weights:
//
//   optim::AdamW opt({{decay_params, {}}, {no_decay_params, {.weight_decay = 0.0}}}, {.lr = 3e-4});
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "minigrad/autograd/variable.h"

namespace mg::optim {

/// Per-group overrides; anything unset takes the optimizer's default.
struct GroupOptions {
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

/// A list of parameters and their overrides.
struct ParamGroup {
  std::vector<Variable> params;
  GroupOptions options;
};

/// A group with its options resolved.
struct Group {
  std::vector<Variable> params;
  double lr;
  double weight_decay;
  /// The rate before any scheduler changed it, set by the first scheduler built on the optimizer
  /// (PyTorch's "initial_lr"); later ones start from it.
  std::optional<double> initial_lr;
  /// The group's momentum (SGD, RMSprop) or beta1 (Adam, AdamW) when a schedule cycles it
  /// (OneCycleLR, as PyTorch sets param_group["momentum"] or ["betas"][0]); unset: the optimizer's option.
  std::optional<double> momentum;
};

/// Named tensors an optimizer keeps for one parameter ("exp_avg", "momentum_buffer", "step").
using ParamState = std::map<std::string, Tensor>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Apply one update to every parameter that has a gradient.
  virtual void step() = 0;
  /// The class name ("AdamW"), saved in checkpoints.
  virtual std::string name() const = 0;
  /// The names of the state tensors a parameter has once it has been stepped ("step", "exp_avg",
  /// "exp_avg_sq" for Adam): a checkpoint's state must have exactly these.
  virtual std::vector<std::string> state_names() const = 0;
  /// The settings shared by every group ({"beta1", 0.9}, ...), saved in checkpoints and checked
  /// on load: resuming with other settings is an error, not a silent change of the run.
  virtual std::map<std::string, double> hyper_parameters() const = 0;
  /// The option a schedule may cycle per group as Group::momentum: "momentum" (SGD, RMSprop, when
  /// built with momentum > 0: the buffer exists), "beta1" (Adam, AdamW), or "" (none).
  virtual std::string cycled_momentum() const { return ""; }
  /// State kept for all the parameters at once rather than per parameter (L-BFGS's history),
  /// saved in checkpoints as "optimizer.~<name>"; empty for the others.
  virtual std::map<std::string, Tensor> shared_state() const { return {}; }
  /// Check a saved shared_state() before a load changes anything: a FileError saying what does not
  /// fit (by default: any such state, which this optimizer does not keep).
  virtual void check_shared_state(const std::map<std::string, Tensor>& state) const;
  /// Restore a shared_state() that check_shared_state accepted.
  virtual void load_shared_state(const std::map<std::string, Tensor>&) {}
  /// Clear every parameter's gradient.
  void zero_grad();
  /// The groups, with their current learning rates (schedulers change them).
  std::vector<Group>& groups() { return groups_; }
  const std::vector<Group>& groups() const { return groups_; }
  /// Set the learning rate of every group (finite and >= 0).
  void set_lr(double lr);
  /// The state of parameter p (empty until its first step).
  ParamState& state(const Variable& p) { return state_[p.impl().get()]; }
  /// Whether p has any state yet.
  bool has_state(const Variable& p) const { return state_.count(p.impl().get()) > 0; }

 protected:
  Optimizer(std::vector<ParamGroup> groups, double default_lr, double default_weight_decay, const char* who);
  /// The loop of every step(): fn(group, p, group_index, param_index) for each parameter that has a
  /// gradient, in order, with the gradient checked (check_gradient) and no graph recorded.
  void for_each_param(const std::function<void(const Group&, const Variable&, size_t, size_t)>& fn);
  /// "parameter 'weight' (group 0, #3)": how errors name parameter `index` of group `group`.
  std::string describe(size_t group, size_t index) const;
  /// Its gradient must have its shape and dtype: a ShapeError or DTypeError naming the optimizer
  /// and the parameter otherwise.
  void check_gradient(size_t group, size_t index) const;
  /// Its state tensors `names` must have its shape and dtype (they do not after set_data with
  /// another shape, or Module::to with another dtype, once the optimizer has stepped).
  void check_state(size_t group, size_t index, std::initializer_list<const char*> names);

 private:
  std::vector<Group> groups_;
  std::unordered_map<VariableImpl*, ParamState> state_;
};

/// One group holding all of `params`.
std::vector<ParamGroup> single_group(const std::vector<Variable>& params);

}  // namespace mg::optim
