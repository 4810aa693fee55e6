#pragma once
// Fused scaled dot-product attention (tensor/ops/attention.cpp):
//   out = softmax(Q K^T / sqrt(d) [+ causal mask]) V
// in one pass per (batch, head), keeping only the per-row log-sum-exp for the backward, which
// recomputes the weights: O(T) extra memory instead of the (T, T) weights.
#include <array>
#include <optional>
#include <utility>

#include "minigrad/tensor/tensor.h"

namespace mg {

/// What the attention forward kernels return.
struct AttentionForward {
  Tensor out;  // (B, H, Tq, d), stored as (B, Tq, H, d) so merging the heads is a free view
  Tensor lse;  // (B, H, Tq): log sum_j exp(score_ij) per query row
};
/// q (B, H, Tq, d), k and v (B, Hkv, Tk, d), Hkv dividing H (grouped-query attention: query head h
/// reads key and value head h / (H / Hkv)). Causal: query i sees keys j <= i. scale multiplies the
/// scores (absent: 1 / sqrt(d)). If any of q, k, v is bfloat16 (the others float32 are rounded to
/// it), the products read bfloat16 q, k, v and weights P, and the softmax, out and lse are float32.
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal,
                                   std::optional<double> scale = std::nullopt);
/// The gradients of q, k and v (their shapes) from the output gradient dout (B, H, Tq, d) and the
/// forward's out (P is recomputed from the scores, not from lse, which is too coarse for large
/// scores). With bfloat16 q, k, v (as the forward's) the products read bfloat16 (dout, P and dS rounded).
/// With grouped heads, dk and dv sum the gradients of every query head that read them.
std::array<Tensor, 3> attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                         const AttentionForward& fwd, bool is_causal,
                                         std::optional<double> scale = std::nullopt);

/// Self-attention with q, k, v read in place from one (B, T, 3E) projection [Q | K | V] (the three
/// products of one GEMM over the stacked weights); head h of Q is columns [h d, (h+1) d).
/// With a bfloat16 qkv the products read bfloat16, as attention_forward's.
AttentionForward attention_qkv_forward(const Tensor& qkv, int64_t num_heads, bool is_causal);
/// Its gradient: one (B, T, 3E) float tensor with dQ, dK, dV written into their column blocks.
Tensor attention_qkv_backward(const Tensor& dout, const Tensor& qkv, int64_t num_heads, const AttentionForward& fwd,
                              bool is_causal);

// ---- rotary position embedding (RoPE) ----
// RoFormer (Su et al., 2021), used by LLaMA: instead of adding a position vector to the input, each
// pair of features (a, b) of a query or key at position t is rotated by the angle t * theta_i,
//     (a, b) -> (a cos - b sin,  a sin + b cos),      theta_i = base^(-2i/d),  i = 0 .. d/2 - 1,
// so q_s . k_t depends on the positions only through s - t. Two layouts of the pairs are in use:
// interleaved, pair i = features (2i, 2i+1) (the RoFormer paper, Meta's LLaMA code, torchtune), and
// half-split, pair i = features (i, i + d/2) (GPT-NeoX, Hugging Face's LLaMA). They are the same
// rotation with the features permuted; a checkpoint must be read in the layout it was trained in.

/// cos and sin of t * base^(-2i/d) for t = 0 .. max_len-1 and i = 0 .. head_dim/2-1, each
/// (max_len, head_dim/2), computed in double and rounded to `dtype`. head_dim must be even.
std::pair<Tensor, Tensor> rotary_tables(int64_t head_dim, int64_t max_len, double base = 10000.0,
                                        DType dtype = default_dtype());
/// x (..., T, d) rotated pair by pair: cos and sin broadcastable to (..., T, d/2) (the rows of
/// rotary_tables for the positions of x's T tokens), x's dtype. interleaved picks the pairs
/// (2i, 2i+1), otherwise (i, i + d/2). Returns a new tensor of x's shape. A bfloat16 x takes
/// bfloat16 or float32 tables; it is rotated in float32 on the widened values and rounded once.
Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved = false);
/// Its derivative, the rotation back (by -t theta_i): dx = rotary_embedding(dy, cos, -sin).
Tensor rotary_embedding_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin, bool interleaved = false);

}  // namespace mg
