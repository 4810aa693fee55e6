// Indexing ops. The forward picks values by index; the backward sends each output's gradient
// back to the element it was picked from, adding up where one element was picked many times.
#include "minigrad/autograd/ops/index.h"

#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops.h"

namespace mg {

// y = x gathered along dim by index        dx = zeros like x, with dy scatter-added at index
Variable gather(const Variable& x, int64_t dim, const Tensor& index) {
  const Shape in = x.shape();
  return record("gather", mg::gather(x.data(), dim, index), {x}, keep(),
                [in, dim, index]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {gather_backward(dy, in, dim, index)};
                },
                {index});
}

// z = zeros of shape `in` with dy scatter-added at index       d(dy) = dz gathered at index (the adjoint)
Variable gather_backward(const Variable& dy, const Shape& in, int64_t dim, const Tensor& index) {
  return record("gather_backward", mg::gather_backward(dy.data(), in, dim, index), {dy}, keep(),
                [dim, index]<class V>(const V& dz, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {gather(dz, dim, index)};
                },
                {index});
}

// y = slices index[i] of x along dim       dx = zeros like x, with slice i of dy added at index[i]
Variable index_select(const Variable& x, int64_t dim, const Tensor& index) {
  const Shape in = x.shape();
  return record("index_select", mg::index_select(x.data(), dim, index), {x}, keep(),
                [in, dim, index]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {index_select_backward(dy, in, dim, index)};
                },
                {index});
}

// z = zeros of shape `in` with slice i of dy added at index[i]     d(dy) = dz's slices at index
Variable index_select_backward(const Variable& dy, const Shape& in, int64_t dim, const Tensor& index) {
  return record("index_select_backward", mg::index_select_backward(dy.data(), in, dim, index), {dy}, keep(),
                [dim, index]<class V>(const V& dz, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {index_select(dz, dim, index)};
                },
                {index});
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
                },
                {ids});
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
                },
                {ids});
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

namespace {
// g (index's shape) grown with zeros to src's shape: src may be larger than index, and its
// elements past index's extent were not read
template <class V>
V grow_to(const V& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  std::vector<int64_t> p;
  for (int64_t d = g.dim() - 1; d >= 0; --d) p.push_back(0), p.push_back(shape[d] - g.size(d));
  return pad(g, p);
}
}  // namespace

// y = base with src[e] written at index[e] along dim
// dbase = dy, 0 where something was written         dsrc = dy gathered at index
Variable scatter(const Variable& base, int64_t dim, const Tensor& index, const Variable& src) {
  const Shape src_shape = src.shape();
  return record("scatter", mg::scatter(base.data(), dim, index, src.data()), {base, src}, keep(),
                [dim, index, src_shape]<class V>(const V& dy, const Saved<V, 0>&, const Node& n) -> Grads<V> {
                  Grads<V> g(2);
                  if (n.needs(0)) g[0] = scatter(dy, dim, index, 0.0);
                  if (n.needs(1)) g[1] = grow_to(gather(dy, dim, index), src_shape);
                  return g;
                },
                {index});
}

// y = base with `value` written at index along dim       dbase = dy, 0 where it was written
Variable scatter(const Variable& base, int64_t dim, const Tensor& index, double value) {
  return record("scatter", mg::scatter(base.data(), dim, index, value), {base}, keep(),
                [dim, index]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {scatter(dy, dim, index, 0.0)};
                },
                {index});
}

// y = base with src[e] added at index[e] along dim       dbase = dy      dsrc = dy gathered at index
Variable scatter_add(const Variable& base, int64_t dim, const Tensor& index, const Variable& src) {
  const Shape src_shape = src.shape();
  return record("scatter_add", mg::scatter_add(base.data(), dim, index, src.data()), {base, src}, keep(),
                [dim, index, src_shape]<class V>(const V& dy, const Saved<V, 0>&, const Node& n) -> Grads<V> {
                  Grads<V> g(2);
                  if (n.needs(0)) g[0] = dy;
                  if (n.needs(1)) g[1] = grow_to(gather(dy, dim, index), src_shape);
                  return g;
                },
                {index});
}

// y = base with src combined in by `reduce`; dbase and dsrc by scatter_reduce_backward (its rules
// are in tensor/ops/index.cpp). First-order: the derivative of prod, amax and amin is not linear in
// the inputs' values, and is not recorded.
Variable scatter_reduce(const Variable& base, int64_t dim, const Tensor& index, const Variable& src,
                        const std::string& reduce, bool include_self) {
  Tensor y = mg::scatter_reduce(base.data(), dim, index, src.data(), reduce, include_self);
  return record("scatter_reduce", y, {base, src}, keep(0, 1, kOutput),
                [b = base.data(), s = src.data(), y, dim, index, reduce, include_self](const Tensor& dy,
                                                                                       const Node&) -> TensorList {
                  ScatterReduceGrads g = scatter_reduce_backward(dy, b, dim, index, s, y, reduce, include_self);
                  return {g.dbase, g.dsrc};
                },
                {index});
}

// y = x[indices...] (advanced indexing)       dx = zeros like x with dy added at indices (repeats add up)
Variable index_get(const Variable& x, const std::vector<Tensor>& indices) {
  const Shape in = x.shape();
  return record(
      "index", mg::index_get(x.data(), indices), {x}, keep(),
      [in, indices]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
        // (in dy's dtype: a bfloat16 x's gradient is float32)
        return {index_put(V(zeros(in, dy.dtype())), indices, dy, true)};
      },
      indices);
}

// y = base with values written (or added, accumulate) at indices
// dbase = dy (accumulate), or dy with 0 where values were written       dvalues = dy[indices]
Variable index_put(const Variable& base, const std::vector<Tensor>& indices, const Variable& values, bool accumulate) {
  return record(
      "index_put", mg::index_put(base.data(), indices, values.data(), accumulate), {base, values}, keep(),
      [indices, accumulate]<class V>(const V& dy, const Saved<V, 0>&, const Node& n) -> Grads<V> {
        Grads<V> g(2);
        if (n.needs(0)) g[0] = accumulate ? dy : index_put(dy, indices, V(zeros({}, dy.dtype())), false);
        if (n.needs(1)) g[1] = index_get(dy, indices);  // summed to values' shape by the engine
        return g;
      },
      indices);
}

}  // namespace mg
