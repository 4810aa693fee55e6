// Sorting and selection. The values a sort or topk returns are x gathered at the indices it
// found, so their rule is gather's: each output's gradient goes back to the position it came from.
#include "minigrad/autograd/ops/sort.h"

#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/autograd/ops/index.h"
#include "minigrad/tensor/ops/sort.h"

namespace mg {

// y = x at the k positions topk chose along dim        dx = dy scattered back to those positions
std::pair<Variable, Tensor> topk(const Variable& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  const Tensor idx = mg::topk(x.data(), k, dim, largest, sorted).second;
  if (x.dim() == 0) return {k == 1 ? x * 1.0 : Variable(empty({0}, x.dtype())), idx};
  return {gather(x, dim, idx), idx};
}

// y = x in sorted order along dim                      dx = dy scattered back to where each came from
std::pair<Variable, Tensor> sort(const Variable& x, int64_t dim, bool descending) {
  const Tensor idx = mg::sort(x.data(), dim, descending).second;
  if (x.dim() == 0) return {x * 1.0, idx};
  return {gather(x, dim, idx), idx};
}

}  // namespace mg
