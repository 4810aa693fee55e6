#pragma once
// Exercise 8, the reference solution. It relies on docs/05-attention.md, section
// "Related, not similar: why are W_Q and W_K two matrices?".
#include <cstdint>

#include "exercise.h"

namespace exercises {

/// The QK circuit C = W_Q^h (W_K^h)^T (E, E) of head `head` of `attn`.
inline mg::Tensor qk_circuit(const mg::nn::MultiheadAttention& attn, int64_t head) {
  const int64_t d_k = attn.head_dim;
  // Rows [h d_k, (h+1) d_k) of each weight (d_k, E) compute head h's d_k features: q_h = x Wq_h^T.
  const mg::Tensor wq_h = attn.w_q.weight.data().narrow(0, head * d_k, d_k);
  const mg::Tensor wk_h = attn.w_k.weight.data().narrow(0, head * d_k, d_k);
  // q_i . k_j = x_i Wq_h^T (x_j Wk_h^T)^T = x_i (Wq_h^T Wk_h) x_j^T: with W_Q^h = Wq_h^T (E, d_k),
  // C = W_Q^h (W_K^h)^T = Wq_h^T Wk_h, a product through d_k dimensions.
  return mg::matmul(wq_h.transpose(0, 1), wk_h);
}

}  // namespace exercises
