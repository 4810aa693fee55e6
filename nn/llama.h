#pragma once
// The parts a LLaMA-style decoder adds to GPT-2's: the SwiGLU feed-forward here, with RMSNorm
// (nn/normalization.h), rotary position embedding and grouped-query attention (options of
// nn::MultiheadAttention, nn/attention.h).
#include "minigrad/nn/linear.h"

namespace mg::nn {

/// SwiGLU's optional settings.
struct SwiGLUOptions {
  bool bias = false;  // biases on the three projections (LLaMA has none)
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
