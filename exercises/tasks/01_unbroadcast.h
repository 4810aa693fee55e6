#pragma once
// Exercise 1 (chapter 1, tensors): undo broadcasting.
//
// When the forward broadcast an input of shape (2, 1) against one of shape (4, 2, 3), the output
// and its gradient are (4, 2, 3): each element of the small input was used 4 * 3 times, so its
// gradient is the sum of the 12 gradients it fed. The engine does this for every op in one place
// (docs/02-autograd.md, "The backward pass", step 4). Write that function.
#include "exercise.h"

namespace exercises {

/// Sum `grad` down to `shape`, the shape of an input that was broadcast to grad's shape: sum away
/// the leading dims grad has and `shape` lacks, then sum (keeping the dim) every dim where `shape`
/// has size 1 and grad does not. grad (4, 2, 3) -> shape (2, 1): a (2, 1) tensor; shape (): a 0-dim
/// tensor, the sum of everything. `shape` is always one grad can be broadcast from.
/// Useful: mg::sum(t, dims, keepdim) (dims: std::vector<int64_t>; NOTE: empty dims sums everything),
/// t.dim(), t.size(d), t.reshape(shape). Not mg::sum_to_shape: that is the answer the check compares with.
/// Hint: docs/01-tensors.md, section "Broadcasting" (which dims were broadcast).
inline mg::Tensor unbroadcast(const mg::Tensor& grad, const mg::Shape& shape) {
  throw NotDone("01_unbroadcast", "docs/01-tensors.md, section \"Broadcasting\"");
}

}  // namespace exercises
