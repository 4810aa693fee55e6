#pragma once
// Fused scaled dot-product attention as differentiable ops (autograd/ops/attention.cpp; the
// kernels are tensor/ops/attention.cpp). nn::MultiheadAttention uses them when nothing needs the
// (T, T) weights; its composed path computes the same numbers op by op.
#include <optional>

#include "minigrad/autograd/variable.h"

namespace mg {

/// The arguments of scaled_dot_product_attention after q, k, v, with PyTorch 2.x's names and defaults.
struct SdpaOptions {
  /// Broadcastable to (..., Tq, Tk). Bool: TRUE MARKS A KEY THE QUERY MAY ATTEND TO (PyTorch's
  /// convention for this function, the opposite of MultiheadAttention's attn_mask); floating: added
  /// to the scores (-inf forbids).
  Tensor attn_mask;
  /// Dropout on the attention weights, applied whenever > 0 (the function has no training mode).
  double dropout_p = 0.0;
  /// Query i attends to keys j <= i (the upper-left triangle, also when Tq != Tk). Not together
  /// with attn_mask.
  bool is_causal = false;
  /// Multiplies q k^T; absent: 1 / sqrt(head_dim).
  std::optional<double> scale;
  /// Grouped-query attention: k and v have Hkv heads (dim -3), a divisor of q's H, and query head h
  /// uses key and value head h / (H / Hkv).
  bool enable_gqa = false;
  /// The dropout's random numbers (null: default_generator()).
  Generator* generator = nullptr;
};

/// softmax(q k^T * scale + mask) @ v, as torch.nn.functional.scaled_dot_product_attention (2.x):
/// q (..., H, Tq, d), k (..., Hkv, Tk, d), v (..., Hkv, Tk, dv) -> (..., H, Tq, dv). A query row
/// whose every key is masked gets weights 0 and output 0 (PyTorch's safe softmax), not NaN.
/// Without a mask or dropout, on 4-D inputs, it runs the fused kernel: O(T) memory for the
/// backward instead of the (Tq, Tk) weights, the same numbers (tests/test_attention.cpp).
/// Derivative, per (batch, head) with S the scores, P the weights, s the scale:
///   dV = P^T dO   dP = dO V^T   dS = P * (dP - rowsum(dP * P))   dQ = s dS K   dK = s dS^T Q
/// (with grouped heads, dK and dV summed over the query heads of each group).
Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                      const SdpaOptions& options = {});
/// The same with a floating attn_mask that is trained: a Variable added to the scores (ALiBi's
/// learned slopes, T5's relative position bias), PyTorch's attn_mask given a tensor that requires
/// grad. It takes the composed path, and the mask's gradient is dS summed over the dims it was
/// broadcast along (dS as above). The mask has q's dtype and broadcasts to (..., Tq, Tk);
/// options.attn_mask must be left undefined.
Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                      const Variable& attn_mask, const SdpaOptions& options = {});
/// The same fused attention with q, k, v read from one (B, T, 3E) projection [Q | K | V]
/// (self-attention with the three products in one GEMM) -> (B, H, T, E/H).
Variable self_attention_qkv(const Variable& qkv, int64_t num_heads, bool is_causal = false);

/// Rotary position embedding (tensor/ops/attention.h explains it): x (..., T, d) with each pair of
/// features rotated by its position's angle; cos and sin (broadcastable to (..., T, d/2)) are
/// constants, usually rows of rotary_tables. interleaved: pairs (2i, 2i+1); else (i, i + d/2).
/// Derivative: the rotation back, dx = rotary_embedding(dy, cos, -sin).
Variable rotary_embedding(const Variable& x, const Tensor& cos, const Tensor& sin, bool interleaved = false);

}  // namespace mg
