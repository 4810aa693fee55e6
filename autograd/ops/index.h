#pragma once
// Differentiable indexing (autograd/ops/index.cpp): the forward picks, the backward scatters the
// gradient back to where the values came from, adding up repeats.
#include <optional>
#include <string>
#include <vector>

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

/// base with src[i][j] written at [index[i][j]][j] (dim 0; likewise for other dims; torch.scatter;
/// tensor/ops/index.h has the shapes). Derivative: dbase = dy with 0 where src was written,
/// dsrc = dy gathered at index (also for an overwritten repeat, as PyTorch).
Variable scatter(const Variable& base, int64_t dim, const Tensor& index, const Variable& src);
/// base with `value` written at index along dim. Derivative: dbase = dy with 0 where it was written.
Variable scatter(const Variable& base, int64_t dim, const Tensor& index, double value);
/// base with src added at index along dim (torch.scatter_add). Derivative: dbase = dy,
/// dsrc = dy gathered at index.
Variable scatter_add(const Variable& base, int64_t dim, const Tensor& index, const Variable& src);
/// base with src combined in by reduce ("sum", "prod", "mean", "amax", "amin"; torch.scatter_reduce).
/// Derivative: tensor/ops/index.cpp's scatter_reduce_backward (a tie in amax/amin shares dy equally);
/// first order only.
Variable scatter_reduce(const Variable& base, int64_t dim, const Tensor& index, const Variable& src,
                        const std::string& reduce, bool include_self = true);
/// x[indices...] with int64 or Bool index tensors (PyTorch's advanced indexing; tensor/ops/index.h
/// has the shape). Derivative: dx = zeros like x with dy added at the indices (repeats add up).
Variable index_get(const Variable& x, const std::vector<Tensor>& indices);
/// base with values written (or added, accumulate) at base[indices...] (torch.index_put).
/// Derivative: dbase = dy (accumulate) or dy with 0 where values were written; dvalues = dy[indices].
Variable index_put(const Variable& base, const std::vector<Tensor>& indices, const Variable& values,
                   bool accumulate = false);

/// The elements of x where mask (Bool, broadcast with x) is true, as a 1-D tensor in row-major
/// order (torch.masked_select). Derivative: dy scattered back to those places, zeros elsewhere.
Variable masked_select(const Variable& x, const Tensor& mask);

}  // namespace mg
