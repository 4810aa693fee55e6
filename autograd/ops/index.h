#pragma once
// Differentiable indexing (autograd/ops/index.cpp): the forward picks, the backward scatters the
// gradient back to where the values came from, adding up repeats.
#include <optional>

#include "minigrad/autograd/variable.h"

namespace mg {

/// x gathered along dim by int64 index (same ndim).
Variable gather(const Variable& x, int64_t dim, const Tensor& index);
/// Slices of x along dim picked by a 1-D int64 index.
Variable index_select(const Variable& x, int64_t dim, const Tensor& index);
/// Rows of weight (V, D) picked by int64 ids of any shape: (...) -> (..., D). The row padding_idx
/// (if given; negative counts from the end) receives no gradient, as in torch.nn.functional.embedding.
Variable embedding(const Tensor& ids, const Variable& weight, std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace mg
