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
namespace {
// Under autocast, float32 operands are rounded to bfloat16 once here; the kernels see bfloat16 q, k,
// v (and qkv), run their products in bfloat16 with float32 sums and softmax, and the backward gets
// the same bfloat16 copies (half the memory of float32 ones).
Tensor autocast_operand(const Tensor& t, const char* op) {
  return AutocastMode::is_enabled() && t.dtype() == DType::Float32 ? bf16_operand(t, op) : t;
}
}  // namespace

Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v, bool is_causal) {
  const char* op = "scaled_dot_product_attention";
  const bool cast = AutocastMode::is_enabled() && q.defined() && k.defined() && v.defined() &&
                    q.dtype() == DType::Float32 && k.dtype() == DType::Float32 && v.dtype() == DType::Float32;
  const Tensor qd = cast ? autocast_operand(q.data(), op) : q.data(), kd = cast ? autocast_operand(k.data(), op) : k.data(),
               vd = cast ? autocast_operand(v.data(), op) : v.data();
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
  const Tensor& raw = qkv.data();
  const Tensor qkvd = raw.defined() ? autocast_operand(raw, "self_attention_qkv") : raw;
  AttentionForward f = attention_qkv_forward(qkvd, num_heads, is_causal);
  return record("self_attention_qkv", f.out, {qkv},
                [qkv = qkvd, f, num_heads, is_causal](const Tensor& dy, const Node&) -> TensorList {
                  return {attention_qkv_backward(dy, qkv, num_heads, f, is_causal)};
                });
}

}  // namespace mg
