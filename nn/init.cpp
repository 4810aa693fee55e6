#include "minigrad/nn/init.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "minigrad/tensor/ops.h"

namespace mg::nn::init {

void uniform_(const Variable& p, double low, double high, Generator& gen) {
  p.data().copy_(uniform(p.shape(), low, high, gen, p.dtype()));
}
void normal_(const Variable& p, double mean, double std, Generator& gen) {
  MG_CHECK(std >= 0 && std::isfinite(std) && std::isfinite(mean), ValueError,
           "normal_: mean must be finite and std finite and >= 0, got mean {} and std {}", mean, std);
  p.data().copy_(randn(p.shape(), gen, p.dtype()) * std + mean);
}
void zeros_(const Variable& p) { p.data().fill_(0); }
void ones_(const Variable& p) { p.data().fill_(1); }

std::pair<int64_t, int64_t> fans(const Shape& s) {
  MG_CHECK(s.size() >= 2, ShapeError, "init: fan in/out need a weight with at least 2 dims, got {}", shape_str(s));
  const int64_t receptive = numel_of(Shape(s.begin() + 2, s.end()));
  return {s[1] * receptive, s[0] * receptive};
}

void xavier_uniform_(const Variable& p, double gain, Generator& gen) {
  auto [fan_in, fan_out] = fans(p.shape());
  const double b = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  uniform_(p, -b, b, gen);
}

void kaiming_uniform_(const Variable& p, double a, Generator& gen) {
  const double b = std::sqrt(6.0 / ((1 + a * a) * static_cast<double>(fans(p.shape()).first)));
  uniform_(p, -b, b, gen);
}

void xavier_normal_(const Variable& p, double gain, Generator& gen) {
  auto [fan_in, fan_out] = fans(p.shape());
  normal_(p, 0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

double calculate_gain(const std::string& nl, std::optional<double> param) {
  if (nl == "linear" || nl == "sigmoid" || nl == "conv1d" || nl == "conv2d" || nl == "conv3d" || nl == "identity")
    return 1;
  if (nl == "tanh") return 5.0 / 3;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "selu") return 3.0 / 4;
  if (nl == "leaky_relu") {
    const double slope = param.value_or(0.01);
    MG_CHECK(std::isfinite(slope), ValueError, "calculate_gain: negative_slope must be finite, got {}", slope);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  throw ValueError(fmt::format(
      "calculate_gain: unknown nonlinearity \"{}\" (expected linear, sigmoid, tanh, relu, leaky_relu, selu or convNd)",
      nl));
}

void kaiming_normal_(const Variable& p, double a, const std::string& mode, const std::string& nonlinearity,
                     Generator& gen) {
  MG_CHECK(mode == "fan_in" || mode == "fan_out", ValueError,
           "kaiming_normal_: mode must be \"fan_in\" or \"fan_out\", got \"{}\"", mode);
  auto [fan_in, fan_out] = fans(p.shape());
  const int64_t fan = mode == "fan_in" ? fan_in : fan_out;
  MG_CHECK(fan > 0, ShapeError, "kaiming_normal_: a weight of shape {} has no {}", shape_str(p.shape()), mode);
  normal_(p, 0, calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan)), gen);
}

namespace {
// The inverse of erf on (-1, 1): Giles' single-precision approximation (2010), then two Newton
// steps on erf(x) - y, which bring it to double precision.
double erfinv(double y) {
  if (y <= -1) return -INFINITY;
  if (y >= 1) return INFINITY;
  double w = -std::log((1 - y) * (1 + y)), x;
  if (w < 5) {
    w -= 2.5;
    x = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                     0.246640727, 1.50140941})
      x = c + x * w;
  } else {
    w = std::sqrt(w) - 3;
    x = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                     1.00167406, 2.83297682})
      x = c + x * w;
  }
  x *= y;
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (2 / std::sqrt(std::numbers::pi) * std::exp(-x * x));
  return x;
}
double normal_cdf(double z) { return 0.5 * (1 + std::erf(z / std::sqrt(2.0))); }
}  // namespace

void trunc_normal_(const Variable& p, double mean, double std, double a, double b, Generator& gen) {
  MG_CHECK(std::isfinite(mean) && std::isfinite(std) && std > 0, ValueError,
           "trunc_normal_: mean must be finite and std finite and positive, got mean {} and std {}", mean, std);
  MG_CHECK(!std::isnan(a) && !std::isnan(b) && a < b, ValueError, "trunc_normal_: need a < b, got a {} and b {}", a, b);
  const double lo = normal_cdf((a - mean) / std), hi = normal_cdf((b - mean) / std);
  MG_CHECK(hi > lo, ValueError,
           "trunc_normal_: [{}, {}] is too far from the mean {} (std {}) for a double to tell its CDF values apart", a,
           b, mean, std);
  // u ~ U(2 lo - 1, 2 hi - 1), x = mean + std sqrt(2) erfinv(u), clamped to [a, b] against rounding
  const Tensor u = uniform(p.shape(), 2 * lo - 1, 2 * hi - 1, gen, DType::Float64).contiguous();
  std::vector<double> v = u.to_vector<double>();
  for (double& x : v) x = std::clamp(mean + std * std::sqrt(2.0) * erfinv(x), a, b);
  p.data().copy_(from_vector(v, p.shape()).to(p.dtype()));
}

}  // namespace mg::nn::init
