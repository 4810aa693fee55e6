#pragma once
// Joining, splitting and triangular masks (tensor/ops/shape.cpp). The views themselves (reshape,
// transpose, narrow, ...) are methods of Tensor (tensor/tensor.h).
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg {

/// Join tensors along an existing dim; all other dims must match.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
/// Join tensors along a new dim.
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
/// Views of consecutive pieces of `size` along `dim` (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim);
/// Views of consecutive pieces with the given sizes (which must add up to x.size(dim)).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
/// `chunks` views of about equal size along `dim`: each ceil(size / chunks), the last smaller, and
/// fewer pieces when they run out (torch.chunk).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
/// Lower triangle of the last two dims (elements with col - row <= diagonal), the rest zero.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
/// Upper triangle of the last two dims (col - row >= diagonal), the rest zero.
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace mg
