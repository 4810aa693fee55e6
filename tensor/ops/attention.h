#pragma once
// Fused scaled dot-product attention (tensor/ops/attention.cpp):
//   out = softmax(Q K^T / sqrt(d) [+ causal mask]) V
// in one pass per (batch, head), keeping only the per-row log-sum-exp for the backward, which
// recomputes the weights: O(T) extra memory instead of the (T, T) weights.
#include <array>
#include <utility>

#include "minigrad/tensor/tensor.h"

namespace mg {

/// What the attention forward kernels return.
struct AttentionForward {
  Tensor out;  // (B, H, Tq, d), stored as (B, Tq, H, d) so merging the heads is a free view
  Tensor lse;  // (B, H, Tq): log sum_j exp(score_ij) per query row
};
/// q (B, H, Tq, d), k and v (B, H, Tk, d). Causal: query i sees keys j <= i. If any of q, k, v is
/// bfloat16 (the others float32 are rounded to it), the products read bfloat16 q, k, v and weights
/// P, and the softmax, out and lse are float32.
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal);
/// The gradients of q, k and v (their shapes) from the output gradient dout (B, H, Tq, d) and the
/// forward's out (P is recomputed from the scores, not from lse, which is too coarse for large
/// scores). With bfloat16 q, k, v (as the forward's) the products read bfloat16 (dout, P and dS rounded).
std::array<Tensor, 3> attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                         const AttentionForward& fwd, bool is_causal);

/// Self-attention with q, k, v read in place from one (B, T, 3E) projection [Q | K | V] (the three
/// products of one GEMM over the stacked weights); head h of Q is columns [h d, (h+1) d).
/// With a bfloat16 qkv the products read bfloat16, as attention_forward's.
AttentionForward attention_qkv_forward(const Tensor& qkv, int64_t num_heads, bool is_causal);
/// Its gradient: one (B, T, 3E) float tensor with dQ, dK, dV written into their column blocks.
Tensor attention_qkv_backward(const Tensor& dout, const Tensor& qkv, int64_t num_heads, const AttentionForward& fwd,
                              bool is_causal);

}  // namespace mg
