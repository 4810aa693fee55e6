// Reductions. Their backward spreads the output gradient back over the reduced elements.
#include "autograd/ops/reduce.h"

#include "autograd/ops/shape.h"
#include "tensor/ops.h"

namespace mg {
namespace {
// The shape of a reduction's output with the reduced dims kept as 1 (dims empty: all).
Shape keepdim_shape(const Shape& in, const std::vector<int64_t>& dims, std::string_view op) {
  Shape s = in;
  if (dims.empty())
    for (auto& d : s) d = 1;
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, static_cast<int64_t>(in.size()), op);
    if (!in.empty()) s[w] = 1;  // a scalar's dim 0 (allowed, as in PyTorch) has no size to set
  }
  return s;
}
}  // namespace

// y = sum_{dims} x     x: (..., n, ...)  y: (..., [1], ...)
// dx = dy broadcast back over the summed dims
Variable sum(const Variable& x, const std::vector<int64_t>& dims, bool keepdim) {
  const Shape in = x.shape(), kept = keepdim_shape(in, dims, "sum");
  return record("sum", mg::sum(x.data(), dims, keepdim), {x}, [in, kept](const Tensor& dy, const Node&) -> TensorList {
    return {dy.reshape(kept).expand(in)};
  });
}

// y = sum_{dims} x / n             dx = dy / n broadcast back
Variable mean(const Variable& x, const std::vector<int64_t>& dims, bool keepdim) {
  const Shape in = x.shape(), kept = keepdim_shape(in, dims, "mean");
  const double n = static_cast<double>(numel_of(in)) / static_cast<double>(std::max<int64_t>(1, numel_of(kept)));
  return record("mean", mg::mean(x.data(), dims, keepdim), {x}, [in, kept, n](const Tensor& dy, const Node&) -> TensorList {
    return {(dy / n).reshape(kept).expand(in)};
  });
}

// y = max_{dim} x      dx = dy at the position of each maximum (the index returned), 0 elsewhere
std::pair<Variable, Tensor> max(const Variable& x, int64_t dim, bool keepdim) {
  auto [values, indices] = mg::max(x.data(), dim, keepdim);
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), "max");
  const Shape in = x.shape();
  Tensor idx_kept = x.dim() == 0 ? indices : indices.reshape(keepdim_shape(in, {d}, "max"));
  Variable y = record("max", values, {x}, [in, d, idx_kept](const Tensor& dy, const Node&) -> TensorList {
    if (in.empty()) return {dy};
    return {scatter_add(zeros(in, dy.dtype()), d, idx_kept, dy.reshape(idx_kept.shape()))};
  });
  return {y, indices};
}

Variable max(const Variable& x) {
  MG_CHECK(x.numel() > 0, ValueError, "max: expected a non-empty tensor, got shape {}", shape_str(x.shape()));
  return max(reshape(x, {-1}), 0, false).first;
}

}  // namespace mg
