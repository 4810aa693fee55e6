#pragma once
// Exercise 6 (chapter 5, attention): multi-head self-attention from four Linear layers.
//
// nn::MultiheadAttention is nothing but four nn::Linear layers (W_Q, W_K, W_V, W_O) and some
// arithmetic between them; there is no per-head matrix. Write that arithmetic: the check hands your
// function the four layers of a real MultiheadAttention and compares the outputs and the gradients.
#include <cmath>
#include <cstdint>

#include "exercise.h"

namespace exercises {

/// Self-attention of x through the layers w_q, w_k, w_v, w_o, as nn::MultiheadAttention computes it
/// (no dropout): x (B, T, E) -> (B, T, E). num_heads divides E, d_k = E / num_heads.
///   1. project:     Q = w_q(x), K = w_k(x), V = w_v(x)                          (B, T, E)
///   2. split heads: head h takes features [h d_k, (h+1) d_k)                     (B, H, T, d_k)
///   3. scores:      S = Q K^T / sqrt(d_k), per head                              (B, H, T, T)
///   4. mask:        S = -inf where attn_mask is true (when attn_mask is defined)
///   5. softmax:     P = softmax(S) over the keys (the last dim)
///   6. mix:         P V                                                          (B, H, T, d_k)
///   7. merge heads: side by side again                                           (B, T, E)
///   8. W_O:         w_o(merged)
/// attn_mask: undefined for none, or Bool (T, T), true where query i may NOT look at key j (it
/// broadcasts over batch and heads).
/// Useful: w_q(x) (a Linear is called like a function), v.reshape(shape), v.transpose(d0, d1),
/// mg::matmul, mg::softmax(v, -1), mg::masked_fill(v, mask, -INFINITY) (<cmath>), mask.defined().
/// Do not call nn::MultiheadAttention (the check compares with it), nor nn::split_heads or
/// mg::scaled_dot_product_attention: writing those steps is the exercise (and that function's Bool
/// mask means the opposite, true = may attend).
/// Hint: docs/05-attention.md, section "Is a per-head matrix multiplied onto W_Q?" (and the
/// eight steps at the top of nn/attention.h).
inline mg::Variable attention(const mg::Variable& x, const mg::nn::Linear& w_q, const mg::nn::Linear& w_k,
                              const mg::nn::Linear& w_v, const mg::nn::Linear& w_o, int64_t num_heads,
                              const mg::Tensor& attn_mask = mg::Tensor()) {
  throw NotDone("06_attention_from_linears",
                "docs/05-attention.md, section \"Is a per-head matrix multiplied onto W_Q?\"");
}

}  // namespace exercises
