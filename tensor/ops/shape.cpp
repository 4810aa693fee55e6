// Joining, splitting and triangular masks.
#include "minigrad/tensor/ops/shape.h"

#include <algorithm>

#include "minigrad/tensor/loops.h"
#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/index.h"

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
Tensor triangle(const Tensor& x, int64_t diagonal, bool lower, const char* op) {
  const OpScope scope(op);  // the mask's allocation and where's errors name tril / triu
  MG_CHECK(x.defined(), StateError, "{}: the tensor is undefined", op);
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

// ---- tiling, flipping, interleaving ----

// x padded with leading 1s to n dims, then each dim d viewed as (1, size) and expanded to
// (repeats[d], size): merging the pairs gives the tiles. y[..., r*s + i, ...] = x[..., i, ...].
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  MG_CHECK(x.defined(), StateError, "repeat: the tensor is undefined");
  const int64_t n = static_cast<int64_t>(repeats.size());
  MG_CHECK(n >= x.dim(), ShapeError, "repeat: {} repeats for a tensor of {} dims (shape {}); give at least one per dim",
           n, x.dim(), shape_str(x.shape()));
  Shape padded(static_cast<size_t>(n - x.dim()), 1);
  padded.insert(padded.end(), x.shape().begin(), x.shape().end());
  Shape pairs, tiled, out;
  for (int64_t d = 0; d < n; ++d) {
    MG_CHECK(repeats[d] >= 0, ValueError, "repeat: repeats must be >= 0, got {} for dim {}", repeats[d], d);
    pairs.insert(pairs.end(), {1, padded[d]});
    tiled.insert(tiled.end(), {repeats[d], padded[d]});
    out.push_back(checked_mul(repeats[d], padded[d], "repeat"));
  }
  // The result's element count checked before any view of it is made (the expanded view has as
  // many elements): repeats {2^40, 2^40} is a ValueError here, not an overflow in expand.
  checked_numel(out, "repeat", static_cast<int64_t>(itemsize(x.dtype())));
  Tensor y = x.reshape(padded).reshape(pairs).expand(tiled).reshape(out);
  // a copy, always, as torch.repeat's: when only size-1 dims are repeated the reshape is still a view
  // of x (stride 0), and a write into the "copy" would reach x
  if (y.storage() == x.storage()) y = y.clone();
  return y;
}

// y[..., i, ...] = x[..., n - 1 - i, ...] along each of dims
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  const OpScope scope("flip");  // index_select's and the allocator's errors name flip
  MG_CHECK(x.defined(), StateError, "flip: the tensor is undefined");
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(x.dim(), 1)), false);
  Tensor y = x;
  for (int64_t d0 : dims) {
    const int64_t d = wrap_dim(d0, x.dim(), "flip");
    MG_CHECK(!seen[d], ValueError, "flip: dim {} appears twice in the dims", d);
    seen[d] = true;
    if (x.dim() == 0) continue;
    const int64_t size = x.size(d);
    y = index_select(y, d, arange(size - 1, int64_t{-1}, int64_t{-1}));  // a new tensor each time
  }
  return y.storage() == x.storage() ? x.clone() : y;  // no dim flipped: still a copy
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  const OpScope scope("repeat_interleave");
  MG_CHECK(x.defined(), StateError, "repeat_interleave: the tensor is undefined");
  MG_CHECK(repeats >= 0, ValueError, "repeat_interleave: repeats must be >= 0, got {}", repeats);
  const Tensor src = dim ? x : x.reshape({-1});
  const int64_t d = wrap_dim(dim.value_or(0), src.dim(), "repeat_interleave");
  if (src.dim() == 0) return repeat_interleave(src.reshape({1}), repeats, 0);
  Shape wide = src.shape();
  wide.insert(wide.begin() + d + 1, repeats);
  checked_numel(wide, "repeat_interleave", static_cast<int64_t>(itemsize(x.dtype())));  // before expand's own check
  return src.unsqueeze(d + 1).expand(wide).flatten(d, d + 1).contiguous();
}

Tensor repeat_interleave_index(const Tensor& repeats, int64_t size, std::string_view op) {
  MG_CHECK(repeats.defined(), StateError, "{}: repeats is undefined", op);
  MG_CHECK(repeats.dtype() == DType::Int64, DTypeError, "{}: repeats must be int64 counts, got {}", op,
           dtype_name(repeats.dtype()));
  MG_CHECK(repeats.dim() <= 1 && (repeats.numel() == size || repeats.numel() == 1), ShapeError,
           "{}: repeats must hold one count, or one per slice ({}), got shape {}", op, size,
           shape_str(repeats.shape()));
  const std::vector<int64_t> r = repeats.to_vector<int64_t>();
  auto count = [&](int64_t i) { return r.size() == 1 ? r[0] : r[static_cast<size_t>(i)]; };
  int64_t total = 0;    // summed and checked first: the index is then allocated once, as a tensor
  if (r.size() == 1) {  // one count for every slice: no loop over the slices to find the total
    MG_CHECK(r[0] >= 0, ValueError, "{}: repeats must be >= 0, got {}", op, r[0]);
    total = checked_mul(r[0], size, op);
  } else {
    for (int64_t i = 0; i < size; ++i) {
      MG_CHECK(count(i) >= 0, ValueError, "{}: repeats must be >= 0, got {} for slice {}", op, count(i), i);
      total = checked_add(total, count(i), op);
    }
  }
  // a MemoryError naming op, not a crash, when it cannot be held; nothing to fill when empty (a
  // count of 0 for 2^40 slices once looped over all of them)
  Tensor index = empty({checked_numel({total}, op, static_cast<int64_t>(sizeof(int64_t)))}, DType::Int64);
  if (total == 0) return index;
  int64_t* p = index.data<int64_t>();
  for (int64_t i = 0; i < size; ++i) p = std::fill_n(p, count(i), i);
  return index;
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  const OpScope scope("repeat_interleave");
  MG_CHECK(x.defined(), StateError, "repeat_interleave: the tensor is undefined");
  const Tensor src = dim ? (x.dim() == 0 ? x.reshape({1}) : x) : x.reshape({-1});
  const int64_t d = wrap_dim(dim.value_or(0), src.dim(), "repeat_interleave");
  return index_select(src, d, repeat_interleave_index(repeats, src.size(d)));
}

// ---- padding ----

// The checks every pad makes: an even number of sizes, at most two per dim, a known mode; for the
// modes that read the input, sizes >= 0 that the input's dims can serve.
const char* pad_mode_name(PadMode mode) {
  switch (mode) {
    case PadMode::Constant:
      return "constant";
    case PadMode::Reflect:
      return "reflect";
    case PadMode::Replicate:
      return "replicate";
    case PadMode::Circular:
      return "circular";
  }
  return "?";
}

Shape pad_shape(const Shape& in, const std::vector<int64_t>& pad, PadMode mode) {
  const int64_t nd = static_cast<int64_t>(in.size());
  for (int64_t s : in) MG_CHECK(s >= 0, ValueError, "pad: negative size in input shape {}", shape_str(in));
  MG_CHECK(pad.size() % 2 == 0 && static_cast<int64_t>(pad.size()) <= 2 * nd, ShapeError,
           "pad: expected (before, after) pairs for at most {} dims of input {}, got {} sizes", nd, shape_str(in),
           pad.size());
  Shape out = in;
  for (size_t k = 0; k < pad.size(); k += 2) {
    const int64_t d = nd - 1 - static_cast<int64_t>(k / 2), size = in[static_cast<size_t>(d)], lo = pad[k],
                  hi = pad[k + 1];
    out[static_cast<size_t>(d)] = checked_add(checked_add(size, lo, "pad"), hi, "pad");
    if (mode == PadMode::Constant) {
      MG_CHECK(out[static_cast<size_t>(d)] >= 0, ShapeError,
               "pad: padding ({}, {}) would leave dim {} of input {} with a negative size", lo, hi, d, shape_str(in));
      // a negative size crops; both ends together cannot crop more than the dim holds (compared
      // without negating, which overflows for INT64_MIN)
      MG_CHECK(lo >= -size && hi >= -size && std::min<int64_t>(lo, 0) + std::min<int64_t>(hi, 0) >= -size, ShapeError,
               "pad: cropping ({}, {}) removes more than the {} elements of dim {} of input {}", lo, hi, size, d,
               shape_str(in));
      continue;
    }
    MG_CHECK(lo >= 0 && hi >= 0, ValueError, "pad: {} padding must be >= 0, got ({}, {}) for dim {}",
             pad_mode_name(mode), lo, hi, d);
    if (mode == PadMode::Reflect)
      MG_CHECK(lo < size && hi < size, ValueError,
               "pad: reflect padding ({}, {}) must be smaller than dim {} of input {} (size {})", lo, hi, d,
               shape_str(in), size);
    if (mode == PadMode::Circular)
      MG_CHECK(lo <= size && hi <= size, ValueError,
               "pad: circular padding ({}, {}) must not wrap around dim {} of input {} (size {}) more than once", lo,
               hi, d, shape_str(in), size);
    if (mode == PadMode::Replicate)
      MG_CHECK(size > 0 || (lo == 0 && hi == 0), ValueError,
               "pad: replicate padding of dim {} of input {} needs an element to repeat", d, shape_str(in));
  }
  checked_numel(out, "pad");  // a ValueError naming pad if the result's size does not fit
  return out;
}

// Output position i (0 <= i < before + size + after) reads input position j = i - before, mapped
// back into [0, size): reflect j -> -j or 2 (size - 1) - j; replicate -> clamped; circular -> mod size.
Tensor pad_index(int64_t size, int64_t before, int64_t after, PadMode mode) {
  MG_CHECK(mode != PadMode::Constant, ValueError, "pad_index: the constant mode reads no index");
  const int64_t n = pad_shape({size}, {before, after}, mode)[0];  // pad's checks: mode, sizes, reflect's bounds
  Tensor out = empty({n}, DType::Int64);  // a MemoryError naming pad when too large, not std::bad_alloc
  int64_t* index = out.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t j = i - before;
    if (mode == PadMode::Reflect)
      j = j < 0 ? -j : j >= size ? 2 * (size - 1) - j : j;
    else if (mode == PadMode::Replicate)
      j = std::clamp<int64_t>(j, 0, size - 1);
    else
      j = ((j % size) + size) % size;
    index[i] = j;
  }
  return out;
}

// constant: a tensor of `value` with the (cropped) input copied into its middle; the other modes:
// one index_select per padded dim.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, PadMode mode, double value) {
  const OpScope scope("pad");  // full's "not an int64 value" and the allocator's errors name pad
  MG_CHECK(x.defined(), StateError, "pad: the tensor is undefined");
  pad_shape(x.shape(), pad, mode);
  if (mode != PadMode::Constant) {
    Tensor y = x;
    for (size_t k = 0; k < pad.size(); k += 2) {
      const int64_t d = x.dim() - 1 - static_cast<int64_t>(k / 2);
      y = index_select(y, d, pad_index(x.size(d), pad[k], pad[k + 1], mode));
    }
    return y.storage() == x.storage() ? x.clone() : y;
  }
  Shape out = x.shape();
  Tensor src = x;
  std::vector<std::pair<int64_t, int64_t>> at;  // (dim, where the input starts in the output)
  for (size_t k = 0; k < pad.size(); k += 2) {
    const int64_t d = x.dim() - 1 - static_cast<int64_t>(k / 2), lo = pad[k], hi = pad[k + 1];
    out[d] = x.size(d) + lo + hi;
    // negative sizes crop the input; positive ones leave room around it
    const int64_t from = std::max<int64_t>(0, -lo), to = x.size(d) - std::max<int64_t>(0, -hi);
    src = src.narrow(d, from, std::max<int64_t>(0, to - from));
    at.push_back({d, std::max<int64_t>(0, lo)});
  }
  Tensor y = full(out, value, x.dtype());
  Tensor window = y;
  for (auto [d, start] : at) window = window.narrow(d, start, src.size(d));
  if (src.numel() > 0) window.copy_(src);
  return y;
}

}  // namespace mg
