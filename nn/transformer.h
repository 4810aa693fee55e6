#pragma once
// Transformer layers built from the pieces above, with PyTorch's structure and member names
// (torch.nn.TransformerEncoderLayer / TransformerDecoderLayer), and the SwiGLU feed-forward a
// LLaMA-style decoder uses (with RMSNorm, nn/normalization.h, and rotary embeddings and grouped-query
// attention, options of nn::MultiheadAttention). The decoder-only models are in models/gpt.h.
//
// post-LN (norm_first=false, the 2017 paper):  x = norm(x + sublayer(x))
// pre-LN  (norm_first=true, GPT-2 and later):  x = x + sublayer(norm(x))
#include <memory>

#include "minigrad/nn/attention.h"
#include "minigrad/nn/container.h"
#include "minigrad/nn/linear.h"
#include "minigrad/nn/normalization.h"

namespace mg::nn {

/// The activation of a Transformer layer's MLP (PyTorch's activation="relu" or "gelu").
enum class TransformerActivation { ReLU, GELU };

/// Options shared by the encoder and decoder layers; defaults as PyTorch.
struct TransformerLayerOptions {
  /// The MLP's hidden width.
  int64_t dim_feedforward = 2048;
  /// On the attention weights, inside the MLP and on both residual branches (training only).
  double dropout = 0.1;
  /// The MLP's activation (GELU in its erf form).
  TransformerActivation activation = TransformerActivation::ReLU;
  /// Every LayerNorm's eps.
  double layer_norm_eps = 1e-5;
  /// false: post-LN, x = norm(x + sublayer(x)); true: pre-LN, x = x + sublayer(norm(x)).
  bool norm_first = false;
};

/// Self-attention then an MLP, each with a residual connection and a LayerNorm.
class TransformerEncoderLayer : public Callable<TransformerEncoderLayer> {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerLayerOptions options = {},
                          Generator& gen = default_generator());
  /// src (B, T, d_model) -> (B, T, d_model). The mask applies to the self-attention. With
  /// attn_weights, the self-attention's weights (B, nhead, T, T) are stored there (the composed
  /// attention runs, as need_weights; Hugging Face's output_attentions).
  Variable forward(const Variable& src, const AttentionForwardOptions& mask = {},
                   Variable* attn_weights = nullptr) const;
  /// forward with hooks (nn::call); the mask may be a braced {.is_causal = true}.
  Variable operator()(const Variable& src, const AttentionForwardOptions& mask = {},
                      Variable* attn_weights = nullptr) const {
    return nn::call(*this, src, mask, attn_weights);
  }

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
class TransformerDecoderLayer : public Callable<TransformerDecoderLayer> {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, TransformerLayerOptions options = {},
                          Generator& gen = default_generator());
  /// tgt (B, Tt, d_model), memory (B, Ts, d_model) -> (B, Tt, d_model). In the cross-attention,
  /// queries come from the decoder and keys and values from `memory`.
  Variable forward(const Variable& tgt, const Variable& memory, const AttentionForwardOptions& tgt_mask = {},
                   const AttentionForwardOptions& memory_mask = {}) const;
  /// forward with hooks (nn::call); the masks may be braced {...}.
  Variable operator()(const Variable& tgt, const Variable& memory, const AttentionForwardOptions& tgt_mask = {},
                      const AttentionForwardOptions& memory_mask = {}) const {
    return nn::call(*this, tgt, memory, tgt_mask, memory_mask);
  }

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

/// Encoder layers applied in turn, then an optional LayerNorm (torch.nn.TransformerEncoder).
class TransformerEncoder : public Callable<TransformerEncoder> {
 public:
  /// num_layers >= 0 layers, TransformerEncoderLayer(d_model, nhead, options), each initialised from
  /// `gen` in turn (PyTorch deep-copies one layer, so its layers start equal until something such as
  /// nn.Transformer re-initialises them); with final_norm, a LayerNorm(d_model) after the last layer
  /// (PyTorch's norm=LayerNorm(d_model), what a pre-LN stack needs).
  TransformerEncoder(int64_t d_model, int64_t nhead, int64_t num_layers, TransformerLayerOptions options = {},
                     bool final_norm = false, Generator& gen = default_generator());
  /// src (B, T, d_model) -> (B, T, d_model): x = layer_{N-1}(...layer_0(src)), then norm. The mask
  /// (and a head_mask) applies to every layer's self-attention alike.
  Variable forward(const Variable& src, const AttentionForwardOptions& mask = {}) const;
  /// forward with hooks (nn::call).
  Variable operator()(const Variable& src, const AttentionForwardOptions& mask = {}) const {
    return nn::call(*this, src, mask);
  }
  /// Layer i (an IndexError out of range).
  TransformerEncoderLayer& layer(size_t i) const { return layers.at<TransformerEncoderLayer>(i); }

  std::string type_name() const override { return "TransformerEncoder"; }
  std::string extra_repr() const override;

  /// "layers.0", "layers.1", ... as in PyTorch's state_dict.
  ModuleList layers;
  /// The final LayerNorm ("norm"), null without one.
  std::shared_ptr<LayerNorm> norm;
};

/// Decoder layers applied in turn, every one reading the same memory, then an optional LayerNorm
/// (torch.nn.TransformerDecoder).
class TransformerDecoder : public Callable<TransformerDecoder> {
 public:
  /// num_layers >= 0 layers, TransformerDecoderLayer(d_model, nhead, options), each initialised from
  /// `gen` in turn; with final_norm, a LayerNorm(d_model) after the last layer.
  TransformerDecoder(int64_t d_model, int64_t nhead, int64_t num_layers, TransformerLayerOptions options = {},
                     bool final_norm = false, Generator& gen = default_generator());
  /// tgt (B, Tt, d_model), memory (B, Ts, d_model) -> (B, Tt, d_model). Each layer's cross-attention
  /// takes its keys and values from `memory` itself, the encoder's final output: decoder layer 0 does
  /// not read encoder layer 0's output. The masks (and a head_mask) apply to every layer alike.
  Variable forward(const Variable& tgt, const Variable& memory, const AttentionForwardOptions& tgt_mask = {},
                   const AttentionForwardOptions& memory_mask = {}) const;
  /// forward with hooks (nn::call); the masks may be braced {...}.
  Variable operator()(const Variable& tgt, const Variable& memory, const AttentionForwardOptions& tgt_mask = {},
                      const AttentionForwardOptions& memory_mask = {}) const {
    return nn::call(*this, tgt, memory, tgt_mask, memory_mask);
  }
  /// Layer i (an IndexError out of range).
  TransformerDecoderLayer& layer(size_t i) const { return layers.at<TransformerDecoderLayer>(i); }

  std::string type_name() const override { return "TransformerDecoder"; }
  std::string extra_repr() const override;

  /// "layers.0", "layers.1", ... as in PyTorch's state_dict.
  ModuleList layers;
  /// The final LayerNorm ("norm"), null without one.
  std::shared_ptr<LayerNorm> norm;
};

/// SwiGLU's optional settings.
struct SwiGLUOptions {
  /// Biases on the three projections (LLaMA has none)
  bool bias = false;
};

/// The SwiGLU feed-forward (Shazeer 2020, "GLU Variants Improve Transformer"; LLaMA's MLP):
///   out = down_proj( silu(gate_proj(x)) * up_proj(x) )
/// The gate's SiLU decides, feature by feature, how much of the "up" projection passes. Three
/// matrices instead of GPT-2's two, so LLaMA shrinks the hidden width to about 8/3 d_model (from
/// 4 d_model) to keep the parameter count. Names as Hugging Face's LlamaMLP (Meta's code calls
/// them w1 = gate_proj, w3 = up_proj, w2 = down_proj).
class SwiGLU : public Callable<SwiGLU> {
 public:
  /// in_features -> hidden_features -> in_features; each Linear initialised as PyTorch's.
  SwiGLU(int64_t in_features, int64_t hidden_features, SwiGLUOptions options = {},
         Generator& gen = default_generator());
  /// x (..., in_features) -> (..., in_features).
  Variable forward(const Variable& x) const;
  std::string type_name() const override { return "SwiGLU"; }

  Linear gate_proj, up_proj, down_proj;
};

}  // namespace mg::nn
