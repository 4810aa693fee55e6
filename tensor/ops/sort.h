#pragma once
// Sorting and selection (tensor/ops/sort.cpp): along one dim, with int64 indices of where each
// value came from. NaN counts as larger than every number, as in PyTorch.
#include <utility>

#include "minigrad/tensor/tensor.h"

namespace mg {

/// The k largest (or smallest) values along `dim` and their int64 indices, sorted (largest first,
/// or smallest first). Equal values come in their original order.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
/// Values sorted along `dim` (ascending, or descending) and the indices they came from. Stable:
/// equal values keep their order.
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// The indices of sort(x, dim, descending).
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);

}  // namespace mg
