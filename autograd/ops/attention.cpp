// Fused attention as one differentiable op. The loops live in tensor/ops/attention.cpp; here is
// the rule, per (batch, head), with S the scores, P the weights and scale = 1 / sqrt(d) (or the one given):
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
#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/matmul.h"
#include "minigrad/tensor/ops/reduce.h"
#include "minigrad/tensor/ops/shape.h"

namespace mg {

namespace {
// k (..., Hkv, S, d) -> (..., Hkv * group, S, d): each key (or value) head repeated for the group of
// query heads that reads it, head j of the result being head j / group of k (repeat_interleave).
Variable repeat_heads(const Variable& k, int64_t group) {
  if (group == 1) return k;
  const int64_t n = k.dim();
  Shape wide = k.shape();
  wide.insert(wide.end() - 2, group);  // (..., Hkv, group, S, d)
  Shape merged = k.shape();
  merged[static_cast<size_t>(n - 3)] *= group;
  return k.unsqueeze(n - 2).expand(wide).reshape(merged);
}
// The inverse for gradients: (..., Hkv * group, S, d) summed over each group -> (..., Hkv, S, d).
Variable sum_heads(const Variable& g, int64_t group) {
  if (group == 1) return g;
  const int64_t n = g.dim();
  return g.unflatten(n - 3, {g.size(n - 3) / group, group}).sum({n - 2});
}

// The rule above in recorded ops (the backward under create_graph), P recomputed from q and k:
// q (..., Tq, d), k and v (..., Tk, d) with Hkv = H / group heads, dO (..., Tq, d).
VariableList attention_graph_backward(const Variable& dout, const Variable& q, const Variable& k0, const Variable& v0,
                                      bool is_causal, double scale, int64_t group) {
  const Variable k = repeat_heads(k0, group), v = repeat_heads(v0, group);
  Variable S = matmul(q, k.transpose(-2, -1)) * scale;
  if (is_causal)  // query i sees keys j <= i: the others are masked before the softmax
    S = masked_fill(S, triu(ones({q.size(-2), k.size(-2)}, DType::Bool), 1), -INFINITY);
  const Variable P = softmax(S, -1);
  const Variable dP = matmul(dout, v.transpose(-2, -1));
  const Variable dS = P * (dP - sum(dP * P, {-1}, true));
  return {matmul(dS, k) * scale, sum_heads(matmul(dS.transpose(-2, -1), q) * scale, group),
          sum_heads(matmul(P.transpose(-2, -1), dout), group)};
}

void check_sdpa(const Variable& q, const Variable& k, const Variable& v, const SdpaOptions& o) {
  const char* op = "scaled_dot_product_attention";
  MG_CHECK(q.defined() && k.defined() && v.defined(), StateError, "{}: an operand is undefined", op);
  MG_CHECK(is_floating_point(q.dtype()) && q.dtype() == k.dtype() && k.dtype() == v.dtype(), DTypeError,
           "{}: q, k and v must share one floating dtype, got {}, {}, {}", op, dtype_name(q.dtype()),
           dtype_name(k.dtype()), dtype_name(v.dtype()));
  MG_CHECK(
      q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim() && q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2),
      ShapeError,
      "{}: expected q (..., Tq, d), k (..., Tk, d) and v (..., Tk, dv) with one number of dims, got q {}, "
      "k {}, v {}",
      op, shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  if (o.enable_gqa)
    MG_CHECK(q.dim() >= 3 && k.size(-3) > 0 && k.size(-3) == v.size(-3) && q.size(-3) % k.size(-3) == 0, ShapeError,
             "{}: with enable_gqa the number of key/value heads (dim -3 of k {} and v {}) must divide the query "
             "heads (q {})",
             op, shape_str(k.shape()), shape_str(v.shape()), shape_str(q.shape()));
  // The dims before (T, d) broadcast, as matmul's batch dims do; fewer key heads than query heads
  // is grouped-query attention, which has to be asked for.
  for (int64_t d = 3; d <= q.dim(); ++d) {
    const int64_t qs = q.size(-d), ks = k.size(-d), vs = v.size(-d);
    if (d == 3 && o.enable_gqa) continue;
    MG_CHECK((qs == ks || qs == 1 || ks == 1) && (qs == vs || qs == 1 || vs == 1) && (ks == vs || ks == 1 || vs == 1),
             ShapeError, "{}: dim {} of q {}, k {} and v {} does not broadcast ({}, {} and {}){}", op, -d,
             shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()), qs, ks, vs,
             d == 3 && ks == vs && ks > 0 && qs % ks == 0
                 ? "; for grouped-query attention (fewer key/value heads than query heads) pass enable_gqa = true"
                 : "");
  }
  MG_CHECK(!(o.attn_mask.defined() && o.is_causal), ValueError,
           "{}: give attn_mask or is_causal, not both (PyTorch refuses the pair too)", op);
  MG_CHECK(o.dropout_p >= 0 && o.dropout_p <= 1, ValueError, "{}: dropout_p must be in [0, 1], got {}", op,
           o.dropout_p);
  MG_CHECK(!o.scale || std::isfinite(*o.scale), ValueError, "{}: scale must be finite, got {}", op,
           o.scale.value_or(0));
  MG_CHECK(q.size(-1) > 0 || o.scale, ShapeError,
           "{}: q and k have head size 0, so the default scale 1/sqrt(d) is infinite (every weight would be NaN); "
           "give a scale",
           op);
  if (o.attn_mask.defined()) {
    const Tensor& m = o.attn_mask;
    MG_CHECK(m.dtype() == DType::Bool || is_floating(m.dtype()), DTypeError,
             "{}: attn_mask must be Bool (true = may attend) or floating (added to the scores), got {}", op,
             dtype_name(m.dtype()));
    // the scores' shape: q's and k's leading dims broadcast (k's head dim is q's under GQA), then (Tq, Tk)
    Shape kb(k.shape().begin(), k.shape().end() - 2);
    if (o.enable_gqa) kb[kb.size() - 1] = q.size(-3);
    Shape want = broadcast_shapes(Shape(q.shape().begin(), q.shape().end() - 2), kb, op);
    want.insert(want.end(), {q.size(-2), k.size(-2)});
    bool fits = m.dim() <= static_cast<int64_t>(want.size());
    for (int64_t d = 1; fits && d <= m.dim(); ++d)
      fits = m.size(-d) == 1 || m.size(-d) == want[want.size() - static_cast<size_t>(d)];
    MG_CHECK(fits, ShapeError, "{}: attn_mask of shape {} does not broadcast to the scores' shape {}", op,
             shape_str(m.shape()), shape_str(want));
  }
}

// Where a query may attend, as a Bool tensor broadcastable to the scores (undefined: everywhere).
Tensor allowed_keys(const SdpaOptions& o, int64_t Tq, int64_t Tk) {
  if (o.is_causal) return tril(ones({Tq, Tk}, DType::Bool));
  if (!o.attn_mask.defined()) return Tensor();
  if (o.attn_mask.dtype() == DType::Bool) return o.attn_mask;
  return ne(o.attn_mask, full({}, -INFINITY, o.attn_mask.dtype()));
}

// The composed path, step by step: scores, mask, safe softmax, dropout, mix.
// A trained mask (mask_var) is added as it is, so its gradient is recorded; o.attn_mask is its data.
Variable sdpa_composed(const Variable& q, const Variable& k0, const Variable& v0, const SdpaOptions& o, double scale,
                       int64_t group, const Variable* mask_var = nullptr) {
  const Variable k = repeat_heads(k0, group), v = repeat_heads(v0, group);
  Variable scores = matmul(q, k.transpose(-2, -1)) * scale;  // (..., Tq, Tk)
  const Tensor allowed = allowed_keys(o, q.size(-2), k.size(-2));
  if (mask_var)
    scores = scores + *mask_var;
  else if (o.attn_mask.defined() && o.attn_mask.dtype() != DType::Bool)
    scores = scores + Variable(o.attn_mask.to(scores.dtype()));
  else if (allowed.defined())
    scores = masked_fill(scores, logical_not(allowed), -INFINITY);
  Tensor dead;  // (..., Tq, 1): rows with no key to attend to get weights 0, not softmax's NaN
  if (allowed.defined() && k.size(-2) > 0) {
    const Tensor none = eq(sum(allowed.to(DType::Int64), {-1}, true), zeros({}, DType::Int64));
    if (sum(none.to(DType::Int64)).item() > 0) dead = none;
  }
  if (dead.defined()) scores = masked_fill(scores, dead, 0.0);  // finite, so no NaN reaches the gradients
  Variable weights = softmax(scores, -1);
  if (dead.defined()) weights = masked_fill(weights, dead, 0.0);
  if (o.dropout_p > 0) weights = dropout(weights, o.dropout_p, true, o.generator ? *o.generator : default_generator());
  return matmul(weights, v);
}
}  // namespace

// Under autocast q, k, v (and qkv) are cast to bfloat16 by autocast(), recorded, and the kernels
// read the copies, kept for the backward; the products run in bfloat16 with float32 sums and
// softmax. Under create_graph the backward is the composed form: the formulas above in recorded
// ops, with P recomputed.
Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v, const SdpaOptions& o) {
  check_sdpa(q, k, v, o);
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const int64_t group = o.enable_gqa ? q.size(-3) / k.size(-3) : 1;
  // The fused kernel: 4-D operands with one batch size, key heads that divide the query heads (one
  // head broadcasts, as matmul would), values as wide as the keys, at least one key, and no mask but
  // the causal one, no dropout.
  const bool fusable = q.dim() == 4 && q.size(0) == k.size(0) && k.size(0) == v.size(0) && k.size(1) == v.size(1) &&
                       (k.size(1) == q.size(1) || k.size(1) == 1 || group > 1) && v.size(-1) == q.size(-1) &&
                       k.size(-2) > 0 && q.size(1) > 0 && q.size(-1) > 0 && !o.attn_mask.defined() && o.dropout_p == 0;
  if (!fusable) return sdpa_composed(q, k, v, o, scale, group);
  const int64_t kv_group = q.size(1) / k.size(1);
  const bool is_causal = o.is_causal;
  const std::optional<double> sc = o.scale;
  const Variable q16 = autocast(q), k16 = autocast(k), v16 = autocast(v);
  AttentionForward f = attention_forward(q16.data(), k16.data(), v16.data(), is_causal, sc);
  LambdaNode::Backward fused = [q = q16.data(), k = k16.data(), v = v16.data(), f, is_causal, sc](
                                   const Tensor& dy, const Node&) -> TensorList {
    auto [dq, dk, dv] = attention_backward(dy, q, k, v, f, is_causal, sc);
    return {dq, dk, dv};
  };
  // the fused backward reads the output too (each row's sum of dy * out), as the kernel wrote it:
  // float32, also where the recorded output is rounded to bfloat16 (AutocastOptions::bfloat16_outputs)
  return record_fused("scaled_dot_product_attention", autocast_output(f.out), {q16, k16, v16}, keep(0, 1, 2, kOutput),
                      std::move(fused),
                      [is_causal, scale, kv_group](const Variable& dy, const Saved<Variable, 4>& s, const Node&) {
                        return attention_graph_backward(dy, s[0], s[1], s[2], is_causal, scale, kv_group);
                      });
}

Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v, const Variable& mask,
                                      const SdpaOptions& o) {
  const char* op = "scaled_dot_product_attention";
  MG_CHECK(!o.attn_mask.defined(), ValueError,
           "{}: the mask is given twice, as a Variable and in options.attn_mask; give it once", op);
  MG_CHECK(mask.defined(), StateError, "{}: the attn_mask Variable is undefined", op);
  MG_CHECK(is_floating_point(mask.dtype()) && mask.dtype() == q.dtype(), DTypeError,
           "{}: a Variable attn_mask is added to the scores, so it must have q's floating dtype {}, got {} (a Bool "
           "mask has no gradient: pass it in options.attn_mask)",
           op, dtype_name(q.dtype()), dtype_name(mask.dtype()));
  SdpaOptions with = o;
  with.attn_mask = mask.data();
  check_sdpa(q, k, v, with);  // shapes, broadcasting, not together with is_causal
  if (!mask.requires_grad()) return scaled_dot_product_attention(q, k, v, with);
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  return sdpa_composed(q, k, v, with, scale, o.enable_gqa ? q.size(-3) / k.size(-3) : 1, &mask);
}

// The same rule with Q, K, V read from one (B, T, 3E) projection; the gradient is one (B, T, 3E)
// tensor with dQ, dK, dV in their column blocks.
Variable self_attention_qkv(const Variable& qkv, int64_t num_heads, bool is_causal) {
  const Variable qkv16 = autocast(qkv);
  AttentionForward f = attention_qkv_forward(qkv16.data(), num_heads, is_causal);
  LambdaNode::Backward fused = [qkv = qkv16.data(), f, num_heads, is_causal](const Tensor& dy,
                                                                             const Node&) -> TensorList {
    return {attention_qkv_backward(dy, qkv, num_heads, f, is_causal)};
  };
  return record_fused("self_attention_qkv", autocast_output(f.out), {qkv16}, keep(0, kOutput), std::move(fused),
                      [num_heads, is_causal](const Variable& dy, const Saved<Variable, 2>& s, const Node&) {
                        const Variable& x = s[0];  // (B, T, 3E)
                        const int64_t B = x.size(0), T = x.size(1), E = x.size(2) / 3, d = E / num_heads;
                        auto head = [&](int64_t i) {  // block i of the columns as (B, H, T, d)
                          return x.narrow(2, i * E, E).reshape({B, T, num_heads, d}).transpose(1, 2);
                        };
                        VariableList g = attention_graph_backward(dy, head(0), head(1), head(2), is_causal,
                                                                  1.0 / std::sqrt(static_cast<double>(d)), 1);
                        for (auto& gi : g) gi = gi.transpose(1, 2).reshape({B, T, E});
                        return VariableList{concat(g, 2)};
                      });
}

// x (..., T, d) -> (..., T, d), each pair rotated by its angle; dx = the rotation back. Under
// create_graph the backward is the same op on dy (recorded), with sin negated.
Variable rotary_embedding(const Variable& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  Tensor out = rotary_embedding(x.data(), cos, sin, interleaved);
  LambdaNode::Backward once = [cos, sin, interleaved](const Tensor& dy, const Node&) -> TensorList {
    return {rotary_embedding_backward(dy, cos, sin, interleaved)};
  };
  return record_fused("rotary_embedding", std::move(out), {x}, keep(), std::move(once),
                      [cos, msin = neg(sin), interleaved](const Variable& dy, const Saved<Variable, 0>&, const Node&) {
                        return VariableList{rotary_embedding(dy, cos, msin, interleaved)};
                      },
                      {cos, sin});
}

}  // namespace mg
