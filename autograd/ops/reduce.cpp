// Reductions. Their backward spreads the output gradient back over the reduced elements.
#include "minigrad/autograd/ops/reduce.h"

#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/autograd/ops/index.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops.h"

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
  return record("sum", mg::sum(x.data(), dims, keepdim), {x}, keep(),
                [in, kept]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {dy.reshape(kept).expand(in)};
                });
}

// y = sum_{dims} x / n             dx = dy / n broadcast back
Variable mean(const Variable& x, const std::vector<int64_t>& dims, bool keepdim) {
  const Shape in = x.shape(), kept = keepdim_shape(in, dims, "mean");
  const double n = static_cast<double>(numel_of(in)) / static_cast<double>(std::max<int64_t>(1, numel_of(kept)));
  return record("mean", mg::mean(x.data(), dims, keepdim), {x}, keep(),
                [in, kept, n]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {(dy / n).reshape(kept).expand(in)};
                });
}

namespace {
// max and min along a dim: the values, and a node that sends each output's gradient to the
// position its value came from (the index returned), 0 elsewhere.
std::pair<Variable, Tensor> pick(const Variable& x, int64_t dim, bool keepdim, const char* op,
                                 std::pair<Tensor, Tensor> (*kernel)(const Tensor&, int64_t, bool)) {
  auto [values, indices] = kernel(x.data(), dim, keepdim);
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), op);
  const Shape in = x.shape();
  Tensor idx_kept = x.dim() == 0 ? indices : indices.reshape(keepdim_shape(in, {d}, op));
  Variable y = record(op, values, {x}, keep(),
                      [in, d, idx_kept]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                        if (in.empty()) return {dy};
                        return {gather_backward(dy.reshape(idx_kept.shape()), in, d, idx_kept)};
                      });
  return {y, indices};
}
}  // namespace

// y = max_{dim} x      dx = dy at the position of each maximum (the index returned), 0 elsewhere
std::pair<Variable, Tensor> max(const Variable& x, int64_t dim, bool keepdim) {
  return pick(x, dim, keepdim, "max", &mg::max);
}

// y = min_{dim} x      dx = dy at the position of each minimum, 0 elsewhere
std::pair<Variable, Tensor> min(const Variable& x, int64_t dim, bool keepdim) {
  return pick(x, dim, keepdim, "min", &mg::min);
}

Variable max(const Variable& x) {
  MG_CHECK(x.numel() > 0, ValueError, "max: expected a non-empty tensor, got shape {}", shape_str(x.shape()));
  return max(reshape(x, {-1}), 0, false).first;
}

Variable min(const Variable& x) {
  MG_CHECK(x.numel() > 0, ValueError, "min: expected a non-empty tensor, got shape {}", shape_str(x.shape()));
  return min(reshape(x, {-1}), 0, false).first;
}

// y = sum_{dims} (x - mean)^2 / (N - c)           dx = dy 2 (x - mean) / (N - c)
Variable var(const Variable& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  const OpScope scope("var");
  const Tensor y = mg::var(x.data(), dims, correction, keepdim);
  const Shape in = x.shape(), kept = keepdim_shape(in, dims, "var");
  const int64_t n = numel_of(in) / std::max<int64_t>(1, numel_of(kept));
  return record(
      "var", y, {x}, keep(0),
      [dims, kept, n, correction]<class V>(const V& dy, const Saved<V, 1>& x, const Node&) -> Grads<V> {
        const V centred = x[0] - mg::mean(x[0], dims, true);
        return {dy.reshape(kept) * centred * (2.0 / static_cast<double>(std::max<int64_t>(0, n - correction)))};
      });
}

// y = sqrt(var x)     dx = dy (x - mean) / ((N - c) y),  and 0 where y = 0
// A rule of its own, not sqrt(var(x)): at a constant row the chain rule multiplies var's 0 by
// sqrt's 1 / (2 * 0) = inf and gives NaN; PyTorch defines the gradient there as 0, and so do we.
Variable std(const Variable& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  const OpScope scope("std");
  const Tensor y = mg::std(x.data(), dims, correction, keepdim);
  const Shape in = x.shape(), kept = keepdim_shape(in, dims, "std");
  const int64_t n = numel_of(in) / std::max<int64_t>(1, numel_of(kept));
  return record("std", y, {x}, keep(0, kOutput),
                [dims, kept, n, correction]<class V>(const V& dy, const Saved<V, 2>& s, const Node&) -> Grads<V> {
                  const auto& [x, y] = s;
                  const V yk = y.reshape(kept), zero(zeros({}, y.dtype()));
                  const V g = mg::where(eq(tensor_of(yk), tensor_of(zero)), zero,
                                        dy.reshape(kept) / (yk * static_cast<double>(n - correction)));
                  return {g * (x - mg::mean(x, dims, true))};
                });
}

// y = prod_{dim} x     dx_i = dy * prod_{j != i} x_j       (a kernel: exact with zeros, no division)
Variable prod(const Variable& x, std::optional<int64_t> dim, bool keepdim) {
  const Shape in = x.shape();
  Shape kept = in;
  if (dim && !in.empty()) kept[wrap_dim(*dim, x.dim(), "prod")] = 1;
  return record("prod", mg::prod(x.data(), dim, keepdim), {x}, keep(0),
                [x = x.data(), dim, kept](const Tensor& dy, const Node&) -> TensorList {
                  return {prod_backward(dim ? dy.reshape(kept) : dy, x, dim)};
                });
}

namespace {
Tensor cumsum_backward(const Tensor& dy, int64_t dim) { return mg::cumsum(dy, dim, /*reverse=*/true); }
}  // namespace

// y_i = sum_{j <= i} x_j along dim       dx_i = sum_{j >= i} dy_j (the reverse running sum)
Variable cumsum(const Variable& x, int64_t dim) {
  return record(
      "cumsum", mg::cumsum(x.data(), dim), {x}, keep(),
      [dim]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> { return {cumsum_backward(dy, dim)}; });
}

// z_i = sum_{j >= i} dy_j (the reverse running sum)      d(dy)_j = sum_{i <= j} dz_i (the forward one, its adjoint)
Variable cumsum_backward(const Variable& dy, int64_t dim) {
  return record("cumsum_backward", cumsum_backward(dy.data(), dim), {dy}, keep(),
                [dim]<class V>(const V& dz, const Saved<V, 0>&, const Node&) -> Grads<V> { return {cumsum(dz, dim)}; });
}

// y = log sum_{dims} e^x        dx = dy e^(x - y) = dy softmax(x) over the dims
// NOTE: computed as e^(x - m) / sum e^(x - m), m the max, not as e^(x - y): y = m + log sum is
// rounded to m's ulp (1 at 1e7 in float32), which would be an error of e^1 in every weight.
Variable logsumexp(const Variable& x, const std::vector<int64_t>& dims, bool keepdim) {
  const Tensor y = mg::logsumexp(x.data(), dims, keepdim);
  const Shape kept = keepdim_shape(x.shape(), dims, "logsumexp");
  return record("logsumexp", y, {x}, keep(0),
                [dims, kept]<class V>(const V& dy, const Saved<V, 1>& s, const Node&) -> Grads<V> {
                  const V& x = s[0];
                  if (x.numel() == 0) return {V(zeros(x.shape(), x.dtype()))};
                  Tensor m = tensor_of(x);  // the shift is a constant: any value gives the same softmax
                  if (dims.empty() || x.dim() == 0)
                    m = mg::max(m).reshape(kept);
                  else
                    for (int64_t d : dims) m = mg::max(m, d, /*keepdim=*/true).first;
                  const V e = mg::exp(x - V(m));
                  return {dy.reshape(kept) * e / mg::sum(e, dims, true)};
                });
}

}  // namespace mg
