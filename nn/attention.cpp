#include "nn/attention.h"

#include <cmath>

#include "nn/init.h"

namespace mg::nn {

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, MultiheadAttentionOptions o, Generator& gen)
    : embed_dim(e),
      num_heads(h),
      head_dim(h > 0 ? e / h : 0),
      options(o),
      w_q(e, e, o.bias, gen),
      w_k(e, e, o.bias, gen),
      w_v(e, e, o.bias, gen),
      w_o(e, e, o.bias, gen),
      attn_dropout(o.dropout, gen) {
  MG_CHECK(h > 0 && e > 0 && e % h == 0, ValueError,
           "MultiheadAttention: embed_dim {} must be positive and divisible by num_heads {}", e, h);
  register_module("w_q", w_q);
  register_module("w_k", w_k);
  register_module("w_v", w_v);
  register_module("w_o", w_o);
  register_module("attn_dropout", attn_dropout);
  // PyTorch draws one Xavier-uniform (3E, E) in_proj_weight: the bound uses fan_out = 3E.
  const double b = std::sqrt(6.0 / static_cast<double>(e + 3 * e));
  for (Linear* l : {&w_q, &w_k, &w_v}) {
    init::uniform_(l->weight, -b, b, gen);
    if (l->bias.defined()) init::zeros_(l->bias);
  }
  if (w_o.bias.defined()) init::zeros_(w_o.bias);
}

std::string MultiheadAttention::extra_repr() const {
  return fmt::format("embed_dim={}, num_heads={}, head_dim={}", embed_dim, num_heads, head_dim);
}

Variable split_heads(const Variable& x, int64_t h) {
  const int64_t B = x.size(0), T = x.size(1), E = x.size(2);
  return transpose(reshape(x, {B, T, h, E / h}), 1, 2);
}

Variable merge_heads(const Variable& x) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), d = x.size(3);
  return reshape(transpose(x, 1, 2), {B, T, H * d});
}

Tensor MultiheadAttention::head_scale(const Tensor& head_mask, DType dtype) const {
  MG_CHECK(head_mask.numel() == num_heads, ShapeError, "MultiheadAttention: head_mask needs {} entries, got shape {}", num_heads,
           shape_str(head_mask.shape()));
  return head_mask.to(dtype).reshape({1, num_heads, 1, 1});
}

AttentionOutput MultiheadAttention::forward(const Variable& query, const Variable& key, const Variable& value,
                                            const AttentionMask& mask) const {
  auto check3 = [&](const Variable& v, const char* what) {
    MG_CHECK(v.dim() == 3 && v.size(2) == embed_dim, ShapeError,
             "MultiheadAttention: {} must be (batch, seq, {}), got {} (hint: inputs are batch-first; "
             "unsqueeze(0) a single sequence)", what, embed_dim, shape_str(v.shape()));
  };
  check3(query, "query");
  check3(key, "key");
  check3(value, "value");
  const int64_t B = query.size(0), Tq = query.size(1), Tk = key.size(1);
  MG_CHECK(key.size(0) == B && value.size(0) == B && value.size(1) == Tk, ShapeError,
           "MultiheadAttention: query {}, key {} and value {} must share the batch size, and key and "
           "value the sequence length", shape_str(query.shape()), shape_str(key.shape()), shape_str(value.shape()));

  const bool fused = options.fused && !mask.need_weights && !hook_ && !mask.attn_mask.defined() &&
                     !mask.key_padding_mask.defined() && (attn_dropout.p == 0 || !attn_dropout.is_training());
  if (fused && query.impl() == key.impl() && key.impl() == value.impl()) {
    // Self-attention, fast path. x [W_Q; W_K; W_V]^T = [x W_Q^T | x W_K^T | x W_V^T]: the three
    // products in one GEMM over the stacked weights (the parameters are still the three Linear
    // layers' own; the stacking is recorded, so each gets its own gradient), then the fused kernel
    // reads Q, K, V in place from the result.
    const Variable w = concat({w_q.weight, w_k.weight, w_v.weight}, 0);  // (3E, E)
    const Variable b = w_q.bias.defined() ? concat({w_q.bias, w_k.bias, w_v.bias}, 0) : Variable();
    Variable mixed = self_attention_qkv(linear(query, w, b), num_heads, mask.is_causal);  // (B, H, T, d)
    if (mask.head_mask.defined()) mixed = mixed * Variable(head_scale(mask.head_mask, mixed.dtype()));
    return {w_o.forward(merge_heads(mixed)), Variable(), Variable()};
  }

  // Project, then view each projection as num_heads slices of head_dim features.
  const Variable q = split_heads(w_q.forward(query), num_heads);  // (B, H, Tq, d)
  const Variable k = split_heads(w_k.forward(key), num_heads);    // (B, H, Tk, d)
  const Variable v = split_heads(w_v.forward(value), num_heads);  // (B, H, Tk, d)

  if (fused) {  // the same numbers without building (B, H, Tq, Tk) tensors: autograd/ops/attention.cpp
    Variable mixed = scaled_dot_product_attention(q, k, v, mask.is_causal);  // (B, H, Tq, d)
    if (mask.head_mask.defined()) mixed = mixed * Variable(head_scale(mask.head_mask, mixed.dtype()));
    return {w_o.forward(merge_heads(mixed)), Variable(), Variable()};
  }

  // The composed reference path, op by op.
  Variable scores = matmul(q, transpose(k, -2, -1)) / std::sqrt(static_cast<double>(head_dim));  // (B, H, Tq, Tk)
  if (mask.attn_mask.defined()) {
    if (mask.attn_mask.dtype() == DType::Bool) scores = masked_fill(scores, mask.attn_mask, -INFINITY);
    else scores = scores + Variable(mask.attn_mask.to(scores.dtype()));
  }
  if (mask.is_causal) scores = masked_fill(scores, triu(ones({Tq, Tk}, DType::Bool), 1), -INFINITY);
  if (mask.key_padding_mask.defined()) {
    MG_CHECK(mask.key_padding_mask.dtype() == DType::Bool && mask.key_padding_mask.shape() == Shape({B, Tk}),
             ShapeError, "MultiheadAttention: key_padding_mask must be Bool (batch, key_len) = ({}, {}), got {} {}",
             B, Tk, dtype_name(mask.key_padding_mask.dtype()), shape_str(mask.key_padding_mask.shape()));
    scores = masked_fill(scores, mask.key_padding_mask.view({B, 1, 1, Tk}), -INFINITY);
  }
  const Variable weights = softmax(scores, -1);                          // (B, H, Tq, Tk)
  Variable mixed = matmul(attn_dropout.forward(weights), v);             // (B, H, Tq, d)
  if (mask.head_mask.defined()) mixed = mixed * Variable(head_scale(mask.head_mask, mixed.dtype()));
  AttentionOutput out{w_o.forward(merge_heads(mixed)), weights, scores};
  if (hook_) hook_(out);
  return out;
}

}  // namespace mg::nn
