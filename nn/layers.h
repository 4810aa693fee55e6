#pragma once
// Small layers: Dropout, Identity, Flatten, Unflatten and the activation modules. (LayerNorm is in
// nn/normalization.h, with BatchNorm and GroupNorm.)
#include "minigrad/nn/module.h"

namespace mg::nn {

/// Dropout's settings (PyTorch's default).
struct DropoutOptions {
  /// Probability of zeroing an element.
  double p = 0.5;
};

/// Zeroes elements with probability p in training mode (scaling the rest by 1/(1-p)); identity in
/// eval mode. Masks come from `gen`, so a seeded run is reproducible: Dropout({.p = 0.1}).
class Dropout : public Callable<Dropout> {
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
struct ReLU : Callable<ReLU> {
  Variable forward(const Variable& x) const { return relu(x); }
  std::string type_name() const override { return "ReLU"; }
};
/// GELU's settings (PyTorch's default).
struct GELUOptions {
  /// The erf form (PyTorch's default) or GeluApproximate::Tanh.
  GeluApproximate approximate = GeluApproximate::None;
};
/// GELU, erf form or tanh approximation: GELU({.approximate = GeluApproximate::Tanh}).
struct GELU : Callable<GELU> {
  explicit GELU(GELUOptions options = {}) : approximate(options.approximate) {}
  Variable forward(const Variable& x) const { return gelu(x, approximate); }
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override { return std::string("approximate=") + gelu_approximate_name(approximate); }
  const GeluApproximate approximate;
};
/// tanh(x)
struct Tanh : Callable<Tanh> {
  Variable forward(const Variable& x) const { return tanh(x); }
  std::string type_name() const override { return "Tanh"; }
};
/// 1 / (1 + e^-x)
struct Sigmoid : Callable<Sigmoid> {
  Variable forward(const Variable& x) const { return sigmoid(x); }
  std::string type_name() const override { return "Sigmoid"; }
};

/// x * sigmoid(x) (also called swish)
struct SiLU : Callable<SiLU> {
  Variable forward(const Variable& x) const { return silu(x); }
  std::string type_name() const override { return "SiLU"; }
};
/// LeakyReLU's settings (PyTorch's default).
struct LeakyReLUOptions {
  double negative_slope = 0.01;
};
/// x for x > 0, negative_slope * x below.
struct LeakyReLU : Callable<LeakyReLU> {
  explicit LeakyReLU(LeakyReLUOptions options = {}) : negative_slope(options.negative_slope) {}
  Variable forward(const Variable& x) const { return leaky_relu(x, negative_slope); }
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override { return fmt::format("negative_slope={}", negative_slope); }
  const double negative_slope;
};
/// Softplus's settings (PyTorch's defaults).
struct SoftplusOptions {
  /// Sharpness.
  double beta = 1;
  /// Above beta x > threshold the output is x itself.
  double threshold = 20;
};
/// log(1 + e^(beta x)) / beta, a smooth ReLU.
struct Softplus : Callable<Softplus> {
  explicit Softplus(SoftplusOptions options = {}) : beta(options.beta), threshold(options.threshold) {}
  Variable forward(const Variable& x) const { return softplus(x, beta, threshold); }
  std::string type_name() const override { return "Softplus"; }
  std::string extra_repr() const override { return fmt::format("beta={}, threshold={}", beta, threshold); }
  const double beta, threshold;
};
/// ELU's settings (PyTorch's default).
struct ELUOptions {
  double alpha = 1;
};
/// x for x > 0, alpha (e^x - 1) below.
struct ELU : Callable<ELU> {
  explicit ELU(ELUOptions options = {}) : alpha(options.alpha) {}
  Variable forward(const Variable& x) const { return elu(x, alpha); }
  std::string type_name() const override { return "ELU"; }
  std::string extra_repr() const override { return fmt::format("alpha={}", alpha); }
  const double alpha;
};

/// Returns its input: a placeholder where a model may or may not have a layer.
struct Identity : Callable<Identity> {
  Variable forward(const Variable& x) const { return x; }
  std::string type_name() const override { return "Identity"; }
};

/// Flattens dims start_dim..end_dim into one: Flatten() turns (N, C, H, W) into (N, C H W).
struct Flatten : Callable<Flatten> {
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Variable forward(const Variable& x) const { return flatten(x, start_dim, end_dim); }
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override { return fmt::format("start_dim={}, end_dim={}", start_dim, end_dim); }
  const int64_t start_dim, end_dim;
};

/// Splits dim into `sizes` (one may be -1): Unflatten(1, {16, 4, 4}) turns (N, 256) into (N, 16, 4, 4).
struct Unflatten : Callable<Unflatten> {
  Unflatten(int64_t dim, Shape sizes);
  Variable forward(const Variable& x) const { return unflatten(x, dim, sizes); }
  std::string type_name() const override { return "Unflatten"; }
  std::string extra_repr() const override { return fmt::format("dim={}, unflattened_size={}", dim, shape_str(sizes)); }
  const int64_t dim;
  const Shape sizes;
};

}  // namespace mg::nn
