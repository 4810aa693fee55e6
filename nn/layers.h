#pragma once
// Small layers: LayerNorm, Dropout and the activation modules.
#include "nn/module.h"

namespace mg::nn {

/// LayerNorm's optional settings (PyTorch's defaults).
struct LayerNormOptions {
  double eps = 1e-5;               // added to the variance
  bool elementwise_affine = true;  // learn a weight and a bias
};

/// Layer norm over the trailing dims `normalized_shape`; weight ones, bias zeros (PyTorch's init).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});
  /// x: (..., *normalized_shape) -> same shape.
  Variable forward(const Variable& x) const { return layer_norm(x, normalized_shape, weight, bias, eps); }
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

  const Shape normalized_shape;
  const double eps;
  Variable weight, bias;  // normalized_shape each; undefined without affine
};

/// Dropout's settings (PyTorch's default).
struct DropoutOptions {
  double p = 0.5;  // probability of zeroing an element
};

/// Zeroes elements with probability p in training mode (scaling the rest by 1/(1-p)); identity in
/// eval mode. Masks come from `gen`, so a seeded run is reproducible: Dropout({.p = 0.1}).
class Dropout : public Module {
 public:
  explicit Dropout(DropoutOptions options = {}, Generator& gen = default_generator());
  Variable forward(const Variable& x) const { return dropout(x, p, is_training(), *gen_); }
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override { return fmt::format("p={}", p); }

  const double p;

 private:
  Generator* gen_;
};

/// max(x, 0)
struct ReLU : Module {
  Variable forward(const Variable& x) const { return relu(x); }
  std::string type_name() const override { return "ReLU"; }
};
/// GELU's settings (PyTorch's default).
struct GELUOptions {
  std::string approximate = "none";  // "none": the erf form; "tanh": the tanh approximation
};
/// GELU, erf form ("none") or tanh approximation ("tanh"): GELU({.approximate = "tanh"}).
struct GELU : Module {
  explicit GELU(GELUOptions options = {}) : approximate(std::move(options.approximate)) {}
  Variable forward(const Variable& x) const { return gelu(x, approximate); }
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override { return "approximate=" + approximate; }
  const std::string approximate;
};
/// tanh(x)
struct Tanh : Module {
  Variable forward(const Variable& x) const { return tanh(x); }
  std::string type_name() const override { return "Tanh"; }
};
/// 1 / (1 + e^-x)
struct Sigmoid : Module {
  Variable forward(const Variable& x) const { return sigmoid(x); }
  std::string type_name() const override { return "Sigmoid"; }
};

}  // namespace mg::nn
