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
/// (the same as the PyTorch reference bench/torch_gpt_ref.py).
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
