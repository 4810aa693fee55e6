#pragma once
// Fused scaled dot-product attention as differentiable ops (autograd/ops/attention.cpp; the
// kernels are tensor/ops/attention.cpp). nn::MultiheadAttention uses them when nothing needs the
// (T, T) weights; its composed path computes the same numbers op by op.
#include "minigrad/autograd/variable.h"

namespace mg {

/// softmax(q k^T / sqrt(d), optionally causal) @ v, keeping O(T) for the backward instead of the
/// (T, T) weights. q (B, H, Tq, d), k and v (B, H, Tk, d) -> (B, H, Tq, d). Causal: query i sees
/// keys j <= i.
Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v, bool is_causal = false);
/// The same fused attention with q, k, v read from one (B, T, 3E) projection [Q | K | V]
/// (self-attention with the three products in one GEMM) -> (B, H, T, E/H).
Variable self_attention_qkv(const Variable& qkv, int64_t num_heads, bool is_causal = false);

}  // namespace mg
