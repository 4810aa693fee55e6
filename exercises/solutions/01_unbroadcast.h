#pragma once
// Exercise 1, the reference solution (docs/01-tensors.md, section "Broadcasting").
#include <numeric>
#include <vector>

#include "exercise.h"

namespace exercises {

/// Sum `grad` down to `shape`, the shape of an input that was broadcast to grad's shape.
inline mg::Tensor unbroadcast(const mg::Tensor& grad, const mg::Shape& shape) {
  mg::Tensor g = grad;
  // Broadcasting aligns shapes at the right, so grad's extra leading dims are ones the input
  // never had: each of its elements was reused along all of them. Sum them away.
  const int64_t extra = g.dim() - static_cast<int64_t>(shape.size());
  if (extra > 0) {
    std::vector<int64_t> leading(extra);
    std::iota(leading.begin(), leading.end(), 0);
    g = mg::sum(g, leading);
  }
  // A dim of size 1 in the input was stretched to grad's size there: sum it back to 1.
  std::vector<int64_t> stretched;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (shape[d] == 1 && g.size(d) != 1) stretched.push_back(d);
  if (!stretched.empty()) g = mg::sum(g, stretched, /*keepdim=*/true);
  return g;
}

}  // namespace exercises
