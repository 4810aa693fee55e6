#pragma once
// Differentiable reductions (autograd/ops/reduce.cpp).
#include <optional>
#include <utility>
#include <vector>

#include "minigrad/autograd/variable.h"

namespace mg {

/// Sum over dims (all when empty).
Variable sum(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Mean over dims (all when empty).
Variable mean(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Max along dim: values (differentiable) and int64 indices.
std::pair<Variable, Tensor> max(const Variable& x, int64_t dim, bool keepdim = false);
/// Max of all elements (gradient to the first maximal element).
Variable max(const Variable& x);
/// Min along dim: values (differentiable) and int64 indices.
std::pair<Variable, Tensor> min(const Variable& x, int64_t dim, bool keepdim = false);
/// Min of all elements (gradient to the first minimal element).
Variable min(const Variable& x);
/// Variance over dims (all when empty) with Bessel's `correction` (1: unbiased, PyTorch's default).
Variable var(const Variable& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
/// Standard deviation over dims: sqrt(var). NOTE: write mg::std(x) (or x.std()) after `using namespace mg`.
Variable std(const Variable& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
/// Product along dim (all elements when absent).
Variable prod(const Variable& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// Running sum along dim.
Variable cumsum(const Variable& x, int64_t dim);
/// cumsum's backward as an op (the reverse running sum of dy along dim), differentiable again
Variable cumsum_backward(const Variable& dy, int64_t dim);
/// log(sum(exp(x))) over dims, stably.
Variable logsumexp(const Variable& x, const std::vector<int64_t>& dims, bool keepdim = false);

}  // namespace mg
