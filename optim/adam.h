#pragma once
// Adam and AdamW with torch.optim's exact update rules. Per parameter, at step t:
//
//   Adam:   g = grad + weight_decay * p            (L2 penalty folded into the gradient)
//   AdamW:  p = p * (1 - lr * weight_decay)        (decoupled weight decay), g = grad
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
#include <optional>

#include "minigrad/optim/optimizer.h"

namespace mg::optim {

/// Adam's and AdamW's hyper-parameters (PyTorch's defaults). Left unset, weight_decay is the
/// optimizer's own default: 0 for Adam, 0.01 for AdamW; the optimizer's `options` hold it set.
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  std::optional<double> weight_decay;
};

/// Adam (Kingma & Ba 2015); weight decay is an L2 term added to the gradient.
class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});
  Adam(const std::vector<Variable>& params, AdamOptions options = {});
  void step() override;
  std::string name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq", "step"}; }
  std::map<std::string, double> hyper_parameters() const override {
    return {{"beta1", options.beta1}, {"beta2", options.beta2}, {"eps", options.eps}};
  }
  std::string cycled_momentum() const override { return "beta1"; }

  const AdamOptions options;

 protected:
  Adam(std::vector<ParamGroup> groups, AdamOptions options, bool decoupled);

 private:
  bool decoupled_;
};

/// AdamW's hyper-parameters are Adam's (weight decay 0.01 when unset): AdamW opt(params, {.lr = 3e-4}).
using AdamWOptions = AdamOptions;

/// AdamW (Loshchilov & Hutter 2019): weight decay shrinks the weights directly.
class AdamW : public Adam {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamWOptions o = {}) : Adam(std::move(groups), o, true) {}
  AdamW(const std::vector<Variable>& params, AdamWOptions options = {});
};

}  // namespace mg::optim
