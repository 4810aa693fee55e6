#pragma once
// GPT: the decoder-only Transformer of GPT-2, built from nn's pieces.
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/embedding.h"

namespace mg::nn {

/// GPTBlock's optional settings.
struct GPTBlockOptions {
  double dropout = 0.0;  // on the attention weights and on both residual branches (training only)
};

/// The decoder-only block of GPT-2 (pre-LN, causal self-attention, GELU MLP 4x):
///   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
class GPTBlock : public Module {
 public:
  GPTBlock(int64_t d_model, int64_t nhead, GPTBlockOptions options = {}, Generator& gen = default_generator());
  /// x (B, T, d_model) -> (B, T, d_model), causal.
  Variable forward(const Variable& x) const;

  std::string type_name() const override { return "GPTBlock"; }

  LayerNorm ln_1, ln_2;
  MultiheadAttention attn;
  Linear fc, proj;  // the MLP: d -> 4d -> d
  Dropout resid_dropout;
};

/// GPT's optional settings (the names of torch.nn.Transformer's arguments).
struct GPTOptions {
  int64_t d_model = 128;   // model width: every token's vector
  int64_t nhead = 4;       // attention heads per block (d_model / nhead features each)
  int64_t num_layers = 4;  // GPT blocks
  double dropout = 0.0;    // in every block (training only)
};

/// A decoder-only Transformer, GPT-2's layout: token + position embeddings, num_layers GPTBlocks,
/// a final LayerNorm and an untied linear head. The model of examples/char_gpt and bench/gpt
/// (the same as the PyTorch reference bench/torch_gpt_ref.py).
class GPT : public Module {
 public:
  /// vocab_size tokens; sequences of at most `context` tokens (rows of the position embedding).
  GPT(int64_t vocab_size, int64_t context, GPTOptions options = {}, Generator& gen = default_generator());
  /// ids (B, T) int64, T <= context -> logits (B, T, vocab).
  Variable forward(const Tensor& ids) const;

  std::string type_name() const override { return "GPT"; }
  std::string extra_repr() const override;

  const int64_t vocab_size, context;
  const GPTOptions options;
  Embedding tok, pos;
  ModuleList blocks;  // GPTBlock x num_layers
  LayerNorm ln_f;
  Linear head;
};

}  // namespace mg::nn
