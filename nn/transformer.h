#pragma once
// Transformer layers built from the pieces above, with PyTorch's structure and member names
// (torch.nn.TransformerEncoderLayer / TransformerDecoderLayer), and the decoder-only GPT block.
//
// post-LN (norm_first=false, the 2017 paper):  x = norm(x + sublayer(x))
// pre-LN  (norm_first=true, GPT-2 and later):  x = x + sublayer(norm(x))
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/embedding.h"

namespace mg::nn {

/// Options shared by the encoder and decoder layers; defaults as PyTorch.
struct TransformerLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool norm_first = false;          // false: post-LN; true: pre-LN
};

/// Self-attention then an MLP, each with a residual connection and a LayerNorm.
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerLayerOptions options = {},
                          Generator& gen = default_generator());
  /// src (B, T, d_model) -> (B, T, d_model). The mask applies to the self-attention.
  Variable forward(const Variable& src, const AttentionMask& mask = {}) const;

  std::string type_name() const override { return "TransformerEncoderLayer"; }
  std::string extra_repr() const override;

  const TransformerLayerOptions options;
  MultiheadAttention self_attn;
  Linear linear1, linear2;
  Dropout dropout, dropout1, dropout2;
  LayerNorm norm1, norm2;

 private:
  Variable feed_forward(const Variable& x) const;
};

/// Masked self-attention, cross-attention over the encoder's output (`memory`), then an MLP.
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, TransformerLayerOptions options = {},
                          Generator& gen = default_generator());
  /// tgt (B, Tt, d_model), memory (B, Ts, d_model) -> (B, Tt, d_model). In the cross-attention,
  /// queries come from the decoder and keys and values from `memory`.
  Variable forward(const Variable& tgt, const Variable& memory, const AttentionMask& tgt_mask = {},
                   const AttentionMask& memory_mask = {}) const;

  std::string type_name() const override { return "TransformerDecoderLayer"; }
  std::string extra_repr() const override;

  const TransformerLayerOptions options;
  MultiheadAttention self_attn, multihead_attn;
  Linear linear1, linear2;
  Dropout dropout, dropout1, dropout2, dropout3;
  LayerNorm norm1, norm2, norm3;

 private:
  Variable feed_forward(const Variable& x) const;
};

/// The decoder-only block of GPT-2 (pre-LN, causal self-attention, GELU MLP 4x):
///   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
class GPTBlock : public Module {
 public:
  GPTBlock(int64_t d_model, int64_t nhead, double dropout = 0.0, Generator& gen = default_generator());
  /// x (B, T, d_model) -> (B, T, d_model), causal.
  Variable forward(const Variable& x) const;

  std::string type_name() const override { return "GPTBlock"; }

  LayerNorm ln_1, ln_2;
  MultiheadAttention attn;
  Linear fc, proj;  // the MLP: d -> 4d -> d
  Dropout resid_dropout;
};

/// Hyper-parameters of GPT.
struct GPTOptions {
  int64_t vocab = 65;    // tokens
  int64_t context = 64;  // longest sequence (rows of the position embedding)
  int64_t dim = 128;     // model width
  int64_t heads = 4;
  int64_t layers = 4;
  double dropout = 0.0;
};

/// A decoder-only Transformer, GPT-2's layout: token + position embeddings, `layers` GPTBlocks,
/// a final LayerNorm and an untied linear head. The model of examples/char_gpt and bench/gpt
/// (the same as ../shared/bench/torch_gpt_ref.py).
class GPT : public Module {
 public:
  explicit GPT(GPTOptions options, Generator& gen = default_generator());
  /// ids (B, T) int64, T <= context -> logits (B, T, vocab).
  Variable forward(const Tensor& ids) const;

  std::string type_name() const override { return "GPT"; }
  std::string extra_repr() const override;

  const GPTOptions options;
  Embedding tok, pos;
  ModuleList blocks;  // GPTBlock x layers
  LayerNorm ln_f;
  Linear head;
};

}  // namespace mg::nn
