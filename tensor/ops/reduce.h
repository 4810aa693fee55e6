#pragma once
// Reductions (tensor/ops/reduce.cpp). Sums are taken in a fixed order, so the bits do not depend
// on the thread count.
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mg {

/// Sum over `dims` (all dims when empty); keepdim leaves them as size 1.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Mean over `dims` (all dims when empty).
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Largest value and its (first) index along `dim`.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
/// Index of the largest value along `dim` (int64).
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
/// Largest value of the whole tensor, as a 0-dim tensor.
Tensor max(const Tensor& x);
/// Sum `x` down to `shape`, undoing a broadcast from `shape` to x.shape(): the leading extra dims
/// and the dims where shape has 1 are summed (keepdim). Returns x itself when shapes match.
/// `op` names the caller in the error when `shape` does not broadcast to x.
Tensor sum_to_shape(const Tensor& x, const Shape& shape, std::string_view op = "sum_to_shape");

}  // namespace mg
