#pragma once
// Shapes, strides and the broadcasting rule.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mg {

/// Sizes of each dimension, outermost first: a (2, 3) matrix has Shape{2, 3}. A scalar has Shape{}.
using Shape = std::vector<int64_t>;
/// Elements to skip to move one step along each dimension (in elements, not bytes).
using Strides = std::vector<int64_t>;

/// Number of elements of a shape (1 for a scalar). For shapes already known to fit (every tensor's:
/// creation and views check theirs with checked_numel).
int64_t numel_of(const Shape& shape);
/// numel_of for a shape about to be allocated with elements of `itemsize` bytes: a ValueError naming
/// `op` if a size is negative or the element count times itemsize does not fit in 63 bits.
int64_t checked_numel(const Shape& shape, std::string_view op, int64_t itemsize = 1);
/// Row-major strides of a contiguous tensor of this shape: (2, 3, 4) -> (12, 4, 1).
Strides contiguous_strides(const Shape& shape);
/// "(2, 3)" -- how shapes are written in every error message.
std::string shape_str(const Shape& shape);
/// Turn a possibly negative dim into 0..ndim-1; an IndexError naming `op` when out of range. As in
/// PyTorch, a 0-dim tensor accepts dim 0 or -1 (ops that reduce or normalise treat it as one element).
int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op);
/// wrap_dim for ops that index the shape with the dim (narrow, split, gather, ...): a 0-dim tensor
/// has no dim to index, so any dim is an IndexError naming `op`.
int64_t checked_dim(int64_t dim, int64_t ndim, std::string_view op);
/// a * b, or a ValueError naming `op` when it does not fit in int64 (sizes, offsets, byte counts).
int64_t checked_mul(int64_t a, int64_t b, std::string_view op);
/// a + b, or a ValueError naming `op` when it does not fit in int64.
int64_t checked_add(int64_t a, int64_t b, std::string_view op);
/// NumPy broadcasting: align trailing dims; each pair must be equal or one of them 1.
/// broadcast_shapes((4, 1, 3), (2, 1)) == (4, 2, 3). A ShapeError naming `op` otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);
/// Strides that read a tensor of `shape`/`strides` as if it had shape `target` (the result of
/// broadcasting): broadcast dims get stride 0, missing leading dims are added with stride 0.
Strides broadcast_strides(const Shape& shape, const Strides& strides, const Shape& target);

}  // namespace mg
