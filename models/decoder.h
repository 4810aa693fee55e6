#pragma once
// A decoder-only Transformer whose parts choose between GPT-2's and LLaMA's: LayerNorm or RMSNorm,
// learned positions or rotary embeddings, a GELU MLP or SwiGLU, biases or none, a key/value head per
// query head or grouped-query attention. With every LLaMA choice it is the LLaMA-style decoder
// (examples/llama_style trains it beside the GPT-2 choices and each choice undone alone); models/gpt.h
// is GPT-2 itself, with Hugging Face's names.
#include <optional>
#include <vector>

#include "minigrad/nn/attention.h"
#include "minigrad/nn/container.h"
#include "minigrad/nn/embedding.h"
#include "minigrad/nn/layers.h"
#include "minigrad/nn/normalization.h"
#include "minigrad/nn/transformer.h"

namespace mg::models {

/// A Decoder's sizes and its choices between GPT-2's parts and LLaMA's (the defaults are LLaMA's).
struct DecoderOptions {
  /// Model width: every token's vector.
  int64_t d_model = 128;
  /// Query heads per block.
  int64_t nhead = 4;
  /// Blocks.
  int64_t num_layers = 4;
  /// The longest sequence (rows of the learned positions, or of the rotary tables).
  int64_t context = 128;
  /// The MLP's hidden width (SwiGLU's gate and up projections each have this many outputs).
  int64_t hidden = 512;
  /// RMSNorm (LLaMA); false: LayerNorm (GPT-2).
  bool rms_norm = true;
  /// Rotary embeddings in attention (LLaMA); false: learned position vectors added to the tokens.
  bool rope = true;
  /// SwiGLU MLP (LLaMA); false: Linear, GELU, Linear.
  bool swiglu = true;
  /// Biases on every Linear (GPT-2); LLaMA has none.
  bool bias = false;
  /// Half as many key/value heads as query heads (grouped-query attention); false: one each.
  bool grouped = true;
  /// The head uses the token embedding's matrix.
  bool tie_weights = false;
};

/// One pre-norm block: x = x + attn(norm_1(x)); x = x + mlp(norm_2(x)). The norms and the MLP are
/// whichever the options pick, each held in a Sequential of one (or three) modules.
class DecoderBlock : public nn::Callable<DecoderBlock> {
 public:
  /// The block for `options`, its weights drawn from `gen`.
  DecoderBlock(const DecoderOptions& options, Generator& gen = default_generator());
  /// x (B, T, d_model) -> (B, T, d_model), causal; with a cache, x holds the new tokens only.
  Variable forward(const Variable& x, nn::KVCache* cache = nullptr) const;
  std::string type_name() const override { return "DecoderBlock"; }

  nn::MultiheadAttention attn;
  nn::Sequential norm_1, norm_2, mlp;
};

/// Token embedding (+ learned positions without rotary), num_layers DecoderBlocks, a final norm and
/// the head.
class Decoder : public nn::Callable<Decoder> {
 public:
  /// vocab tokens; the weights drawn from `gen` in the order of the members.
  Decoder(int64_t vocab, const DecoderOptions& options, Generator& gen = default_generator());
  /// ids (B, T) -> logits (B, T, vocab). With caches (one per block, inference only), ids are the
  /// tokens after the ones the caches hold.
  Variable forward(const Tensor& ids, std::vector<nn::KVCache>* caches = nullptr) const;
  std::string type_name() const override { return "Decoder"; }

  nn::Embedding tok;
  std::optional<nn::Embedding> pos;
  nn::ModuleList blocks;  // DecoderBlock x num_layers
  nn::Sequential norm_f;
  nn::Linear head;
};

}  // namespace mg::models
