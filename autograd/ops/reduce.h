#pragma once
// Differentiable reductions (autograd/ops/reduce.cpp).
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace mg {

/// Sum over dims (all when empty).
Variable sum(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Mean over dims (all when empty).
Variable mean(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Max along dim: values (differentiable) and int64 indices.
std::pair<Variable, Tensor> max(const Variable& x, int64_t dim, bool keepdim = false);
/// Max of all elements (gradient to the first maximal element).
Variable max(const Variable& x);

}  // namespace mg
