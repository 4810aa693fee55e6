#include "minigrad/nn/linear.h"

#include <cmath>

#include "minigrad/nn/init.h"

namespace mg::nn {

Linear::Linear(int64_t in, int64_t out, LinearOptions o, Generator& gen) : in_features(in), out_features(out) {
  MG_CHECK(in > 0 && out > 0, ValueError, "Linear: sizes must be positive, got in={} out={}", in, out);
  checked_numel({out, in}, "Linear", 4);  // a weight too large to allocate is this layer's error
  register_parameter("weight", weight, empty({out, in}));
  if (o.bias) register_parameter("bias", bias, empty({out}));
  reset_parameters(gen);
}

void Linear::reset_parameters(Generator& gen) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), gen);  // = U(-1/sqrt(in), 1/sqrt(in))
  if (bias.defined()) {
    const double b = 1 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -b, b, gen);
  }
}

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features, out_features, bias.defined());
}

}  // namespace mg::nn
