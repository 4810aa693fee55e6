#pragma once
// Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay,
// with torch.optim.SGD's exact update:
//
//   g = grad + weight_decay * p
//   b = g                                   (first step)
//   b = momentum * b + (1 - dampening) * g  (later steps)
//   g = g + momentum * b  (nesterov)   or   g = b   (momentum != 0)
//   p = p - lr * g
#include "minigrad/optim/optimizer.h"

namespace mg::optim {

/// SGD hyper-parameters (PyTorch's defaults; lr has none there, 0.01 here).
struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  /// Optimize `groups` (or use single_group(params)).
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});
  /// SGD over one group.
  SGD(const std::vector<Variable>& params, SGDOptions options = {});
  void step() override;
  std::string name() const override { return "SGD"; }
  std::vector<std::string> state_names() const override {
    return options.momentum != 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
  }

  std::map<std::string, double> hyper_parameters() const override {
    return {
        {"momentum", options.momentum}, {"dampening", options.dampening}, {"nesterov", options.nesterov ? 1.0 : 0.0}};
  }
  std::string cycled_momentum() const override { return options.momentum != 0 ? "momentum" : ""; }

  const SGDOptions options;
};

}  // namespace mg::optim
