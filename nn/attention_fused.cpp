// MultiheadAttention's fast path. It computes the same numbers as the textbook forward in
// nn/attention.cpp (steps 1 to 8), without building the (B, H, Tq, Tk) scores and weights: the
// fused kernel (autograd/ops/attention.cpp, loops in tensor/ops/attention.cpp) goes from q, k, v
// straight to the mixed values. The two paths agree to 1e-12 in float64, outputs and every gradient
// (tests/test_attention.cpp:FusedAttention.MultiheadAttentionFusedEqualsComposed), and the fused
// one matches PyTorch (tests/test_attention.cpp:MultiheadAttention.GoldenSelfAttentionFusedPath).
#include "minigrad/nn/attention.h"

namespace mg::nn {

// The fused kernel covers no mask but the causal one, no dropout on the weights, and no request
// for the weights themselves (need_weights or a forward hook, which is given them).
bool MultiheadAttention::can_fuse(const Variable&, const Variable&, const Variable&,
                                  const AttentionForwardOptions& opt) const {
  return options.fused && !opt.need_weights && !has_forward_hooks() && !opt.attn_mask.defined() &&
         !opt.key_padding_mask.defined() && (attn_dropout.p == 0 || !attn_dropout.is_training());
}

AttentionOutput MultiheadAttention::forward_fused(const Variable& query, const Variable& key, const Variable& value,
                                                  const AttentionForwardOptions& opt) const {
  Variable mixed;  // (B, H, Tq, d_k): steps 1 to 6
  if (rotary || num_kv_heads != num_heads) {
    // Rotated or grouped heads: three projections, then the kernel with the key/value heads shared.
    const auto [q, k, v] = project_heads(query, key, value, 0);
    mixed =
        scaled_dot_product_attention(q, k, v, {.is_causal = opt.is_causal, .enable_gqa = num_kv_heads != num_heads});
  } else if (query.impl() == key.impl() && key.impl() == value.impl()) {
    // Self-attention: x [W_Q; W_K; W_V]^T = [x W_Q^T | x W_K^T | x W_V^T], the three projections in
    // one GEMM over the stacked weights. The parameters are still the three Linear layers' own: the
    // stacking is recorded, so each gets its own gradient. The kernel reads Q, K, V in place.
    const Variable w = concat({w_q.weight, w_k.weight, w_v.weight}, 0);                              // (3E, E)
    const Variable b = w_q.bias.defined() ? concat({w_q.bias, w_k.bias, w_v.bias}, 0) : Variable();  // (3E)
    mixed = self_attention_qkv(linear(query, w, b), num_heads, opt.is_causal);
  } else {
    mixed = scaled_dot_product_attention(split_heads(w_q(query), num_heads), split_heads(w_k(key), num_heads),
                                         split_heads(w_v(value), num_heads), {.is_causal = opt.is_causal});
  }
  return {merge_and_project(mixed, opt.head_mask), Variable(), Variable()};  // steps 7, 8
}

}  // namespace mg::nn
