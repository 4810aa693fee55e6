#include "nn/layers.h"

#include "nn/init.h"

namespace mg::nn {

LayerNorm::LayerNorm(Shape shape, LayerNormOptions o) : normalized_shape(std::move(shape)), eps(o.eps) {
  MG_CHECK(!normalized_shape.empty(), ValueError, "LayerNorm: normalized_shape must not be empty");
  if (o.elementwise_affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    bias = register_parameter("bias", zeros(normalized_shape));
  }
}

std::string LayerNorm::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine={}", shape_str(normalized_shape), eps, weight.defined());
}

Dropout::Dropout(DropoutOptions o, Generator& gen) : p(o.p), gen_(&gen) {
  MG_CHECK(p >= 0 && p <= 1, ValueError, "Dropout: probability must be in [0, 1], got {}", p);
}

}  // namespace mg::nn
