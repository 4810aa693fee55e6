#pragma once
// Kernels on plain tensors: numbers in, numbers out, no gradients.
//
// Binary ops broadcast NumPy-style and need both operands of the same dtype (a DTypeError names
// both otherwise; minigrad does not promote silently). Results are new contiguous tensors.
// Grouped by file: tensor/ops/elementwise.cpp, reduce.cpp, matmul.cpp, nn.cpp, index.cpp,
// shape.cpp.
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mg {

// ---- elementwise (tensor/ops/elementwise.cpp) --------------------------------------------------
/// -x
Tensor neg(const Tensor& x);
/// e^x
Tensor exp(const Tensor& x);
/// natural log; log(0) = -inf, log(negative) = nan, as in IEEE arithmetic
Tensor log(const Tensor& x);
/// square root
Tensor sqrt(const Tensor& x);
/// |x|
Tensor abs(const Tensor& x);
/// -1, 0 or 1
Tensor sign(const Tensor& x);
/// tanh(x)
Tensor tanh(const Tensor& x);
/// 1 / (1 + e^-x)
Tensor sigmoid(const Tensor& x);
/// max(x, 0)
Tensor relu(const Tensor& x);
/// x * Phi(x), Phi the standard normal CDF (GELU, erf form)
Tensor gelu(const Tensor& x);
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GELU, tanh approximation)
Tensor gelu_tanh(const Tensor& x);
/// x^exponent
Tensor pow(const Tensor& x, double exponent);

/// a + b (broadcast)
Tensor add(const Tensor& a, const Tensor& b);
/// a - b (broadcast)
Tensor sub(const Tensor& a, const Tensor& b);
/// a * b (broadcast)
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b (broadcast)
Tensor div(const Tensor& a, const Tensor& b);
/// elementwise max(a, b)
Tensor maximum(const Tensor& a, const Tensor& b);
/// a == b as a Bool tensor (broadcast); likewise ne, lt, le, gt, ge
Tensor eq(const Tensor& a, const Tensor& b);
/// a != b
Tensor ne(const Tensor& a, const Tensor& b);
/// a < b
Tensor lt(const Tensor& a, const Tensor& b);
/// a <= b
Tensor le(const Tensor& a, const Tensor& b);
/// a > b
Tensor gt(const Tensor& a, const Tensor& b);
/// a >= b
Tensor ge(const Tensor& a, const Tensor& b);
/// !mask for a Bool tensor
Tensor logical_not(const Tensor& mask);
/// cond ? a : b elementwise; cond is Bool; all three broadcast together
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` wherever mask (Bool, broadcastable to x) is true
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

/// Tensor operators; a double operand becomes a 0-dim tensor of the other operand's dtype.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator*(double a, const Tensor& b);
/// In place: a += b (b broadcast to a's shape; used to accumulate gradients).
Tensor& add_(Tensor& a, const Tensor& b);

// ---- reductions (tensor/ops/reduce.cpp) --------------------------------------------------------
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
/// Sum `x` down to `shape`, undoing a broadcast from `shape` to x.shape(): the leading extra dims
/// and the dims where shape has 1 are summed (keepdim). Returns x itself when shapes match.
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

// ---- matmul (tensor/ops/matmul.cpp) ------------------------------------------------------------
/// Matrix product with torch.matmul's rules: (..., n, k) @ (..., k, m) -> (..., n, m), batch dims
/// broadcast; a 1-D operand is a row (left) or column (right) vector whose dim is dropped.
/// Transposed views are passed to BLAS as flags, not copied.
Tensor matmul(const Tensor& a, const Tensor& b);
/// x W^T + b in one GEMM: x (..., in), weight (out, in), bias (out) or undefined -> (..., out).
/// The bias is written first and the product added onto it (BLAS beta = 1): no second pass.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// ---- neural-net kernels (tensor/ops/nn.cpp) ----------------------------------------------------
/// exp(x) / sum(exp(x)) along `dim`, computed stably (the row max is subtracted first).
Tensor softmax(const Tensor& x, int64_t dim);
/// x - logsumexp(x) along `dim`.
Tensor log_softmax(const Tensor& x, int64_t dim);
/// Layer norm over the last `normalized_ndim` dims: y = (x - mean) * rstd * weight + bias, with
/// rstd = 1/sqrt(var + eps) (biased variance). weight/bias may be undefined (no affine). When
/// given, mean_out/rstd_out receive the per-row statistics, shape x.shape()[:-normalized_ndim].
Tensor layer_norm(const Tensor& x, int64_t normalized_ndim, const Tensor& weight, const Tensor& bias,
                  double eps, Tensor* mean_out = nullptr, Tensor* rstd_out = nullptr);

// ---- indexing (tensor/ops/index.cpp) -----------------------------------------------------------
/// Rows of `x` along `dim` picked by int64 `index` (1-D): out.size(dim) == index.numel().
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// out[i][j] = x[index[i][j]][j] for dim 0 (and likewise for other dims); index has x's ndim.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// A copy of `base` with src[i][j] added at [index[i][j]][j] (dim 0; likewise for other dims).
Tensor scatter_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
/// A copy of `base` with slice i of `src` along `dim` added to slice index[i] (index 1-D).
Tensor index_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
/// One-hot rows: (...,) int64 ids -> (..., num_classes).
Tensor one_hot(const Tensor& ids, int64_t num_classes, DType dtype = DType::Float32);

// ---- joining and splitting (tensor/ops/shape.cpp) ----------------------------------------------
/// Join tensors along an existing dim; all other dims must match.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
/// Join tensors along a new dim.
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
/// Views of consecutive pieces of `size` along `dim` (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim);
/// Views of consecutive pieces with the given sizes (which must add up to x.size(dim)).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
/// Lower triangle of the last two dims (elements with col - row <= diagonal), the rest zero.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
/// Upper triangle of the last two dims (col - row >= diagonal), the rest zero.
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace mg
