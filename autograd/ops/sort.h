#pragma once
// Differentiable sorting and selection (autograd/ops/sort.cpp; kernels in tensor/ops/sort.cpp).
#include <utility>

#include "minigrad/autograd/variable.h"

namespace mg {

/// The k largest (or smallest) values along dim (differentiable) and their int64 indices.
std::pair<Variable, Tensor> topk(const Variable& x, int64_t k, int64_t dim = -1, bool largest = true,
                                 bool sorted = true);
/// Values sorted along dim (differentiable) and the int64 indices they came from; stable.
std::pair<Variable, Tensor> sort(const Variable& x, int64_t dim = -1, bool descending = false);

}  // namespace mg
