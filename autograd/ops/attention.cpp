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

#include "minigrad/autograd/autocast.h"
#include "minigrad/tensor/ops/attention.h"
#include "minigrad/tensor/ops/matmul.h"

namespace mg {

// Under autocast the kernels read bfloat16 copies of q, k, v (and qkv), made here by autocast() and
// kept for the backward; the products run in bfloat16 with float32 sums and softmax.
Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v, bool is_causal) {
  const Tensor qd = autocast(q.data()), kd = autocast(k.data()), vd = autocast(v.data());
  AttentionForward f = attention_forward(qd, kd, vd, is_causal);
  return record("scaled_dot_product_attention", f.out, {q, k, v},
                [q = qd, k = kd, v = vd, f, is_causal](const Tensor& dy, const Node&) -> TensorList {
                  auto [dq, dk, dv] = attention_backward(dy, q, k, v, f, is_causal);
                  return {dq, dk, dv};
                });
}

// The same rule with Q, K, V read from one (B, T, 3E) projection; the gradient is one (B, T, 3E)
// tensor with dQ, dK, dV in their column blocks.
Variable self_attention_qkv(const Variable& qkv, int64_t num_heads, bool is_causal) {
  const Tensor qkvd = autocast(qkv.data());
  AttentionForward f = attention_qkv_forward(qkvd, num_heads, is_causal);
  return record("self_attention_qkv", f.out, {qkv},
                [qkv = qkvd, f, num_heads, is_causal](const Tensor& dy, const Node&) -> TensorList {
                  return {attention_qkv_backward(dy, qkv, num_heads, f, is_causal)};
                });
}

}  // namespace mg
