#pragma once
// Reductions (tensor/ops/reduce.cpp). Sums are taken in a fixed order, so the bits do not depend
// on the thread count.
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg {

/// Sum over `dims` (all dims when empty); keepdim leaves them as size 1.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Mean over `dims` (all dims when empty).
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Largest value and its (first) index along `dim`.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
/// Index of the largest value along `dim` (int64).
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
/// Largest value of the whole tensor, as a 0-dim tensor.
Tensor max(const Tensor& x);
/// Smallest value and its (first) index along `dim`.
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
/// Index of the smallest value along `dim` (int64).
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
/// Smallest value of the whole tensor, as a 0-dim tensor.
Tensor min(const Tensor& x);
/// Index of the largest element of the flattened tensor, as a 0-dim int64 tensor (torch.argmax(x)).
Tensor argmax(const Tensor& x);
/// Index of the smallest element of the flattened tensor, as a 0-dim int64 tensor.
Tensor argmin(const Tensor& x);
/// Variance over `dims` (all when empty): sum((x - mean)^2) / (N - correction), correction 1 the
/// unbiased estimate (PyTorch's default), 0 the population variance.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
/// Standard deviation: sqrt(var(x, dims, correction, keepdim)). NOTE: after `using namespace mg`, an
/// unqualified std(x) is ambiguous with namespace std: write mg::std(x), or x.std().
Tensor std(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
/// Product along `dim`, or of all elements when dim is absent.
Tensor prod(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// prod's gradient: dx_i = dy * (the product of the other elements), exact with zeros present.
Tensor prod_backward(const Tensor& dy, const Tensor& x, std::optional<int64_t> dim = std::nullopt);
/// Running sum along `dim` (from the end when reverse: cumsum's gradient is the reverse cumsum of dy).
Tensor cumsum(const Tensor& x, int64_t dim, bool reverse = false);
/// log(sum(exp(x))) over `dims`, computed stably (the max is taken out first).
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
/// Sum `x` down to `shape`, undoing a broadcast from `shape` to x.shape(): the leading extra dims
/// and the dims where shape has 1 are summed (keepdim). Returns x itself when shapes match.
/// `op` names the caller in the error when `shape` does not broadcast to x.
Tensor sum_to_shape(const Tensor& x, const Shape& shape, std::string_view op = "sum_to_shape");

}  // namespace mg
