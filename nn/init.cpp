#include "minigrad/nn/init.h"

#include <cmath>

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

}  // namespace mg::nn::init
