#pragma once
// Exercise 8 (chapter 5, attention): a head's QK circuit.
//
// A score is q_i . k_j = (x_i W_Q^h) . (x_j W_K^h) = x_i W_Q^h (W_K^h)^T x_j^T (row vectors): one
// matrix, C = W_Q^h (W_K^h)^T (E, E), between every pair of token vectors. W_Q^h and W_K^h are
// (E, d_k), so C has rank at most d_k, and nothing makes it symmetric: token a can score b high
// while b scores a low.
#include <cstdint>

#include "exercise.h"

namespace exercises {

/// The QK circuit of head `head` of `attn` (float64, no biases): C (E, E) with
///   score of query i with key j = x_i C x_j^T / sqrt(d_k)      (x_i: row i of the input, (E))
/// i.e. C = W_Q^h (W_K^h)^T. Careful with the storage: attn.w_q.weight is (E, E) and a Linear
/// computes x W^T, so head h's W_Q^h (E, d_k) is the transpose of rows [h d_k, (h+1) d_k) of
/// attn.w_q.weight; likewise W_K^h from attn.w_k.weight. d_k = attn.head_dim.
/// Useful: attn.w_q.weight.data() (a Tensor), t.narrow(dim, start, length), t.transpose(0, 1),
/// mg::matmul.
/// Hint: docs/05-attention.md, section "Related, not similar: why are W_Q and W_K two matrices?".
inline mg::Tensor qk_circuit(const mg::nn::MultiheadAttention& attn, int64_t head) {
  throw NotDone("08_qk_circuit",
                "docs/05-attention.md, section \"Related, not similar: why are W_Q and W_K two matrices?\"");
}

}  // namespace exercises
