#pragma once
// The functions neural nets are built from (autograd/ops/nn_functional.cpp): softmax, layer norm,
// dropout.
#include "autograd/variable.h"

namespace mg {

/// Softmax along dim.
Variable softmax(const Variable& x, int64_t dim);
/// Log-softmax along dim.
Variable log_softmax(const Variable& x, int64_t dim);
/// Layer norm over the trailing dims `normalized_shape`, with optional affine weight and bias.
Variable layer_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight = Variable(),
                    const Variable& bias = Variable(), double eps = 1e-5);
/// In training: zero each element with probability p and scale the rest by 1/(1-p); the mask
/// comes from `gen`. Identity when !training or p == 0.
Variable dropout(const Variable& x, double p, bool training, Generator& gen = default_generator());

}  // namespace mg
