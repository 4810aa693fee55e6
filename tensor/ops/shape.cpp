// Joining, splitting and triangular masks.
#include "minigrad/tensor/ops/shape.h"
#include "minigrad/tensor/loops.h"
#include "minigrad/tensor/ops/elementwise.h"

namespace mg {

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  MG_CHECK(!xs.empty(), ValueError, "concat: expected at least one tensor");
  for (size_t i = 0; i < xs.size(); ++i) MG_CHECK(xs[i].defined(), StateError, "concat: tensor {} is undefined", i);
  const Tensor& first = xs.front();
  MG_CHECK(first.dim() > 0, ShapeError,
           "concat: tensor 0 is 0-dim; a scalar has no dim to join along (unsqueeze it, or use stack)");
  dim = checked_dim(dim, first.dim(), "concat");
  Shape shape = first.shape();
  shape[dim] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    MG_CHECK(x.dtype() == first.dtype(), DTypeError, "concat: tensor {} is {} but tensor 0 is {}", i,
             dtype_name(x.dtype()), dtype_name(first.dtype()));
    bool ok = x.dim() == first.dim();
    for (int64_t d = 0; ok && d < x.dim(); ++d) ok = d == dim || x.shape()[d] == first.shape()[d];
    MG_CHECK(ok, ShapeError, "concat: tensor {} has shape {} but tensor 0 has {}; only dim {} may differ", i,
             shape_str(x.shape()), shape_str(first.shape()), dim);
    shape[dim] = checked_add(shape[dim], x.shape()[dim], "concat");
  }
  Tensor out = empty(shape, first.dtype());
  int64_t at = 0;
  for (const Tensor& x : xs) {
    out.narrow(dim, at, x.shape()[dim]).copy_(x);
    at += x.shape()[dim];
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  const OpScope scope("stack");  // concat's errors name stack
  MG_CHECK(!xs.empty(), ValueError, "stack: expected at least one tensor");
  for (size_t i = 0; i < xs.size(); ++i) MG_CHECK(xs[i].defined(), StateError, "stack: tensor {} is undefined", i);
  dim = wrap_dim(dim, xs.front().dim() + 1, "stack");
  std::vector<Tensor> u;
  for (size_t i = 0; i < xs.size(); ++i) {
    MG_CHECK(xs[i].shape() == xs.front().shape(), ShapeError, "stack: tensor {} has shape {} but tensor 0 has {}", i,
             shape_str(xs[i].shape()), shape_str(xs.front().shape()));
    u.push_back(xs[i].unsqueeze(dim));
  }
  return concat(u, dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  MG_CHECK(x.defined(), StateError, "split: the tensor is undefined");
  dim = checked_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    MG_CHECK(s >= 0, ValueError, "split: negative size {}", s);
    MG_CHECK(!__builtin_add_overflow(total, s, &total), ShapeError, "split: sizes add up to more than 64 bits hold");
  }
  MG_CHECK(total == x.shape()[dim], ShapeError, "split: sizes add up to {} but dim {} of shape {} has size {}", total,
           dim, shape_str(x.shape()), x.shape()[dim]);
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(dim, at, s));
    at += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) {
  MG_CHECK(size > 0, ValueError, "split: size must be positive, got {}", size);
  MG_CHECK(x.defined(), StateError, "split: the tensor is undefined");
  dim = checked_dim(dim, x.dim(), "split");
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < x.shape()[dim]; at += size) sizes.push_back(std::min(size, x.shape()[dim] - at));
  return split(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  MG_CHECK(chunks > 0, ValueError, "chunk: chunks must be positive, got {}", chunks);
  MG_CHECK(x.defined(), StateError, "chunk: the tensor is undefined");
  const int64_t n = x.size(checked_dim(dim, x.dim(), "chunk"));
  return split(x, std::max<int64_t>(1, n / chunks + (n % chunks != 0)), dim);
}

namespace {
Tensor triangle(const Tensor& x, int64_t diagonal, bool lower, std::string_view op) {
  MG_CHECK(x.dim() >= 2, ShapeError, "{}: expected at least 2 dims, got shape {}", op, shape_str(x.shape()));
  const int64_t r = x.size(-2), c = x.size(-1);
  Tensor keep = empty({r, c}, DType::Bool);
  bool* k = keep.data<bool>();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) k[i * c + j] = lower ? (j - i <= diagonal) : (j - i >= diagonal);
  return where(keep, x, zeros({}, x.dtype()));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true, "tril"); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false, "triu"); }

}  // namespace mg
