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

#include <cmath>

#include "minigrad/autograd/autocast.h"
#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/autograd/ops/matmul.h"
#include "minigrad/autograd/ops/nn_functional.h"
#include "minigrad/autograd/ops/reduce.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops/attention.h"
#include "minigrad/tensor/ops/matmul.h"
#include "minigrad/tensor/ops/shape.h"

namespace mg {

namespace {
// The rule above in recorded ops (the backward under create_graph), P recomputed from q and k:
// q (..., Tq, d), k and v (..., Tk, d), dO (..., Tq, d).
VariableList attention_graph_backward(const Variable& dout, const Variable& q, const Variable& k, const Variable& v,
                                      bool is_causal) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Variable S = matmul(q, k.transpose(-2, -1)) * scale;
  if (is_causal)  // query i sees keys j <= i: the others are masked before the softmax
    S = masked_fill(S, triu(ones({q.size(-2), k.size(-2)}, DType::Bool), 1), -INFINITY);
  const Variable P = softmax(S, -1);
  const Variable dP = matmul(dout, v.transpose(-2, -1));
  const Variable dS = P * (dP - sum(dP * P, {-1}, true));
  return {matmul(dS, k) * scale, matmul(dS.transpose(-2, -1), q) * scale, matmul(P.transpose(-2, -1), dout)};
}
}  // namespace

// Under autocast the kernels read bfloat16 copies of q, k, v (and qkv), made here by autocast() and
// kept for the backward; the products run in bfloat16 with float32 sums and softmax. Under
// create_graph (float32 or float64 only) the backward is the composed form: the formulas above in
// recorded ops, with P recomputed.
Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v, bool is_causal) {
  const Tensor qd = autocast(q.data()), kd = autocast(k.data()), vd = autocast(v.data());
  AttentionForward f = attention_forward(qd, kd, vd, is_causal);
  LambdaNode::Backward fused = [q = qd, k = kd, v = vd, f, is_causal](const Tensor& dy, const Node&) -> TensorList {
    auto [dq, dk, dv] = attention_backward(dy, q, k, v, f, is_causal);
    return {dq, dk, dv};
  };
  if (bfloat16_involved({qd, kd, vd}))
    return record("scaled_dot_product_attention", f.out, {q, k, v}, std::move(fused));
  return record_fused("scaled_dot_product_attention", f.out, {q, k, v}, keep(0, 1, 2), std::move(fused),
                      [is_causal](const Variable& dy, const Saved<Variable, 3>& s, const Node&) {
                        return attention_graph_backward(dy, s[0], s[1], s[2], is_causal);
                      });
}

// The same rule with Q, K, V read from one (B, T, 3E) projection; the gradient is one (B, T, 3E)
// tensor with dQ, dK, dV in their column blocks.
Variable self_attention_qkv(const Variable& qkv, int64_t num_heads, bool is_causal) {
  const Tensor qkvd = autocast(qkv.data());
  AttentionForward f = attention_qkv_forward(qkvd, num_heads, is_causal);
  LambdaNode::Backward fused = [qkv = qkvd, f, num_heads, is_causal](const Tensor& dy, const Node&) -> TensorList {
    return {attention_qkv_backward(dy, qkv, num_heads, f, is_causal)};
  };
  if (bfloat16_involved({qkvd})) return record("self_attention_qkv", f.out, {qkv}, std::move(fused));
  return record_fused("self_attention_qkv", f.out, {qkv}, keep(0), std::move(fused),
                      [num_heads, is_causal](const Variable& dy, const Saved<Variable, 1>& s, const Node&) {
                        const Variable& x = s[0];  // (B, T, 3E)
                        const int64_t B = x.size(0), T = x.size(1), E = x.size(2) / 3, d = E / num_heads;
                        auto head = [&](int64_t i) {  // block i of the columns as (B, H, T, d)
                          return x.narrow(2, i * E, E).reshape({B, T, num_heads, d}).transpose(1, 2);
                        };
                        VariableList g = attention_graph_backward(dy, head(0), head(1), head(2), is_causal);
                        for (auto& gi : g) gi = gi.transpose(1, 2).reshape({B, T, E});
                        return VariableList{concat(g, 2)};
                      });
}

}  // namespace mg
