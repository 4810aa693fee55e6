#pragma once
// Differentiable ops on Variables. Each forwards to a tensor/ kernel and records a backward.
// The implementations live in autograd/ops/<family>.cpp, forward and backward side by side.
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "tensor/ops.h"

namespace mg {

// ---- elementwise (autograd/ops/elementwise.cpp) ------------------------------------------------
/// a + b, broadcast.
Variable add(const Variable& a, const Variable& b);
/// a - b, broadcast.
Variable sub(const Variable& a, const Variable& b);
/// a * b, broadcast.
Variable mul(const Variable& a, const Variable& b);
/// a / b, broadcast.
Variable div(const Variable& a, const Variable& b);
/// -x
Variable neg(const Variable& x);
/// x^exponent for a constant exponent.
Variable pow(const Variable& x, double exponent);
/// e^x
Variable exp(const Variable& x);
/// natural log
Variable log(const Variable& x);
/// square root
Variable sqrt(const Variable& x);
/// |x| (gradient 0 at 0, like PyTorch)
Variable abs(const Variable& x);
/// tanh(x)
Variable tanh(const Variable& x);
/// 1 / (1 + e^-x)
Variable sigmoid(const Variable& x);
/// max(x, 0) (gradient 0 at 0)
Variable relu(const Variable& x);
/// GELU; approximate = "none" (erf form, PyTorch's default) or "tanh".
Variable gelu(const Variable& x, const std::string& approximate = "none");
/// x with `value` where mask (Bool, broadcastable to x) is true; no gradient flows there.
Variable masked_fill(const Variable& x, const Tensor& mask, double value);
/// cond ? a : b, broadcast.
Variable where(const Tensor& cond, const Variable& a, const Variable& b);

Variable operator+(const Variable& a, const Variable& b);
Variable operator-(const Variable& a, const Variable& b);
Variable operator*(const Variable& a, const Variable& b);
Variable operator/(const Variable& a, const Variable& b);
Variable operator-(const Variable& x);
/// With a constant: the constant takes the variable's dtype.
Variable operator+(const Variable& a, double b);
Variable operator-(const Variable& a, double b);
Variable operator*(const Variable& a, double b);
Variable operator/(const Variable& a, double b);
Variable operator+(double a, const Variable& b);
Variable operator-(double a, const Variable& b);
Variable operator*(double a, const Variable& b);
Variable operator/(double a, const Variable& b);

// ---- reductions (autograd/ops/reduce.cpp) ------------------------------------------------------
/// Sum over dims (all when empty).
Variable sum(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Mean over dims (all when empty).
Variable mean(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Max along dim: values (differentiable) and int64 indices.
std::pair<Variable, Tensor> max(const Variable& x, int64_t dim, bool keepdim = false);
/// Max of all elements (gradient to the first maximal element).
Variable max(const Variable& x);

// ---- matmul (autograd/ops/matmul.cpp) ----------------------------------------------------------
/// torch.matmul: 2-D, batched with broadcast batch dims, and 1-D vectors.
Variable matmul(const Variable& a, const Variable& b);
/// x W^T + b: x (..., in), weight (out, in), bias (out) or undefined -> (..., out).
Variable linear(const Variable& x, const Variable& weight, const Variable& bias = Variable());

// ---- shape (autograd/ops/shape.cpp) ------------------------------------------------------------
/// Same elements, new shape (one dim may be -1).
Variable reshape(const Variable& x, const Shape& shape);
/// Swap two dims.
Variable transpose(const Variable& x, int64_t d0, int64_t d1);
/// Reorder dims.
Variable permute(const Variable& x, const std::vector<int64_t>& dims);
/// Python slicing x[..., start:end:step, ...] along `dim`.
Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// Elements start..start+length-1 along `dim`.
Variable narrow(const Variable& x, int64_t dim, int64_t start, int64_t length);
/// Broadcast to `shape`; the backward sums over the broadcast dims.
Variable expand(const Variable& x, const Shape& shape);
/// Remove size-1 dim `dim`.
Variable squeeze(const Variable& x, int64_t dim);
/// Insert a size-1 dim at `dim`.
Variable unsqueeze(const Variable& x, int64_t dim);
/// Join along `dim`.
Variable concat(const std::vector<Variable>& xs, int64_t dim);
/// Pieces of `size` along `dim` (the last may be smaller).
std::vector<Variable> split(const Variable& x, int64_t size, int64_t dim);
/// Pieces of the given sizes along `dim`.
std::vector<Variable> split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim);

// ---- neural-net functions (autograd/ops/nn_functional.cpp) -------------------------------------
/// Softmax along dim.
Variable softmax(const Variable& x, int64_t dim);
/// Log-softmax along dim.
Variable log_softmax(const Variable& x, int64_t dim);
/// Reduction of a loss: "mean", "sum" or "none".
enum class Reduction { Mean, Sum, None };
/// Cross-entropy of logits (N, C) (or (C) with a 0-dim target) against int64 class targets (N),
/// fused with log_softmax. Targets equal to ignore_index add nothing and are not counted in the
/// mean.
Variable cross_entropy(const Variable& logits, const Tensor& targets, Reduction reduction = Reduction::Mean,
                       int64_t ignore_index = -100);
/// Mean (or sum, or elementwise) squared error; input and target must have the same shape.
Variable mse_loss(const Variable& input, const Variable& target, Reduction reduction = Reduction::Mean);
/// Layer norm over the trailing dims `normalized_shape`, with optional affine weight and bias.
Variable layer_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight = Variable(),
                    const Variable& bias = Variable(), double eps = 1e-5);
/// Rows of weight (V, D) picked by int64 ids of any shape: (...) -> (..., D).
Variable embedding(const Tensor& ids, const Variable& weight);
/// In training: zero each element with probability p and scale the rest by 1/(1-p); the mask
/// comes from `gen`. Identity when !training or p == 0.
Variable dropout(const Variable& x, double p, bool training, Generator& gen = default_generator());
/// softmax(q k^T / sqrt(d), optionally causal) @ v in one fused pass per (batch, head), keeping
/// O(T) for the backward instead of the (T, T) weights (autograd/ops/attention.cpp).
/// q (B, H, Tq, d), k and v (B, H, Tk, d) -> (B, H, Tq, d). Causal: query i sees keys j <= i.
Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v, bool is_causal = false);
/// The same fused attention with q, k, v read from one (B, T, 3E) projection [Q | K | V]
/// (self-attention with the three products in one GEMM) -> (B, H, T, E/H).
Variable self_attention_qkv(const Variable& qkv, int64_t num_heads, bool is_causal = false);
/// x gathered along dim by int64 index (same ndim).
Variable gather(const Variable& x, int64_t dim, const Tensor& index);
/// Slices of x along dim picked by a 1-D int64 index.
Variable index_select(const Variable& x, int64_t dim, const Tensor& index);

}  // namespace mg
