#pragma once
// Differentiable shape ops (autograd/ops/shape.cpp): views in the forward, the inverse
// rearrangement of the gradient in the backward.
#include <vector>

#include <optional>
#include <string>

#include "minigrad/autograd/variable.h"
#include "minigrad/tensor/ops/shape.h"

namespace mg {

/// Same elements, new shape (one dim may be -1); copies when the layout does not allow a view.
Variable reshape(const Variable& x, const Shape& shape);
/// Same elements, new shape, never a copy: a ShapeError when the layout does not allow it.
Variable view(const Variable& x, const Shape& shape);
/// Merge dims start_dim..end_dim into one (all by default).
Variable flatten(const Variable& x, int64_t start_dim = 0, int64_t end_dim = -1);
/// Swap two dims.
Variable transpose(const Variable& x, int64_t d0, int64_t d1);
/// Reorder dims.
Variable permute(const Variable& x, const std::vector<int64_t>& dims);
/// The diagonal of dims dim1 and dim2, a view (torch.diagonal; Tensor::diagonal has the layout):
/// x (..., n1, ..., n2, ...) -> (..., len) with y[..., i] = x[..., i, ..., i + offset, ...].
/// Derivative: dx = zeros like x with dy written onto that diagonal (diagonal_backward).
Variable diagonal(const Variable& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
/// diagonal's backward as an op (differentiable again, its derivative is diagonal): zeros of
/// shape `in` with dy written onto the diagonal (offset, dim1, dim2).
Variable diagonal_backward(const Variable& dy, const Shape& in, int64_t offset, int64_t dim1, int64_t dim2);
/// Python slicing x[..., start:end:step, ...] along `dim`.
Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// slice's backward as an op (differentiable again): zeros of shape `in` with dy written into the
/// slice [start:end:step] along dim
Variable slice_backward(const Variable& dy, const Shape& in, int64_t dim, int64_t start, int64_t end, int64_t step);
/// Elements start..start+length-1 along `dim`.
Variable narrow(const Variable& x, int64_t dim, int64_t start, int64_t length);
/// Broadcast to `shape`; the backward sums over the broadcast dims.
Variable expand(const Variable& x, const Shape& shape);
/// Remove size-1 dim `dim` (a dim of another size is left as it is, as in PyTorch).
Variable squeeze(const Variable& x, int64_t dim);
/// Remove every size-1 dim.
Variable squeeze(const Variable& x);
/// Insert a size-1 dim at `dim`.
Variable unsqueeze(const Variable& x, int64_t dim);
/// Join along `dim`.
Variable concat(const std::vector<Variable>& xs, int64_t dim);
/// Pieces of `size` along `dim` (the last may be smaller).
std::vector<Variable> split(const Variable& x, int64_t size, int64_t dim);
/// Pieces of the given sizes along `dim`.
std::vector<Variable> split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim);
/// `chunks` pieces of about equal size along `dim` (torch.chunk).
std::vector<Variable> chunk(const Variable& x, int64_t chunks, int64_t dim = 0);
/// Join along a new dim `dim`; all shapes equal.
Variable stack(const std::vector<Variable>& xs, int64_t dim = 0);
/// Split dim `dim` into `sizes` (one may be -1): the inverse of flatten.
Variable unflatten(const Variable& x, int64_t dim, const Shape& sizes);
/// x padded (torch.nn.functional.pad; tensor/ops/shape.h: pad has the modes and the order of
/// the sizes). Derivative: constant, the padding cropped off again (pad with the sizes negated);
/// the other modes read the input through index_select, whose derivative adds up every read.
Variable pad(const Variable& x, const std::vector<int64_t>& pad, PadMode mode = PadMode::Constant, double value = 0);
/// x tiled repeats[d] times along each dim (torch.Tensor.repeat; extra leading repeats add dims).
/// Derivative: dx = the sum of dy's tiles.
Variable repeat(const Variable& x, const std::vector<int64_t>& repeats);
/// x reversed along each of `dims` (torch.flip). Derivative: dx = flip(dy, dims).
Variable flip(const Variable& x, const std::vector<int64_t>& dims);
/// Each slice along `dim` repeated `repeats` times in a row (torch.repeat_interleave; no dim:
/// flattened first). Derivative: dx = dy's runs of `repeats` slices summed.
Variable repeat_interleave(const Variable& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);
/// Slice i along `dim` repeated repeats[i] times (int64 counts): index_select with the index
/// repeat_interleave_index makes, and its derivative.
Variable repeat_interleave(const Variable& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt);

}  // namespace mg
