#pragma once
// nn::Linear: y = x W^T + b. The workhorse: every W_Q, W_K, W_V, W_O and MLP layer is one.
#include "minigrad/nn/module.h"

namespace mg::nn {

/// Linear's optional settings (PyTorch's defaults).
struct LinearOptions {
  /// Learn an additive bias.
  bool bias = true;
};

class Linear : public Callable<Linear> {
 public:
  /// weight (out_features, in_features) and bias (out_features), initialised like PyTorch:
  /// both U(-1/sqrt(in), 1/sqrt(in)) from `gen`. Linear(4, 8, {.bias = false}) has no bias.
  Linear(int64_t in_features, int64_t out_features, LinearOptions options = {}, Generator& gen = default_generator());
  /// x: (..., in_features) -> (..., out_features).
  Variable forward(const Variable& x) const { return linear(x, weight, bias); }
  /// Draw new initial values.
  void reset_parameters(Generator& gen = default_generator());

  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;

  const int64_t in_features, out_features;
  Variable weight;  // (out_features, in_features)
  Variable bias;    // (out_features), undefined when bias=false
};

}  // namespace mg::nn
