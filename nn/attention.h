#pragma once
// nn::MultiheadAttention, with W_Q, W_K, W_V and W_O as four ordinary Linear layers.
//
// Where do W_Q, W_K, W_V come from? They are these members: `w_q`, `w_k`, `w_v`, `w_o`, each a
// Linear(embed_dim, embed_dim) (w_k and w_v narrower with grouped-query attention, below),
// initialised at random and trained by backpropagation like any other weight. There is no
// per-head matrix on top: head h simply uses columns [h*d_k, (h+1)*d_k) of each projection's
// output (d_k = embed_dim / num_heads), i.e. a slice of rows of W_Q. Query, key and value are
// separate inputs, so the same module does self-attention (all three the same sequence) and
// cross-attention (queries from the decoder, keys and values from the encoder).
//
//   1. project:      Q = w_q(query)  K = w_k(key)  V = w_v(value)        (B, T, E)
//   2. split heads:  Q_h, K_h, V_h                                        (B, H, T, d_k)
//   3. scores:       Q_h K_h^T / sqrt(d_k)                                (B, H, Tq, Tk)
//   4. mask:         -inf where a query may not look
//   5. softmax:      weights = softmax(scores, over keys)                 (B, H, Tq, Tk)
//   6. mix:          weights V_h                                          (B, H, Tq, d_k)
//   7. merge heads:  side by side again                                   (B, Tq, E)
//   8. W_O:          out = w_o(merged)                                    (B, Tq, E)
//
// Two later refinements are options, both off by default: rotary position embedding (RoPE: after
// step 2, each query and key head is rotated by an angle that grows with its position) and
// grouped-query attention (num_kv_heads < num_heads: W_K and W_V project to fewer heads, each
// shared by a group of query heads, which shrinks the KV cache by the group size).
//
// MultiheadAttention::forward (nn/attention.cpp) is written in exactly these steps. When nothing
// needs the (Tq, Tk) weights it takes a fused path (nn/attention_fused.cpp) that computes the
// same numbers without building them.
#include <array>
#include <memory>
#include <optional>

#include "minigrad/nn/layers.h"
#include "minigrad/nn/linear.h"

namespace mg::nn {

/// RotaryEmbedding's settings (torchtune's RotaryPositionalEmbeddings and Hugging Face's LLaMA
/// defaults, except the layout, which must be the one a checkpoint was trained with).
struct RotaryEmbeddingOptions {
  /// Positions 0 .. max_seq_len-1 have precomputed angles.
  int64_t max_seq_len = 4096;
  /// theta_i = base^(-2i/d)
  double base = 10000.0;
  /// Pairs (2i, 2i+1) (RoFormer, Meta's LLaMA); false: (i, i + d/2) (HF's LLaMA)
  bool interleaved = false;
};

/// Rotary position embedding (RoPE; tensor/ops/attention.h has the formula and the two layouts):
/// rotates the queries and keys of each head by angles that grow with the position, so a score
/// q_s . k_t depends on where the tokens are only through s - t. It has no parameters and saves
/// nothing: the cos and sin tables are computed from the options (in float64, and rounded to
/// float32), once per process for each (head_dim, max_seq_len, base): every layer shares them.
class RotaryEmbedding : public Callable<RotaryEmbedding> {
 public:
  /// head_dim even and positive.
  explicit RotaryEmbedding(int64_t head_dim, RotaryEmbeddingOptions options = {});
  /// x (..., T, head_dim) holding positions offset .. offset+T-1 (offset: tokens already in a KV
  /// cache) -> the same shape, rotated. A bfloat16 x is rotated with the float32 tables, in
  /// float32, and rounded once.
  Variable forward(const Variable& x, int64_t offset = 0) const;
  /// x (..., T, head_dim) whose tokens sit at position_ids: (T) int64 for every sequence alike, or
  /// (B, T) int64 with x (B, ..., T, head_dim), a row of positions per sequence (left-padded or
  /// packed batches; Hugging Face's position_ids), or (1, T) for every sequence. Positions in
  /// [0, max_seq_len).
  Variable forward(const Variable& x, const Tensor& position_ids) const;
  std::string type_name() const override { return "RotaryEmbedding"; }
  std::string extra_repr() const override;

  const int64_t head_dim;
  const RotaryEmbeddingOptions options;

 private:
  struct Tables {
    Tensor cos64, sin64, cos32, sin32;  // (max_seq_len, head_dim / 2)
  };
  std::shared_ptr<const Tables> tables_;
};

/// Constructor options; defaults as torch.nn.MultiheadAttention.
struct MultiheadAttentionOptions {
  /// Biases on w_q, w_k, w_v, w_o.
  bool bias = true;
  /// Dropout on the attention weights (training only)
  double dropout = 0.0;
  /// Use the fused kernel (scaled_dot_product_attention) when nothing needs the (T, T) weights;
  /// false always runs the composed reference path (matmul, scale, mask, softmax, matmul).
  bool fused = true;
  /// Grouped-query attention (LLaMA 2 70B, Mistral): w_k and w_v project to num_kv_heads heads
  /// (num_kv_heads * head_dim features), each shared by num_heads / num_kv_heads query heads; the
  /// KV cache shrinks by that factor. 1 is multi-query attention; 0 means num_heads (ordinary
  /// multi-head attention, as PyTorch's). Not a PyTorch option: PyTorch's functional
  /// scaled_dot_product_attention(enable_gqa) is where it has it.
  int64_t num_kv_heads = 0;
  /// Rotate queries and keys by their positions (RoPE) after splitting the heads; absent: no
  /// rotation (positions come from elsewhere, e.g. a learned position embedding).
  std::optional<RotaryEmbeddingOptions> rotary;
};

/// The keys and values one self-attention layer has already computed, kept between forward calls
/// for incremental decoding (GPT::generate). Without it, every new token re-projects the whole
/// window: token t costs O(t) projections. With it, only the new tokens are projected, and their
/// queries attend to the stored keys and values. Inference only: no gradient flows through it.
class KVCache {
 public:
  /// Tokens held so far (0 when empty).
  int64_t size() const { return length_; }
  /// Forget every token (the buffers are kept and reused).
  void clear() { length_ = 0; }
  /// Append the keys and values of new tokens, k and v (B, H, T, d), and return views of all
  /// keys and values held, (B, H, size(), d). B, H, d and the dtype must match what is held.
  std::pair<Tensor, Tensor> append(const Tensor& k, const Tensor& v);
  /// The keys held, (B, H, size(), d), as a view (undefined before the first append). With grouped
  /// heads, H is the number of key/value heads.
  Tensor keys() const { return k_.defined() ? k_.narrow(2, 0, length_) : Tensor(); }
  /// The values held, like keys().
  Tensor values() const { return v_.defined() ? v_.narrow(2, 0, length_) : Tensor(); }

 private:
  Tensor k_, v_;        // (B, H, capacity, d): rows [0, length_) along dim 2 are in use
  int64_t length_ = 0;  // tokens held
};

/// Options of one forward call, with the names of torch.nn.MultiheadAttention.forward's arguments.
struct AttentionForwardOptions {
  /// (Tq, Tk) or (B, H, Tq, Tk) or anything broadcastable to (B, H, Tq, Tk): Bool (true = may NOT
  /// attend, as in PyTorch) or floating (added to the scores).
  Tensor attn_mask;
  /// Mask the future: query i may attend to keys j <= i (decoders).
  bool is_causal = false;
  /// (B, Tk) Bool: true marks padding keys that no query may attend to.
  Tensor key_padding_mask;
  /// (H) floating: each head's output is multiplied by its entry before W_O (0 removes a head;
  /// for head-ablation experiments).
  Tensor head_mask;
  /// Return the per-head scores and weights (runs the composed path; a forward hook implies it).
  bool need_weights = false;
  /// Incremental decoding (self-attention, inference only): the keys and values of earlier tokens.
  /// The input holds only the new tokens; their keys and values are appended to the cache, and
  /// with is_causal new token i (at position cache->size() + i) sees every earlier token and the
  /// new ones up to itself. attn_mask and key_padding_mask are not supported with a cache.
  KVCache* cache = nullptr;
};

/// What a forward returns. weights and scores are there when asked for (need_weights, a forward hook, or
/// a mask or dropout the fused kernel does not handle); the fused kernel never builds them.
struct AttentionOutput {
  Variable output;   // (B, Tq, E)
  Variable weights;  // (B, H, Tq, Tk) post-softmax attention weights, per head
  Variable scores;   // (B, H, Tq, Tk) pre-softmax scores Q K^T / sqrt(d_k), masked entries -inf
};

/// What forward hooks see of an AttentionOutput: {output, weights, scores} (the last two are
/// always computed when the module has a forward hook).
inline void hook_values_into(std::vector<Variable>& out, const AttentionOutput& a) {
  out.insert(out.end(), {a.output, a.weights, a.scores});
}
/// Put hooked values back into an AttentionOutput.
inline void set_hook_values(AttentionOutput& a, const std::vector<Variable>& in, size_t& at) {
  a = {in.at(at), in.at(at + 1), in.at(at + 2)};
  at += 3;
}

/// Steps 3 and 4 for any q (B, H, Tq, d) and k (B, H, Tk, d): q k^T / sqrt(d), with the masks of
/// `options` applied (-inf where a query may not look; a floating attn_mask is added).
Variable attention_scores(const Variable& q, const Variable& k, const AttentionForwardOptions& options = {});
/// (B, H, T, d) -> (B, H * group, T, d): each key or value head repeated for the group of query
/// heads that shares it (grouped-query attention; head j is head j / group). No copy for group 1.
Variable repeat_kv_heads(const Variable& x, int64_t group);
/// (B, T, E) -> (B, H, T, E/H): head h takes features [h*d, (h+1)*d). A view, no copy.
Variable split_heads(const Variable& x, int64_t num_heads);
/// (B, H, T, d) -> (B, T, H*d): the inverse of split_heads.
Variable merge_heads(const Variable& x);

class MultiheadAttention : public Callable<MultiheadAttention> {
 public:
  /// embed_dim must divide by num_heads, and num_heads by options.num_kv_heads. Init as PyTorch:
  /// W_Q, W_K, W_V Xavier-uniform over their stacked (3E, E) matrix (with grouped heads, over the
  /// stacked (E + 2 num_kv_heads head_dim, E) one), W_O Linear's default, all biases zero.
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {},
                     Generator& gen = default_generator());
  /// query (B, Tq, E), key and value (B, Tk, E); batch first.
  AttentionOutput forward(const Variable& query, const Variable& key, const Variable& value,
                          const AttentionForwardOptions& options = {}) const;
  /// Self-attention: forward(x, x, x, options).
  AttentionOutput forward(const Variable& x, const AttentionForwardOptions& options = {}) const;
  /// m(query, key, value, {...}): forward with hooks and errors that say where (nn::call). Written
  /// out, not left to Callable's template, so that the options can be a braced {.is_causal = true}.
  AttentionOutput operator()(const Variable& query, const Variable& key, const Variable& value,
                             const AttentionForwardOptions& opt = {}) const {
    return nn::call(*this, query, key, value, opt);
  }
  /// m(x, {...}): self-attention with hooks; they see the inputs as (x, x, x).
  AttentionOutput operator()(const Variable& x, const AttentionForwardOptions& opt = {}) const {
    return nn::call(*this, x, x, x, opt);
  }

  std::string type_name() const override { return "MultiheadAttention"; }
  std::string extra_repr() const override;

  const int64_t embed_dim, num_heads, head_dim, num_kv_heads;
  const MultiheadAttentionOptions options;
  Linear w_q, w_k, w_v, w_o;  // w_k, w_v: (num_kv_heads * head_dim, embed_dim)
  Dropout attn_dropout;
  std::optional<RotaryEmbedding> rotary;  // with options.rotary (no parameters)

 private:
  // Steps 7 and 8: the head mask (if any), heads merged back to (B, Tq, E), then W_O.
  Variable merge_and_project(const Variable& heads, const Tensor& head_mask) const;
  // The fused path (nn/attention_fused.cpp): whether it applies, and the forward through it.
  bool can_fuse(const Variable& query, const Variable& key, const Variable& value,
                const AttentionForwardOptions& options) const;
  AttentionOutput forward_fused(const Variable& query, const Variable& key, const Variable& value,
                                const AttentionForwardOptions& options) const;
  // Incremental decoding with options.cache (nn/attention.cpp).
  AttentionOutput forward_cached(const Variable& x, const AttentionForwardOptions& options) const;
  // Steps 1 and 2: the projections split into heads, rotated by position when rotary is on
  // (positions offset ..); q (B, H, Tq, d), k and v (B, num_kv_heads, Tk, d).
  std::array<Variable, 3> project_heads(const Variable& query, const Variable& key, const Variable& value,
                                        int64_t offset) const;
};

}  // namespace mg::nn
