#include "minigrad/nn/llama.h"

namespace mg::nn {

SwiGLU::SwiGLU(int64_t in, int64_t hidden, SwiGLUOptions o, Generator& gen)
    : gate_proj(in, hidden, {.bias = o.bias}, gen),
      up_proj(in, hidden, {.bias = o.bias}, gen),
      down_proj(hidden, in, {.bias = o.bias}, gen) {
  register_module("gate_proj", gate_proj);
  register_module("up_proj", up_proj);
  register_module("down_proj", down_proj);
}

// x (..., d) -> gate, up (..., hidden) -> silu(gate) * up -> (..., d)
// gate_proj and up_proj read the same x, so both run as one product over their stacked weights,
// x [W_gate; W_up]^T = [x W_gate^T | x W_up^T] (one GEMM forward, one for dx backward; the
// stacking is recorded, so each weight still gets its own gradient). A forward hook on either
// needs it called as a module.
Variable SwiGLU::forward(const Variable& x) const {
  if (gate_proj.has_forward_hooks() || up_proj.has_forward_hooks()) return down_proj(silu(gate_proj(x)) * up_proj(x));
  const Variable w = concat({gate_proj.weight, up_proj.weight}, 0);  // (2 hidden, d)
  const Variable b = gate_proj.bias.defined() ? concat({gate_proj.bias, up_proj.bias}, 0) : Variable();
  Variable both;
  {
    ForwardScope scope(gate_proj);  // an error inside names the layer, as gate_proj(x) would
    both = linear(x, w, b);         // (..., 2 hidden)
  }
  const int64_t h = gate_proj.out_features;
  return down_proj(silu(both.narrow(-1, 0, h)) * both.narrow(-1, h, h));
}

}  // namespace mg::nn
