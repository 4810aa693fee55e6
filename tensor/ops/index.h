#pragma once
// Picking and scattering by integer index (tensor/ops/index.cpp). Every index is range-checked
// before anything is read or written.
#include <optional>
#include <string_view>
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg {

/// Rows of `x` along `dim` picked by int64 `index` (1-D): out.size(dim) == index.numel().
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// out[i][j] = x[index[i][j]][j] for dim 0 (and likewise for other dims); index has x's ndim.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// A copy of `base` with src[i][j] added at [index[i][j]][j] (dim 0; likewise for other dims).
Tensor scatter_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
/// A copy of `base` with slice i of `src` along `dim` added to slice index[i] (index 1-D).
Tensor index_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
/// A copy of `base` with src[i][j] written at [index[i][j]][j] (dim 0; likewise for other dims;
/// torch.scatter). index: int64, base's ndim, no larger than src (nor than base outside dim). Where
/// two indices name one element, the later one (row-major order of index) wins, on every run.
Tensor scatter(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
/// scatter with one value written at every index (torch.scatter(base, dim, index, value)).
Tensor scatter(const Tensor& base, int64_t dim, const Tensor& index, double value);
/// A copy of `base` with each src element combined into [index][j] by `reduce`: "sum", "prod",
/// "mean", "amax" or "amin" (torch.scatter_reduce). include_self false: an element that receives
/// any src values starts from them alone, not from base's value. Integer means floor, as PyTorch.
Tensor scatter_reduce(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                      bool include_self = true);
/// scatter_reduce's derivatives for base and src, given dy and its result (autograd/ops/index.cpp).
struct ScatterReduceGrads {
  Tensor dbase, dsrc;
};
/// dbase and dsrc of y = scatter_reduce(base, dim, index, src, reduce, include_self) for dy (the
/// rules are in tensor/ops/index.cpp; float dtypes).
ScatterReduceGrads scatter_reduce_backward(const Tensor& dy, const Tensor& base, int64_t dim, const Tensor& index,
                                           const Tensor& src, const Tensor& result, std::string_view reduce,
                                           bool include_self);
/// x[indices[0], indices[1], ...] with index tensors (PyTorch's advanced indexing, aten::index):
/// int64 tensors (negative counts from the end) broadcast together to a shape S and pick along the
/// first dims; a Bool mask picks its true positions over as many dims as it has. Shape: S followed
/// by x's dims that were not indexed.
Tensor index_get(const Tensor& x, const std::vector<Tensor>& indices);
/// A copy of `base` with values (broadcast to index_get's shape) written at base[indices...]
/// (torch.index_put): added to what is there with accumulate (repeats add up, in a fixed order),
/// else written (of repeated positions the last wins).
Tensor index_put(const Tensor& base, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
/// gather's gradient: zeros of shape `in` with dy scatter-added at index along dim
Tensor gather_backward(const Tensor& dy, const Shape& in, int64_t dim, const Tensor& index);
/// index_select's gradient: zeros of shape `in` with slice i of dy added to slice index[i]
Tensor index_select_backward(const Tensor& dy, const Shape& in, int64_t dim, const Tensor& index);
/// One-hot rows: (...,) int64 ids -> (..., num_classes).
Tensor one_hot(const Tensor& ids, int64_t num_classes, DType dtype = DType::Float32);

/// padding_idx (negative counts from the end) as a row of a table of num_embeddings rows; an
/// IndexError naming `op` outside [-num_embeddings, num_embeddings). None stays none.
std::optional<int64_t> padding_row(std::optional<int64_t> padding_idx, int64_t num_embeddings, std::string_view op);
/// Rows of `weight` (V, D) picked by int64 ids of any shape: (...) -> (..., D).
Tensor embedding(const Tensor& ids, const Tensor& weight);
/// The gradient of embedding: a (num_embeddings, D) tensor of zeros with each row of dy (..., D)
/// added into row ids[...] (repeated ids add up); row padding_idx (negative: from the end), if
/// given, stays zero.
Tensor embedding_backward(const Tensor& dy, const Tensor& ids, int64_t num_embeddings,
                          std::optional<int64_t> padding_idx = std::nullopt);

/// The elements of x where mask (Bool, broadcast with x) is true, as a 1-D tensor in row-major
/// order (torch.masked_select).
Tensor masked_select(const Tensor& x, const Tensor& mask);
/// The flat indices of x's (broadcast) shape where mask is true: what masked_select picks.
Tensor masked_select_index(const Shape& shape, const Tensor& mask, std::string_view op = "masked_select");

}  // namespace mg
