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

// ---- the backward kernels as ops of their own (linear in dy; their rules are the forward ops,
// the adjoints), which makes gather, index_select and embedding differentiable twice ----
/// zeros of shape `in` with dy scatter-added at index along dim
Variable gather_backward(const Variable& dy, const Shape& in, int64_t dim, const Tensor& index);
/// zeros of shape `in` with slice i of dy added at index[i] along dim
Variable index_select_backward(const Variable& dy, const Shape& in, int64_t dim, const Tensor& index);
/// zeros (num_embeddings, D) with each row of dy added at ids[...]; row padding_idx stays 0
Variable embedding_backward(const Variable& dy, const Tensor& ids, int64_t num_embeddings,
                            std::optional<int64_t> padding_idx = std::nullopt);

/// The elements of x where mask (Bool, broadcast with x) is true, as a 1-D tensor in row-major
/// order (torch.masked_select). Derivative: dy scattered back to those places, zeros elsewhere.
Variable masked_select(const Variable& x, const Tensor& mask);

}  // namespace mg
