#include "minigrad/nn/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "minigrad/autograd/autocast.h"
#include "minigrad/nn/init.h"

namespace mg::nn {

// ---------------------------------------------------------------- rotary position embedding

RotaryEmbedding::RotaryEmbedding(int64_t d, RotaryEmbeddingOptions o) : head_dim(d), options(o) {
  const OpScope scope("RotaryEmbedding");  // rotary_tables' and the allocator's errors name the module
  MG_CHECK(d > 0 && d % 2 == 0, ValueError, "RotaryEmbedding: head_dim must be even and positive, got {}", d);
  MG_CHECK(o.max_seq_len > 0, ValueError, "RotaryEmbedding: max_seq_len must be positive, got {}", o.max_seq_len);
  MG_CHECK(std::isfinite(o.base) && o.base > 0, ValueError, "RotaryEmbedding: base must be finite and positive, got {}",
           o.base);
  // One set of tables per (head_dim, max_seq_len, base) while any layer uses it.
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, double>, std::weak_ptr<const Tables>> shared;
  const std::lock_guard<std::mutex> lock(mutex);
  std::weak_ptr<const Tables>& slot = shared[{d, o.max_seq_len, o.base}];
  tables_ = slot.lock();
  if (!tables_) {
    auto t = std::make_shared<Tables>();
    std::tie(t->cos64, t->sin64) = rotary_tables(d, o.max_seq_len, o.base, DType::Float64);
    t->cos32 = t->cos64.to(DType::Float32), t->sin32 = t->sin64.to(DType::Float32);
    tables_ = t;
    slot = tables_;
  }
}

Variable RotaryEmbedding::forward(const Variable& x, int64_t offset) const {
  MG_CHECK(x.defined(), StateError, "RotaryEmbedding: the input is undefined");
  MG_CHECK(x.dim() >= 2 && x.size(-1) == head_dim, ShapeError,
           "RotaryEmbedding: expected an input (..., seq, {}), got {}", head_dim, shape_str(x.shape()));
  MG_CHECK(is_floating_point(x.dtype()), DTypeError,
           "RotaryEmbedding: expected a float32, float64 or bfloat16 input, got {}", dtype_name(x.dtype()));
  const int64_t T = x.size(-2);
  // (offset + T is not computed: with an offset near INT64_MAX it would overflow)
  MG_CHECK(offset >= 0 && offset <= options.max_seq_len - T, IndexError,
           "RotaryEmbedding: {} positions from offset {} do not fit in 0 to {} (max_seq_len {}; raise it in "
           "RotaryEmbeddingOptions)",
           T, offset, options.max_seq_len - 1, options.max_seq_len);
  const bool f64 = x.dtype() == DType::Float64;
  const Tensor& c = f64 ? tables_->cos64 : tables_->cos32;
  const Tensor& s = f64 ? tables_->sin64 : tables_->sin32;
  return rotary_embedding(x, c.narrow(0, offset, T), s.narrow(0, offset, T), options.interleaved);
}

Variable RotaryEmbedding::forward(const Variable& x, const Tensor& position_ids) const {
  MG_CHECK(x.defined() && position_ids.defined(), StateError,
           "RotaryEmbedding: the input or position_ids is undefined");
  MG_CHECK(x.dim() >= 2 && x.size(-1) == head_dim, ShapeError,
           "RotaryEmbedding: expected an input (..., seq, {}), got {}", head_dim, shape_str(x.shape()));
  MG_CHECK(is_floating_point(x.dtype()), DTypeError,
           "RotaryEmbedding: expected a float32, float64 or bfloat16 input, got {}", dtype_name(x.dtype()));
  const int64_t T = x.size(-2);
  MG_CHECK(position_ids.dtype() == DType::Int64, DTypeError, "RotaryEmbedding: position_ids must be int64, got {}",
           dtype_name(position_ids.dtype()));
  const bool per_row = position_ids.dim() == 2;
  MG_CHECK((position_ids.dim() == 1 && position_ids.size(0) == T) ||
               (per_row && position_ids.size(1) == T && x.dim() >= 3 &&
                (position_ids.size(0) == x.size(0) || position_ids.size(0) == 1)),
           ShapeError,
           "RotaryEmbedding: position_ids must be (seq) = ({}) or (batch, seq) = ({}, {}) for the input {}, got {}", T,
           x.dim() >= 3 ? x.size(0) : 1, T, shape_str(x.shape()), shape_str(position_ids.shape()));
  if (position_ids.numel() > 0) {
    const int64_t lo = min(position_ids).item<int64_t>(), hi = max(position_ids).item<int64_t>();
    MG_CHECK(lo >= 0 && hi < options.max_seq_len, IndexError,
             "RotaryEmbedding: position_ids from {} to {} do not fit in 0 to {} (max_seq_len {}; raise it in "
             "RotaryEmbeddingOptions)",
             lo, hi, options.max_seq_len - 1, options.max_seq_len);
  }
  const bool f64 = x.dtype() == DType::Float64;
  const Tensor& c = f64 ? tables_->cos64 : tables_->cos32;
  const Tensor& s = f64 ? tables_->sin64 : tables_->sin32;
  // each token's row of the tables: (T, d/2), or (B, 1, ..., T, d/2) to broadcast over x's middle dims
  const Tensor flat = position_ids.contiguous().reshape({position_ids.numel()});
  Shape rows = position_ids.shape();
  if (per_row) rows.insert(rows.begin() + 1, static_cast<size_t>(x.dim() - 3), 1);
  rows.push_back(head_dim / 2);
  return rotary_embedding(x, index_select(c, 0, flat).reshape(rows), index_select(s, 0, flat).reshape(rows),
                          options.interleaved);
}

std::string RotaryEmbedding::extra_repr() const {
  return fmt::format("head_dim={}, max_seq_len={}, base={}, interleaved={}", head_dim, options.max_seq_len,
                     options.base, options.interleaved ? "True" : "False");
}

// ---------------------------------------------------------------- multi-head attention

namespace {
// embed_dim, once checked: before any member layer is built, so the error names this module.
int64_t checked_embed_dim(int64_t e, int64_t h, int64_t kv) {
  MG_CHECK(h > 0 && e > 0 && e % h == 0, ValueError,
           "MultiheadAttention: embed_dim {} must be positive and divisible by num_heads {}", e, h);
  MG_CHECK(kv >= 0 && (kv == 0 || h % kv == 0), ValueError,
           "MultiheadAttention: num_kv_heads {} must divide num_heads {} (each key/value head serves a group of "
           "query heads)",
           kv, h);
  return e;
}
}  // namespace

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, MultiheadAttentionOptions o, Generator& gen)
    : embed_dim(checked_embed_dim(e, h, o.num_kv_heads)),
      num_heads(h),
      head_dim(e / h),
      num_kv_heads(o.num_kv_heads > 0 ? o.num_kv_heads : h),
      options(o),
      w_q(e, e, {.bias = o.bias}, gen),
      w_k(e, num_kv_heads * head_dim, {.bias = o.bias}, gen),
      w_v(e, num_kv_heads * head_dim, {.bias = o.bias}, gen),
      w_o(e, e, {.bias = o.bias}, gen),
      attn_dropout({.p = o.dropout}, gen) {
  register_module("w_q", w_q);
  register_module("w_k", w_k);
  register_module("w_v", w_v);
  register_module("w_o", w_o);
  register_module("attn_dropout", attn_dropout);
  if (o.rotary) register_module("rotary", rotary.emplace(head_dim, *o.rotary));
  // PyTorch draws one Xavier-uniform (3E, E) in_proj_weight: the bound uses fan_out = 3E (with
  // grouped heads, the stacked matrix has E + 2 kv rows).
  const int64_t kv = num_kv_heads * head_dim;
  const double b = std::sqrt(6.0 / static_cast<double>(e + e + 2 * kv));
  for (Linear* l : {&w_q, &w_k, &w_v}) {
    init::uniform_(l->weight, -b, b, gen);
    if (l->bias.defined()) init::zeros_(l->bias);
  }
  if (w_o.bias.defined()) init::zeros_(w_o.bias);
}

std::string MultiheadAttention::extra_repr() const {
  std::string r = fmt::format("embed_dim={}, num_heads={}, head_dim={}", embed_dim, num_heads, head_dim);
  if (num_kv_heads != num_heads) r += fmt::format(", num_kv_heads={}", num_kv_heads);
  return r;
}

std::array<Variable, 3> MultiheadAttention::project_heads(const Variable& query, const Variable& key,
                                                          const Variable& value, int64_t offset) const {
  Variable q = split_heads(w_q(query), num_heads);   // (B, H, Tq, d_k)
  Variable k = split_heads(w_k(key), num_kv_heads);  // (B, H_kv, Tk, d_k)
  Variable v = split_heads(w_v(value), num_kv_heads);
  if (rotary) q = (*rotary)(q, offset), k = (*rotary)(k, offset);
  return {q, k, v};
}

namespace {
void check_inputs(const Variable& query, const Variable& key, const Variable& value, int64_t embed_dim, DType weights) {
  for (const Variable* v : {&query, &key, &value}) {
    const char* what = v == &query ? "query" : v == &key ? "key" : "value";
    MG_CHECK(v->defined(), StateError, "MultiheadAttention: the {} is undefined", what);
    // (under autocast a bfloat16 input, a product's output with AutocastOptions::bfloat16_outputs,
    // meets float32 weights: the projections read it as they read their bfloat16 copies)
    const bool autocast_input =
        AutocastMode::is_enabled() && v->dtype() == DType::BFloat16 && weights == DType::Float32;
    MG_CHECK(
        v->dtype() == weights || autocast_input, DTypeError,
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
  // 2. Split heads: head h takes features [h d_k, (h+1) d_k) of each projection (a view).
  //    With rotary, queries and keys are then rotated by their positions (project_heads).
  auto [q, k, v] = project_heads(query, key, value, 0);  // (B, H, Tq, d_k), (B, H_kv, Tk, d_k) x 2
  //    With grouped heads, each key/value head serves num_heads / num_kv_heads query heads.
  k = repeat_kv_heads(k, num_heads / num_kv_heads);  // (B, H, Tk, d_k)
  v = repeat_kv_heads(v, num_heads / num_kv_heads);
  q.set_name("Q"), k.set_name("K"), v.set_name("V");  // what to_dot calls these nodes
  // 3, 4. Scores q k^T / sqrt(d_k) of every query against every key, masked (attention_scores below).
  Variable scores = attention_scores(q, k, opt);  // (B, H, Tq, Tk)
  scores.set_name("scores");
  // 5. Softmax over the keys: each query's weights are positive and sum to 1.
  Variable weights = softmax(scores, -1);  // (B, H, Tq, Tk)
  weights.set_name("weights");
  // 6. Mix: each query's output is the weighted average of the values.
  const Variable mixed = matmul(attn_dropout(weights), v);  // (B, H, Tq, d_k)
  // 7, 8. Merge the heads side by side again and project with W_O.
  return AttentionOutput{merge_and_project(mixed, opt.head_mask), weights, scores};
}

// ---------------------------------------------------------------- incremental decoding

std::pair<Tensor, Tensor> KVCache::append(const Tensor& k, const Tensor& v) {
  const OpScope scope("KVCache");  // the allocator's errors name the cache
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
  const auto [q, k_new, v_new] = project_heads(x, x, x, past);  // the new tokens at positions past ..
  const auto [kt, vt] = opt.cache->append(k_new.data(), v_new.data());
  const Variable k(kt), v(vt);  // (B, H_kv, past + Tq, d_k): the cache holds the shared heads only
  const int64_t group = num_heads / num_kv_heads;
  // One new query sees every key when causal; with an empty cache the usual causal mask applies. The
  // fused kernel covers both; a block of new queries after earlier tokens takes the composed path.
  if (can_fuse(x, x, x, opt) && (!opt.is_causal || Tq == 1 || past == 0))
    return {merge_and_project(scaled_dot_product_attention(
                                  q, k, v, {.is_causal = opt.is_causal && past == 0, .enable_gqa = group > 1}),
                              opt.head_mask),
            {},
            {}};
  Variable scores = matmul(q, transpose(repeat_kv_heads(k, group), -2, -1)) / std::sqrt(static_cast<double>(head_dim));
  if (opt.is_causal) scores = masked_fill(scores, triu(ones({Tq, past + Tq}, DType::Bool), 1 + past), -INFINITY);
  const Variable weights = softmax(scores, -1);  // (B, H, Tq, past + Tq)
  return AttentionOutput{merge_and_project(matmul(attn_dropout(weights), repeat_kv_heads(v, group)), opt.head_mask),
                         weights, scores};
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
           "attention_scores: q {} and k {} must be (batch, heads, seq, head_dim) with equal batch, heads, head_dim{}",
           shape_str(q.shape()), shape_str(k.shape()),
           q.dim() == 4 && k.dim() == 4 && k.size(1) > 0 && q.size(1) > k.size(1) && q.size(1) % k.size(1) == 0
               ? fmt::format("; {} query heads and {} key heads is grouped-query attention: repeat the key and value "
                             "heads first, repeat_kv_heads(k, {})",
                             q.size(1), k.size(1), q.size(1) / k.size(1))
               : "");
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

Variable repeat_kv_heads(const Variable& x, int64_t group) {
  MG_CHECK(x.dim() == 4 && group > 0, ShapeError,
           "repeat_kv_heads: expected (batch, heads, seq, head_dim) and a group of at least 1, got {} and {}",
           shape_str(x.shape()), group);
  if (group == 1) return x;
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), d = x.size(3);
  return reshape(expand(unsqueeze(x, 2), {B, H, group, T, d}), {B, H * group, T, d});
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
