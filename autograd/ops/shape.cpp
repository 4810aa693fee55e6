// Shape ops: the forward is a view (or a copy for concat); the backward puts the gradient back
// into the input's layout.
#include "minigrad/autograd/ops/shape.h"

#include <algorithm>

#include "minigrad/autograd/ops/index.h"
#include "minigrad/autograd/ops/reduce.h"

#include "minigrad/tensor/ops.h"

namespace mg {

// y = x viewed as `shape`              dx = dy viewed as x's shape
Variable reshape(const Variable& x, const Shape& shape) {
  const Shape in = x.shape();
  return record("reshape", x.data().reshape(shape), {x}, keep(),
                [in]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> { return {dy.reshape(in)}; });
}

// y = x viewed as `shape` (no copy)    dx = dy viewed as x's shape
Variable view(const Variable& x, const Shape& shape) {
  const Shape in = x.shape();
  return record("view", x.data().view(shape), {x}, keep(),
                [in]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> { return {dy.reshape(in)}; });
}

// y = x with dims start..end merged into one (a reshape)      dx = dy reshaped back
Variable flatten(const Variable& x, int64_t start_dim, int64_t end_dim) {
  return reshape(x, x.data().flatten(start_dim, end_dim).shape());
}

// y = x with dims d0, d1 swapped        dx = dy with them swapped back
Variable transpose(const Variable& x, int64_t d0, int64_t d1) {
  return record(
      "transpose", x.data().transpose(d0, d1), {x}, keep(),
      [d0, d1]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> { return {dy.transpose(d0, d1)}; });
}

// y = x.permute(p)                     dx = dy.permute(p^-1)
Variable permute(const Variable& x, const std::vector<int64_t>& dims) {
  Tensor y = x.data().permute(dims);
  std::vector<int64_t> inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inv[wrap_dim(dims[i], x.dim(), "permute")] = static_cast<int64_t>(i);
  return record("permute", y, {x}, keep(),
                [inv]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> { return {dy.permute(inv)}; });
}

namespace {
// zeros of shape `in` with dy written into the slice [start:end:step] along dim
Tensor slice_backward(const Tensor& dy, const Shape& in, int64_t dim, int64_t start, int64_t end, int64_t step) {
  Tensor dx = zeros(in, dy.dtype());
  dx.slice(dim, start, end, step).copy_(dy);
  return dx;
}
}  // namespace

// y = x[start:end:step] along dim      dx = zeros like x, with dy written into that slice
Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const Shape in = x.shape();
  return record("slice", x.data().slice(dim, start, end, step), {x}, keep(),
                [in, dim, start, end, step]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {slice_backward(dy, in, dim, start, end, step)};
                });
}

// z = zeros of shape `in`, dy written into a slice       d(dy) = that slice of dz
Variable slice_backward(const Variable& dy, const Shape& in, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return record("slice_backward", slice_backward(dy.data(), in, dim, start, end, step), {dy}, keep(),
                [dim, start, end, step]<class V>(const V& dz, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {dz.slice(dim, start, end, step)};
                });
}

namespace {
// zeros of shape `in` with dy written onto the diagonal (offset, dim1, dim2)
Tensor diagonal_backward(const Tensor& dy, const Shape& in, int64_t offset, int64_t dim1, int64_t dim2) {
  Tensor dx = zeros(in, dy.dtype());
  dx.diagonal(offset, dim1, dim2).copy_(dy);
  return dx;
}
}  // namespace

// y[..., i] = x[..., i, ..., i + offset, ...]      dx = zeros like x, dy on that diagonal
Variable diagonal(const Variable& x, int64_t offset, int64_t dim1, int64_t dim2) {
  const Shape in = x.shape();
  return record("diagonal", x.data().diagonal(offset, dim1, dim2), {x}, keep(),
                [in, offset, dim1, dim2]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {diagonal_backward(dy, in, offset, dim1, dim2)};
                });
}

// z = zeros of shape `in`, dy on a diagonal       d(dy) = that diagonal of dz
Variable diagonal_backward(const Variable& dy, const Shape& in, int64_t offset, int64_t dim1, int64_t dim2) {
  return record("diagonal_backward", diagonal_backward(dy.data(), in, offset, dim1, dim2), {dy}, keep(),
                [offset, dim1, dim2]<class V>(const V& dz, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {dz.diagonal(offset, dim1, dim2)};
                });
}

// y = x[start : start + length] along dim (a slice)      dx = zeros with dy placed at those positions
Variable narrow(const Variable& x, int64_t dim, int64_t start, int64_t length) {
  MG_CHECK(length >= 0, ValueError, "narrow: length must be >= 0, got {}", length);
  x.data().narrow(dim, start, length);  // bounds check with narrow's error text
  return slice(x, dim, start, start + length, 1);
}

// y = x broadcast to `shape`           dx = dy summed over the broadcast dims (by the engine)
Variable expand(const Variable& x, const Shape& shape) {
  return record("expand", x.data().expand(shape), {x}, keep(),
                []<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> { return {dy}; });
}

// y = x without size-1 dims (a reshape)      dx = dy reshaped back
Variable squeeze(const Variable& x, int64_t dim) { return reshape(x, x.data().squeeze(dim).shape()); }
Variable squeeze(const Variable& x) { return reshape(x, x.data().squeeze().shape()); }
// y = x with a size-1 dim inserted at dim (a reshape)      dx = dy reshaped back
Variable unsqueeze(const Variable& x, int64_t dim) { return reshape(x, x.data().unsqueeze(dim).shape()); }

// y = [x0, x1, ...] joined along dim   dx_i = the matching slice of dy
Variable concat(const std::vector<Variable>& xs, int64_t dim) {
  std::vector<Tensor> data;
  std::vector<int64_t> sizes;
  for (const Variable& x : xs) data.push_back(x.data());
  Tensor y = mg::concat(data, dim);
  const int64_t d = wrap_dim(dim, y.dim(), "concat");
  for (const Tensor& t : data) sizes.push_back(t.shape()[d]);
  return record("concat", y, xs, keep(), [sizes, d]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
    return mg::split(dy, sizes, d);
  });
}

// Each piece is its own slice op, so each piece's gradient flows back independently.
std::vector<Variable> split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim) {
  mg::split(x.data(), sizes, dim);  // validate with split's error text
  std::vector<Variable> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(x, dim, at, at + s));
    at += s;
  }
  return out;
}

// y_i = piece i of x cut into `chunks` near-equal pieces along dim (split)      dx = the pieces' dy joined
std::vector<Variable> chunk(const Variable& x, int64_t chunks, int64_t dim) {
  std::vector<int64_t> sizes;
  for (const Tensor& t : mg::chunk(x.data(), chunks, dim)) sizes.push_back(t.size(wrap_dim(dim, x.dim(), "chunk")));
  return split(x, sizes, dim);
}

// y = the xs side by side along a new dim      dx_i = slice i of dy along it (through unsqueeze and concat)
Variable stack(const std::vector<Variable>& xs, int64_t dim) {
  const OpScope scope("stack");
  MG_CHECK(!xs.empty(), ValueError, "stack: expected at least one tensor");
  for (size_t i = 0; i < xs.size(); ++i) {
    MG_CHECK(xs[i].defined(), StateError, "stack: tensor {} is undefined", i);
    MG_CHECK(xs[i].shape() == xs.front().shape(), ShapeError, "stack: tensor {} has shape {} but tensor 0 has {}", i,
             shape_str(xs[i].shape()), shape_str(xs.front().shape()));
  }
  const int64_t d = wrap_dim(dim, xs.front().dim() + 1, "stack");
  std::vector<Variable> u;
  for (const Variable& x : xs) u.push_back(unsqueeze(x, d));
  return concat(u, d);
}

// y = x with dim split into `sizes` (a reshape)      dx = dy reshaped back
Variable unflatten(const Variable& x, int64_t dim, const Shape& sizes) {
  return reshape(x, x.data().unflatten(dim, sizes).shape());
}

std::vector<Variable> split(const Variable& x, int64_t size, int64_t dim) {
  std::vector<int64_t> sizes;
  for (const Tensor& t : mg::split(x.data(), size, dim)) sizes.push_back(t.shape()[wrap_dim(dim, x.dim(), "split")]);
  return split(x, sizes, dim);
}

// y = x tiled: dim d of the (padded) input repeated r_d times      x: (s_0, ...)  y: (r_0 s_0, ...)
// dx = dy viewed as (r_0, s_0, r_1, s_1, ...) and summed over the r axes (each tile's gradient adds up)
Variable repeat(const Variable& x, const std::vector<int64_t>& repeats) {
  Tensor y = mg::repeat(x.data(), repeats);
  const Shape in = x.shape();
  const int64_t n = static_cast<int64_t>(repeats.size());
  Shape tiles;  // (r_0, s_0, r_1, s_1, ...), s padded with leading 1s
  std::vector<int64_t> sum_dims;
  for (int64_t d = 0; d < n; ++d) {
    const int64_t s = d < n - x.dim() ? 1 : in[static_cast<size_t>(d - (n - x.dim()))];
    tiles.insert(tiles.end(), {repeats[d], s});
    sum_dims.push_back(2 * d);
  }
  return record("repeat", std::move(y), {x}, keep(),
                [in, tiles, sum_dims]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {dy.reshape(tiles).sum(sum_dims).reshape(in)};
                });
}

// y[..., i, ...] = x[..., n-1-i, ...]        dx = flip(dy): reversing is its own inverse
Variable flip(const Variable& x, const std::vector<int64_t>& dims) {
  return record("flip", mg::flip(x.data(), dims), {x}, keep(),
                [dims]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> { return {flip(dy, dims)}; });
}

// y = each slice along dim r times in a row   (..., n, ...) -> (..., n r, ...)
// dx = dy viewed as (..., n, r, ...) summed over the r axis
Variable repeat_interleave(const Variable& x, int64_t repeats, std::optional<int64_t> dim) {
  Tensor y = mg::repeat_interleave(x.data(), repeats, dim);
  const Shape in = x.shape();
  const int64_t d = dim ? wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), "repeat_interleave") : 0;
  const int64_t n = dim && x.dim() > 0 ? x.size(d) : x.numel();
  return record("repeat_interleave", std::move(y), {x}, keep(),
                [in, d, n, repeats]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {dy.unflatten(d, {n, repeats}).sum({d + 1}).reshape(in)};
                });
}

Variable repeat_interleave(const Variable& x, const Tensor& repeats, std::optional<int64_t> dim) {
  const OpScope scope("repeat_interleave");  // index_select's errors name this op
  const Variable src = dim ? (x.dim() == 0 ? x.reshape({1}) : x) : x.reshape({-1});
  const int64_t d = wrap_dim(dim.value_or(0), src.dim(), "repeat_interleave");
  return index_select(src, d, repeat_interleave_index(repeats, src.size(d)));
}

// constant: y = x with a border of `value` (or cropped)      dx = dy with the border cropped off:
// pad(dy, -pad), which also puts zeros back where a negative size cropped the input
// other modes: y = index_select along each padded dim (its derivative adds each read back)
Variable pad(const Variable& x, const std::vector<int64_t>& sizes, PadMode mode, double value) {
  const OpScope scope("pad");  // what index_select, full or the allocator raise names pad
  MG_CHECK(x.defined(), StateError, "pad: the input is undefined");
  pad_shape(x.shape(), sizes, mode);  // the checks, naming pad (before back negates INT64_MIN)
  if (mode != PadMode::Constant && sizes.empty())
    return pad(x, sizes, PadMode::Constant, 0.0);  // a copy, as Tensor pad's
  if (mode != PadMode::Constant) {
    Variable y = x;
    for (size_t k = 0; k < sizes.size(); k += 2) {
      const int64_t d = x.dim() - 1 - static_cast<int64_t>(k / 2);
      y = index_select(y, d, pad_index(x.size(d), sizes[k], sizes[k + 1], mode));
    }
    return y;
  }
  std::vector<int64_t> back(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) back[k] = -sizes[k];
  return record("pad", mg::pad(x.data(), sizes, mode, value), {x}, keep(),
                [back]<class V>(const V& dy, const Saved<V, 0>&, const Node&) -> Grads<V> {
                  return {pad(dy, back, PadMode::Constant, 0.0)};
                });
}

}  // namespace mg
