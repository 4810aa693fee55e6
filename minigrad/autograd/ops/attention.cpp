// Fused attention as one differentiable op. The loops live in tensor/ops/attention.cpp; here is
// the rule, per (batch, head), with S the scores, P the weights and scale = 1 / sqrt(d):
//
//   S = scale Q K^T      P = softmax_rows(S)      O = P V
//   dV = P^T dO      dP = dO V^T      dS = P * (dP - rowsum(dO * O))      dQ = scale dS K      dK = scale dS^T Q
//
// (rowsum(dP * P) = rowsum(dO * O), which is cheaper.) The forward keeps only O and the per-row
// log-sum-exp; the backward recomputes P from them. tests/test_attention.cpp checks that these
// numbers equal the composed path of nn::MultiheadAttention, outputs and gradients.
#include "minigrad/autograd/ops/attention.h"

#include "minigrad/tensor/ops/attention.h"

namespace mg {

Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v, bool is_causal) {
  AttentionForward f = attention_forward(q.data(), k.data(), v.data(), is_causal);
  return record("scaled_dot_product_attention", f.out, {q, k, v},
                [q = q.data(), k = k.data(), v = v.data(), f, is_causal](const Tensor& dy, const Node&) -> TensorList {
                  auto [dq, dk, dv] = attention_backward(dy, q, k, v, f, is_causal);
                  return {dq, dk, dv};
                });
}

// The same rule with Q, K, V read from one (B, T, 3E) projection; the gradient is one (B, T, 3E)
// tensor with dQ, dK, dV in their column blocks.
Variable self_attention_qkv(const Variable& qkv, int64_t num_heads, bool is_causal) {
  AttentionForward f = attention_qkv_forward(qkv.data(), num_heads, is_causal);
  return record("self_attention_qkv", f.out, {qkv},
                [qkv = qkv.data(), f, num_heads, is_causal](const Tensor& dy, const Node&) -> TensorList {
                  return {attention_qkv_backward(dy, qkv, num_heads, f, is_causal)};
                });
}

}  // namespace mg
