#pragma once
// RMSprop (Hinton's lecture notes; torch.optim.RMSprop's exact update) and Adagrad (Duchi et al.
// 2011; torch.optim.Adagrad's). Both divide each gradient by a running measure of its own size,
// so every weight gets its own step size. Per parameter, at step t:
//
//   RMSprop:  g = grad + weight_decay * p
//             v = alpha * v + (1 - alpha) * g^2                          ("square_avg")
//             centered: a = alpha * a + (1 - alpha) * g ("grad_avg"), d = sqrt(v - a^2) + eps
//             otherwise: d = sqrt(v) + eps
//             momentum > 0: b = momentum * b + g / d ("momentum_buffer"), p = p - lr * b
//             otherwise:    p = p - lr * g / d
//
//   Adagrad:  g = grad + weight_decay * p
//             s = s + g^2                                                ("sum", from initial_accumulator_value)
//             p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)
#include "minigrad/optim/optimizer.h"

namespace mg::optim {

/// RMSprop's hyper-parameters (PyTorch's defaults).
struct RMSpropOptions {
  double lr = 1e-2;
  /// Smoothing of the squared gradients.
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  /// Divide by the gradient's estimated std, not its root mean square.
  bool centered = false;
};

class RMSprop : public Optimizer {
 public:
  /// Optimize `groups` (or use single_group(params)).
  RMSprop(std::vector<ParamGroup> groups, RMSpropOptions options = {});
  /// RMSprop over one group.
  RMSprop(const std::vector<Variable>& params, RMSpropOptions options = {});
  void step() override;
  std::string name() const override { return "RMSprop"; }
  std::vector<std::string> state_names() const override;
  std::map<std::string, double> hyper_parameters() const override {
    return {{"alpha", options.alpha},
            {"eps", options.eps},
            {"momentum", options.momentum},
            {"centered", options.centered ? 1.0 : 0.0}};
  }
  std::string cycled_momentum() const override { return options.momentum > 0 ? "momentum" : ""; }

  const RMSpropOptions options;
};

/// Adagrad's hyper-parameters (PyTorch's defaults).
struct AdagradOptions {
  double lr = 1e-2;
  /// The step size is lr / (1 + (t - 1) lr_decay)
  double lr_decay = 0;
  double weight_decay = 0;
  /// Where each sum of squares starts.
  double initial_accumulator_value = 0;
  double eps = 1e-10;
};

class Adagrad : public Optimizer {
 public:
  /// Optimize `groups` (or use single_group(params)).
  Adagrad(std::vector<ParamGroup> groups, AdagradOptions options = {});
  /// Adagrad over one group.
  Adagrad(const std::vector<Variable>& params, AdagradOptions options = {});
  void step() override;
  std::string name() const override { return "Adagrad"; }
  std::vector<std::string> state_names() const override { return {"step", "sum"}; }
  std::map<std::string, double> hyper_parameters() const override {
    return {{"lr_decay", options.lr_decay},
            {"initial_accumulator_value", options.initial_accumulator_value},
            {"eps", options.eps}};
  }

  const AdagradOptions options;
};

}  // namespace mg::optim
