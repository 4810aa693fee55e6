#include "minigrad/nn/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "minigrad/nn/init.h"

namespace mg::nn {

namespace {
// embed_dim, once checked: before any member layer is built, so the error names this module.
int64_t checked_embed_dim(int64_t e, int64_t h) {
  MG_CHECK(h > 0 && e > 0 && e % h == 0, ValueError,
           "MultiheadAttention: embed_dim {} must be positive and divisible by num_heads {}", e, h);
  return e;
}
}  // namespace

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, MultiheadAttentionOptions o, Generator& gen)
    : embed_dim(checked_embed_dim(e, h)),
      num_heads(h),
      head_dim(h > 0 ? e / h : 0),
      options(o),
      w_q(e, e, {.bias = o.bias}, gen),
      w_k(e, e, {.bias = o.bias}, gen),
      w_v(e, e, {.bias = o.bias}, gen),
      w_o(e, e, {.bias = o.bias}, gen),
      attn_dropout({.p = o.dropout}, gen) {
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

namespace {
void check_inputs(const Variable& query, const Variable& key, const Variable& value, int64_t embed_dim, DType weights) {
  for (const Variable* v : {&query, &key, &value}) {
    const char* what = v == &query ? "query" : v == &key ? "key" : "value";
    MG_CHECK(v->defined(), StateError, "MultiheadAttention: the {} is undefined", what);
    MG_CHECK(
        v->dtype() == weights, DTypeError,
        "MultiheadAttention: the {} is {} but the weights are {} (hint: convert the input, or the module with .to())",
        what, dtype_name(v->dtype()), dtype_name(weights));
  }
  auto check3 = [&](const Variable& v, const char* what) {
    MG_CHECK(v.dim() == 3 && v.size(2) == embed_dim, ShapeError,
             "MultiheadAttention: {} must be (batch, seq, {}), got {} (hint: inputs are batch-first; "
             "unsqueeze(0) a single sequence)",
             what, embed_dim, shape_str(v.shape()));
  };
  check3(query, "query");
  check3(key, "key");
  check3(value, "value");
  MG_CHECK(key.size(0) == query.size(0) && value.size(0) == query.size(0) && value.size(1) == key.size(1), ShapeError,
           "MultiheadAttention: query {}, key {} and value {} must share the batch size, and key and "
           "value the sequence length",
           shape_str(query.shape()), shape_str(key.shape()), shape_str(value.shape()));
  MG_CHECK(key.size(1) > 0 || query.size(1) == 0, ShapeError,
           "MultiheadAttention: key and value have no tokens (shape {}), so the {} queries have nothing to attend to",
           shape_str(key.shape()), query.size(1));
}
}  // namespace

AttentionOutput MultiheadAttention::forward(const Variable& query, const Variable& key, const Variable& value,
                                            const AttentionForwardOptions& opt) const {
  check_inputs(query, key, value, embed_dim, w_q.weight.dtype());
  if (opt.cache) {
    MG_CHECK(query.impl() == key.impl() && key.impl() == value.impl(), ValueError,
             "MultiheadAttention: a KV cache serves self-attention only (query, key and value the same Variable)");
    return forward_cached(query, opt);
  }
  // The same numbers without the (B, H, Tq, Tk) tensors, when nothing asks for them (nn/attention_fused.cpp;
  // tests/test_attention.cpp:FusedAttention.MultiheadAttentionFusedEqualsComposed checks outputs and gradients).
  if (can_fuse(query, key, value, opt)) return forward_fused(query, key, value, opt);

  // 1. Project every token with W_Q, W_K, W_V: three ordinary Linear layers.
  const Variable Q = w_q(query);  // (B, Tq, E)
  const Variable K = w_k(key);    // (B, Tk, E)
  const Variable V = w_v(value);  // (B, Tk, E)
  // 2. Split heads: head h takes features [h d_k, (h+1) d_k) of each projection (a view).
  const Variable q = split_heads(Q, num_heads);  // (B, H, Tq, d_k)
  const Variable k = split_heads(K, num_heads);  // (B, H, Tk, d_k)
  const Variable v = split_heads(V, num_heads);  // (B, H, Tk, d_k)
  // 3, 4. Scores q k^T / sqrt(d_k) of every query against every key, masked (attention_scores below).
  const Variable scores = attention_scores(q, k, opt);  // (B, H, Tq, Tk)
  // 5. Softmax over the keys: each query's weights are positive and sum to 1.
  const Variable weights = softmax(scores, -1);  // (B, H, Tq, Tk)
  // 6. Mix: each query's output is the weighted average of the values.
  const Variable mixed = matmul(attn_dropout(weights), v);  // (B, H, Tq, d_k)
  // 7, 8. Merge the heads side by side again and project with W_O.
  return AttentionOutput{merge_and_project(mixed, opt.head_mask), weights, scores};
}

// ---------------------------------------------------------------- incremental decoding

std::pair<Tensor, Tensor> KVCache::append(const Tensor& k, const Tensor& v) {
  MG_CHECK(k.defined() && v.defined(), StateError, "KVCache: the keys or the values are undefined");
  MG_CHECK(k.dtype() == v.dtype(), DTypeError, "KVCache: keys are {} but values {}", dtype_name(k.dtype()),
           dtype_name(v.dtype()));
  MG_CHECK(k.dim() == 4 && k.shape() == v.shape(), ShapeError,
           "KVCache: keys and values must be (batch, heads, tokens, head_dim) of one shape, got {} and {}",
           shape_str(k.shape()), shape_str(v.shape()));
  MG_CHECK(!k_.defined() || length_ == 0 || k_.dtype() == k.dtype(), DTypeError,
           "KVCache: holds {} keys but was given {} ones (clear() it first)", dtype_name(k_.dtype()),
           dtype_name(k.dtype()));
  const int64_t B = k.size(0), H = k.size(1), T = k.size(2), d = k.size(3);
  const bool fits = k_.defined() && k_.size(0) == B && k_.size(1) == H && k_.size(3) == d && k_.dtype() == k.dtype();
  MG_CHECK(
      fits || length_ == 0, ShapeError,
      "KVCache: holds {} tokens of (batch, heads, head_dim, dtype) = ({}, {}, {}, {}); cannot append keys {} of {} "
      "(clear() it first)",
      length_, k_.size(0), k_.size(1), k_.size(3), dtype_name(k_.dtype()), shape_str(k.shape()), dtype_name(k.dtype()));
  MG_CHECK(T <= std::numeric_limits<int64_t>::max() / 2 - length_, ShapeError, "KVCache: {} + {} tokens is too many",
           length_, T);
  if (!fits || length_ + T > k_.size(2)) {
    // Grow by doubling, so appending one token at a time copies each key O(1) times on average.
    const int64_t capacity = std::max<int64_t>({16, 2 * (fits ? k_.size(2) : 0), length_ + T});
    Tensor nk = empty({B, H, capacity, d}, k.dtype()), nv = empty({B, H, capacity, d}, k.dtype());
    if (length_ > 0)
      nk.narrow(2, 0, length_).copy_(k_.narrow(2, 0, length_)),
          nv.narrow(2, 0, length_).copy_(v_.narrow(2, 0, length_));
    k_ = nk, v_ = nv;
  }
  k_.narrow(2, length_, T).copy_(k);
  v_.narrow(2, length_, T).copy_(v);
  length_ += T;
  return {k_.narrow(2, 0, length_), v_.narrow(2, 0, length_)};
}

// The same steps 1 to 8 as forward, for the new tokens x (B, Tq, E) only. Their keys and values join
// those of the earlier tokens in the cache; the queries are needed for the new tokens alone.
// New token i sits at position past + i: causally it sees keys [0, past + i].
AttentionOutput MultiheadAttention::forward_cached(const Variable& x, const AttentionForwardOptions& opt) const {
  MG_CHECK(
      !GradMode::is_enabled(), StateError,
      "MultiheadAttention: a KV cache is for inference (no gradient flows through cached keys); run under NoGradGuard");
  MG_CHECK(
      !opt.attn_mask.defined() && !opt.key_padding_mask.defined(), ValueError,
      "MultiheadAttention: with a KV cache only is_causal masks; attn_mask and key_padding_mask are not supported");
  const int64_t past = opt.cache->size(), Tq = x.size(1);
  const Variable q = split_heads(w_q(x), num_heads);  // (B, H, Tq, d_k)
  const auto [kt, vt] = opt.cache->append(split_heads(w_k(x), num_heads).data(), split_heads(w_v(x), num_heads).data());
  const Variable k(kt), v(vt);  // (B, H, past + Tq, d_k)
  // One new query sees every key when causal; with an empty cache the usual causal mask applies. The
  // fused kernel covers both; a block of new queries after earlier tokens takes the composed path.
  if (can_fuse(x, x, x, opt) && (!opt.is_causal || Tq == 1 || past == 0))
    return {
        merge_and_project(scaled_dot_product_attention(q, k, v, opt.is_causal && past == 0), opt.head_mask), {}, {}};
  Variable scores =
      matmul(q, transpose(k, -2, -1)) / std::sqrt(static_cast<double>(head_dim));  // (B, H, Tq, past + Tq)
  if (opt.is_causal) scores = masked_fill(scores, triu(ones({Tq, past + Tq}, DType::Bool), 1 + past), -INFINITY);
  const Variable weights = softmax(scores, -1);
  return AttentionOutput{merge_and_project(matmul(attn_dropout(weights), v), opt.head_mask), weights, scores};
}

Variable MultiheadAttention::merge_and_project(const Variable& heads, const Tensor& head_mask) const {
  Variable h = heads;  // (B, H, Tq, d_k)
  if (head_mask.defined()) {
    MG_CHECK(head_mask.numel() == num_heads, ShapeError, "MultiheadAttention: head_mask needs {} entries, got shape {}",
             num_heads, shape_str(head_mask.shape()));
    h = h * Variable(head_mask.to(h.dtype()).reshape({1, num_heads, 1, 1}));
  }
  return w_o(merge_heads(h));  // (B, Tq, E)
}

Variable attention_scores(const Variable& q, const Variable& k, const AttentionForwardOptions& opt) {
  MG_CHECK(q.dim() == 4 && k.dim() == 4 && q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3),
           ShapeError,
           "attention_scores: q {} and k {} must be (batch, heads, seq, head_dim) with equal batch, heads, head_dim",
           shape_str(q.shape()), shape_str(k.shape()));
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2);
  if (opt.attn_mask.defined()) {
    const Tensor& m = opt.attn_mask;
    MG_CHECK(
        m.dtype() == DType::Bool || is_floating(m.dtype()), DTypeError,
        "MultiheadAttention: attn_mask must be Bool (true = may not attend) or floating (added to the scores), got {}",
        dtype_name(m.dtype()));
    bool fits = m.dim() <= 4;  // it must broadcast to the scores' shape without changing it
    const Shape want{B, H, Tq, Tk};
    for (int64_t d = 0; fits && d < m.dim(); ++d) fits = m.size(d) == 1 || m.size(d) == want[4 - m.dim() + d];
    MG_CHECK(fits, ShapeError,
             "MultiheadAttention: attn_mask of shape {} does not broadcast to the scores' shape {} (batch, heads, "
             "queries, keys)",
             shape_str(m.shape()), shape_str(want));
  }
  // Scores: how well each query matches each key, scaled so their spread does not grow with d_k.
  Variable scores = matmul(q, transpose(k, -2, -1)) / std::sqrt(static_cast<double>(q.size(3)));  // (B, H, Tq, Tk)
  // Masks: -inf where a query may not look, which softmax turns into weight 0.
  if (opt.attn_mask.defined()) {
    if (opt.attn_mask.dtype() == DType::Bool)
      scores = masked_fill(scores, opt.attn_mask, -INFINITY);
    else
      scores = scores + Variable(opt.attn_mask.to(scores.dtype()));
  }
  if (opt.is_causal) scores = masked_fill(scores, triu(ones({Tq, Tk}, DType::Bool), 1), -INFINITY);
  if (opt.key_padding_mask.defined()) {
    MG_CHECK(opt.key_padding_mask.dtype() == DType::Bool, DTypeError,
             "MultiheadAttention: key_padding_mask must be Bool (true marks a padding key), got {}",
             dtype_name(opt.key_padding_mask.dtype()));
    MG_CHECK(opt.key_padding_mask.shape() == Shape({B, Tk}), ShapeError,
             "MultiheadAttention: key_padding_mask must be (batch, key_len) = ({}, {}), got {}", B, Tk,
             shape_str(opt.key_padding_mask.shape()));
    scores = masked_fill(scores, opt.key_padding_mask.view({B, 1, 1, Tk}), -INFINITY);
  }
  return scores;
}

Variable split_heads(const Variable& x, int64_t h) {
  MG_CHECK(x.dim() == 3 && h > 0 && x.size(2) % h == 0, ShapeError,
           "split_heads: expected (batch, seq, embed) with embed divisible by {} heads, got {}", h,
           shape_str(x.shape()));
  const int64_t B = x.size(0), T = x.size(1), E = x.size(2);
  return transpose(reshape(x, {B, T, h, E / h}), 1, 2);
}

Variable merge_heads(const Variable& x) {
  MG_CHECK(x.dim() == 4, ShapeError, "merge_heads: expected (batch, heads, seq, head_dim), got {}",
           shape_str(x.shape()));
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), d = x.size(3);
  return reshape(transpose(x, 1, 2), {B, T, H * d});
}

AttentionOutput MultiheadAttention::forward(const Variable& x, const AttentionForwardOptions& options) const {
  return forward(x, x, x, options);
}

}  // namespace mg::nn
