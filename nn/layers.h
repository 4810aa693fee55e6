#pragma once
// Small layers: LayerNorm, Dropout and the activation modules.
#include "nn/module.h"

namespace mg::nn {

/// Layer norm over the trailing dims `normalized_shape`; weight ones, bias zeros (PyTorch's init).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  /// x: (..., *normalized_shape) -> same shape.
  Variable forward(const Variable& x) const { return layer_norm(x, normalized_shape, weight, bias, eps); }
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

  const Shape normalized_shape;
  const double eps;
  Variable weight, bias;  // normalized_shape each; undefined without affine
};

/// Zeroes elements with probability p in training mode (scaling the rest by 1/(1-p)); identity in
/// eval mode. Masks come from `gen`, so a seeded run is reproducible.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator& gen = default_generator());
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
/// GELU, erf form ("none") or tanh approximation ("tanh").
struct GELU : Module {
  explicit GELU(std::string approximate = "none") : approximate(std::move(approximate)) {}
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
