// Indexing ops. The forward picks values by index; the backward sends each output's gradient
// back to the element it was picked from, adding up where one element was picked many times.
#include "minigrad/autograd/ops/index.h"

#include "minigrad/tensor/ops.h"

namespace mg {

// y = x gathered along dim by index        dx = zeros like x, with dy scatter-added at index
Variable gather(const Variable& x, int64_t dim, const Tensor& index) {
  const Shape in = x.shape();
  return record("gather", mg::gather(x.data(), dim, index), {x},
                [in, dim, index](const Tensor& dy, const Node&) -> TensorList {
                  return {scatter_add(zeros(in, dy.dtype()), dim, index, dy)};
                });
}

// y = slices index[i] of x along dim       dx = zeros like x, with slice i of dy added at index[i]
Variable index_select(const Variable& x, int64_t dim, const Tensor& index) {
  const Shape in = x.shape();
  return record("index_select", mg::index_select(x.data(), dim, index), {x},
                [in, dim, index](const Tensor& dy, const Node&) -> TensorList {
                  return {index_add(zeros(in, dy.dtype()), dim, index, dy)};
                });
}

// y[..., :] = W[ids[...], :]       ids: (...) int64   W: (V, D)   y: (..., D)
// dW = zeros (V, D), with each dy row added into row ids[...] (repeated ids add up);
//      row padding_idx stays 0
Variable embedding(const Tensor& ids, const Variable& weight, std::optional<int64_t> padding_idx) {
  Tensor y = mg::embedding(ids, weight.data());
  const int64_t V = weight.size(0);
  padding_row(padding_idx, V, "embedding");  // checked now, not at the backward
  return record("embedding", y, {weight}, [ids, V, padding_idx](const Tensor& dy, const Node&) -> TensorList {
    return {embedding_backward(dy, ids, V, padding_idx)};
  });
}

}  // namespace mg
