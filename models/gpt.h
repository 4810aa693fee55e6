#pragma once
// GPT: the decoder-only Transformer of GPT-2, built from nn's pieces.
#include "minigrad/models/generation.h"
#include "minigrad/nn/attention.h"
#include "minigrad/nn/container.h"
#include "minigrad/nn/embedding.h"
#include "minigrad/nn/normalization.h"

#include <optional>
#include <vector>

namespace mg::models {

/// GPTBlock's optional settings.
struct GPTBlockOptions {
  /// On the attention weights and on both residual branches (training only)
  double dropout = 0.0;
  /// The MLP's GELU: the exact erf form, or GeluApproximate::Tanh (GPT-2's own "gelu_new").
  GeluApproximate gelu_approximate = GeluApproximate::None;
  /// ln_1 and ln_2.
  double layer_norm_eps = 1e-5;
};

/// The decoder-only block of GPT-2 (pre-LN, causal self-attention, GELU MLP 4x):
///   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
class GPTBlock : public nn::Callable<GPTBlock> {
 public:
  GPTBlock(int64_t d_model, int64_t nhead, GPTBlockOptions options = {}, Generator& gen = default_generator());
  /// x (B, T, d_model) -> (B, T, d_model), causal. With a cache (inference only), x holds the new
  /// tokens after the cache's ones, and their keys and values join it. With attn_weights, the
  /// attention's weights (B, nhead, T, T_keys) are stored there.
  Variable forward(const Variable& x, nn::KVCache* cache = nullptr, Variable* attn_weights = nullptr) const;

  std::string type_name() const override { return "GPTBlock"; }

  nn::LayerNorm ln_1, ln_2;
  nn::MultiheadAttention attn;
  nn::Linear fc, proj;  // the MLP: d -> 4d -> d
  nn::Dropout resid_dropout;
  const GeluApproximate gelu_approximate;
};

/// GPT's optional settings (the names of torch.nn.Transformer's arguments).
struct GPTOptions {
  /// Model width: every token's vector.
  int64_t d_model = 128;
  /// Attention heads per block (d_model / nhead features each)
  int64_t nhead = 4;
  /// GPT blocks.
  int64_t num_layers = 4;
  /// In every block (training only)
  double dropout = 0.0;
  /// The head uses the token embedding's matrix (GPT-2's weight tying: head.weight = tok.weight),
  /// one (vocab, d_model) parameter for both ends of the model, trained by both uses' gradients.
  bool tie_weights = false;
  /// The MLP's GELU in every block: the erf form, or GeluApproximate::Tanh (GPT-2's "gelu_new";
  /// the Hugging Face checkpoints need it).
  GeluApproximate gelu_approximate = GeluApproximate::None;
  /// Every LayerNorm (GPT-2's layer_norm_epsilon)
  double layer_norm_eps = 1e-5;
  /// A bias on the head (GPT-2's lm_head has none)
  bool head_bias = true;
};

/// Every block's KVCache, for incremental decoding: GPT::forward(ids, &cache) runs only the new
/// tokens through the model, their positions continuing after the tokens the cache holds.
struct GPTCache {
  std::vector<nn::KVCache> layers;  // one per block, made by the first forward that uses the cache
  /// Tokens held: the position of the next token.
  int64_t size() const { return layers.empty() ? 0 : layers.front().size(); }
  /// Forget every token.
  void clear() {
    for (nn::KVCache& l : layers) l.clear();
  }
};

/// Options of GPT::forward_outputs (transformers' output_attentions and output_hidden_states).
struct GPTForwardOptions {
  /// Return every block's attention weights (B, nhead, T, T_keys).
  bool output_attentions = false;
  /// Return the hidden states: the embeddings' sum, each block's output but the last, and ln_f of
  /// the last (num_layers + 1 of (B, T, d_model), as GPT2Model returns them).
  bool output_hidden_states = false;
  /// Incremental decoding, as forward(ids, cache).
  GPTCache* cache = nullptr;
};

/// What GPT::forward_outputs returns.
struct GPTOutput {
  Variable logits;                      // (B, T, vocab)
  std::vector<Variable> hidden_states;  // with output_hidden_states: num_layers + 1 of (B, T, d_model)
  std::vector<Variable> attentions;     // with output_attentions: num_layers of (B, nhead, T, T_keys)
};

/// A decoder-only Transformer, GPT-2's layout: token + position embeddings, num_layers GPTBlocks,
/// a final LayerNorm and a linear head (tied to the token embedding with options.tie_weights). The model of
/// examples/char_gpt and bench/gpt (the same as the PyTorch reference bench/torch_gpt_ref.py).
class GPT : public nn::Callable<GPT> {
 public:
  /// vocab_size tokens; sequences of at most `context` tokens (rows of the position embedding).
  GPT(int64_t vocab_size, int64_t context, GPTOptions options = {}, Generator& gen = default_generator());
  /// ids (B, T) int64, T <= context -> logits (B, T, vocab).
  Variable forward(const Tensor& ids) const { return forward(ids, nullptr); }
  /// Incremental decoding (inference only, under NoGradGuard): ids (B, T) are the tokens after the
  /// cache->size() tokens the cache holds, at positions cache->size() ... cache->size() + T - 1
  /// (at most context - 1); their keys and values join the cache. The logits equal those of the
  /// same rows of forward() on the whole sequence. A null cache is the plain forward.
  Variable forward(const Tensor& ids, GPTCache* cache) const;
  /// forward(), and on request what happens inside: every block's attention weights and the
  /// hidden states between blocks, as transformers' GPT-2 returns them.
  GPTOutput forward_outputs(const Tensor& ids, const GPTForwardOptions& options) const;
  /// Continue each row of ids (B, T) int64 by max_new_tokens sampled tokens -> (B, T + max_new_tokens),
  /// as nanoGPT's generate: each step takes the logits of the last position with the last `context`
  /// tokens as the window, divides them by temperature, keeps the top_k largest (all if none),
  /// and draws from their softmax with gen. Temperature 0 takes the most likely token (no draw).
  /// use_cache keeps every layer's keys and values (GPTCache), so a step runs only the new token:
  /// the same logits as re-running the window, for O(T) instead of O(T^2) work. Once the window
  /// is full it slides, every token's position changes, and each step re-runs the whole window.
  /// Runs without recording; call eval() first if the model has dropout.
  Tensor generate(const Tensor& ids, int64_t max_new_tokens, double temperature = 1.0,
                  std::optional<int64_t> top_k = std::nullopt, Generator& gen = default_generator(),
                  bool use_cache = true) const;
  /// Continue each row of ids (B, T) int64 as transformers' generate(ids, **config) does: each step's
  /// last logits through models::process_logits (repetition penalty; when sampling, temperature,
  /// top-k, top-p), then the most likely token or a draw from gen (or from a generator seeded with
  /// config.seed). A row that produces config.eos_token_id is finished and padded with
  /// config.pad_token_id (eos_token_id when unset); generation stops when every row is finished,
  /// so the result is (B, T + n) with n <= max_new_tokens. The window slides past `context` as in
  /// the other generate. Runs without recording.
  Tensor generate(const Tensor& ids, const GenerationConfig& config, Generator& gen = default_generator()) const;

  std::string type_name() const override { return "GPT"; }
  std::string extra_repr() const override;

  const int64_t vocab_size, context;
  const GPTOptions options;
  nn::Embedding tok, pos;
  nn::ModuleList blocks;  // GPTBlock x num_layers
  nn::LayerNorm ln_f;
  nn::Linear head;
};

}  // namespace mg::models
