// Indexing ops. The forward picks values by index; the backward sends each output's gradient
// back to the element it was picked from, adding up where one element was picked many times.
#include "minigrad/autograd/ops/index.h"

#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/tensor/ops.h"

namespace mg {

// y = x gathered along dim by index        dx = zeros like x, with dy scatter-added at index
Variable gather(const Variable& x, int64_t dim, const Tensor& index) {
  const Shape in = x.shape();
  return record("gather", mg::gather(x.data(), dim, index), {x}, keep(),
                [in, dim, index]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {gather_backward(dy, in, dim, index)};
                });
}

// z = zeros of shape `in` with dy scatter-added at index       d(dy) = dz gathered at index (the adjoint)
Variable gather_backward(const Variable& dy, const Shape& in, int64_t dim, const Tensor& index) {
  return record("gather_backward", mg::gather_backward(dy.data(), in, dim, index), {dy}, keep(),
                [dim, index]<class V>(const V& dz, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {gather(dz, dim, index)};
                });
}

// y = slices index[i] of x along dim       dx = zeros like x, with slice i of dy added at index[i]
Variable index_select(const Variable& x, int64_t dim, const Tensor& index) {
  const Shape in = x.shape();
  return record("index_select", mg::index_select(x.data(), dim, index), {x}, keep(),
                [in, dim, index]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {index_select_backward(dy, in, dim, index)};
                });
}

// z = zeros of shape `in` with slice i of dy added at index[i]     d(dy) = dz's slices at index
Variable index_select_backward(const Variable& dy, const Shape& in, int64_t dim, const Tensor& index) {
  return record("index_select_backward", mg::index_select_backward(dy.data(), in, dim, index), {dy}, keep(),
                [dim, index]<class V>(const V& dz, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {index_select(dz, dim, index)};
                });
}

// y[..., :] = W[ids[...], :]       ids: (...) int64   W: (V, D)   y: (..., D)
// dW = zeros (V, D), with each dy row added into row ids[...] (repeated ids add up);
//      row padding_idx stays 0
Variable embedding(const Tensor& ids, const Variable& weight, std::optional<int64_t> padding_idx) {
  Tensor y = mg::embedding(ids, weight.data());
  const int64_t V = weight.size(0);
  padding_row(padding_idx, V, "embedding");  // checked now, not at the backward
  return record("embedding", y, {weight}, keep(),
                [ids, V, padding_idx]<class T>(const T& dy, const Saved<T, 0>&, const Node&) -> Grads<T> {
                  return {embedding_backward(dy, ids, V, padding_idx)};
                });
}

// z = embedding's dW       d(dy)[...] = dz[ids[...]], 0 where ids[...] is padding_idx (those rows were dropped)
Variable embedding_backward(const Variable& dy, const Tensor& ids, int64_t num_embeddings,
                            std::optional<int64_t> padding_idx) {
  const std::optional<int64_t> pad = padding_row(padding_idx, num_embeddings, "embedding_backward");
  return record("embedding_backward", mg::embedding_backward(dy.data(), ids, num_embeddings, padding_idx), {dy}, keep(),
                [ids, pad]<class V>(const V& dz, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  const V rows = embedding(ids, dz);
                  if (!pad) return {rows};
                  return {mg::masked_fill(
                      rows, eq(ids, scalar_tensor(static_cast<double>(*pad), DType::Int64)).unsqueeze(-1), 0.0)};
                });
}

// y = x (broadcast with mask, flattened) at the places mask is true
// dx = dy scattered back to those places (index_select's derivative), summed over broadcast dims
Variable masked_select(const Variable& x, const Tensor& mask) {
  const OpScope scope("masked_select");
  MG_CHECK(x.defined(), StateError, "masked_select: the tensor is undefined");
  MG_CHECK(mask.defined(), StateError, "masked_select: the mask is undefined");
  const Shape shape = broadcast_shapes(x.shape(), mask.shape(), "masked_select");
  return index_select(x.expand(shape).reshape({-1}), 0, masked_select_index(shape, mask));
}

}  // namespace mg
