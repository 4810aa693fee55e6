#pragma once
// Exercise 6, the reference solution. It relies on docs/05-attention.md, section
// "Is a per-head matrix multiplied onto W_Q?".
#include <cmath>
#include <cstdint>

#include "exercise.h"

namespace exercises {

/// Self-attention of x through the layers w_q, w_k, w_v, w_o, as nn::MultiheadAttention computes it.
inline mg::Variable attention(const mg::Variable& x, const mg::nn::Linear& w_q, const mg::nn::Linear& w_k,
                              const mg::nn::Linear& w_v, const mg::nn::Linear& w_o, int64_t num_heads,
                              const mg::Tensor& attn_mask = mg::Tensor()) {
  const int64_t B = x.size(0), T = x.size(1), E = x.size(2), d_k = E / num_heads;
  // (B, T, E) -> (B, H, T, d_k): the E features are H groups of d_k side by side, so a reshape
  // names the groups and a transpose puts the head before the position. Head h's query is thus
  // computed by rows [h d_k, (h+1) d_k) of w_q.weight: a block of the one W_Q.
  const auto split = [&](const mg::Variable& v) { return v.reshape({B, T, num_heads, d_k}).transpose(1, 2); };
  const mg::Variable q = split(w_q(x)), k = split(w_k(x)), v = split(w_v(x));
  // Every query against every key, in every head at once: (B, H, T, d_k) x (B, H, d_k, T).
  mg::Variable scores = mg::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d_k));
  // A masked score becomes -inf, so its weight after the softmax is exactly 0.
  if (attn_mask.defined()) scores = mg::masked_fill(scores, attn_mask, -INFINITY);
  const mg::Variable weights = mg::softmax(scores, -1);  // each query's row sums to 1 over the keys
  const mg::Variable mixed = mg::matmul(weights, v);     // (B, H, T, d_k)
  // Undo the split: heads side by side again, then W_O mixes what the heads found.
  return w_o(mixed.transpose(1, 2).reshape({B, T, E}));
}

}  // namespace exercises
