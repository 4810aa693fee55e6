#include "minigrad/nn/transformer.h"

namespace mg::nn {
namespace {
Variable activate(const Variable& x, TransformerActivation a) {
  return a == TransformerActivation::GELU ? gelu(x) : relu(x);
}
// The position-wise MLP both layers end with: dropout_out(linear2(dropout(act(linear1(x))))).
Variable mlp(const Linear& linear1, const Dropout& dropout, const Linear& linear2, const Dropout& dropout_out,
             TransformerActivation activation, const Variable& x) {
  return dropout_out(linear2(dropout(activate(linear1(x), activation))));
}
// The constructor arguments both layers show in a summary.
std::string layer_repr(const MultiheadAttention& self_attn, const TransformerLayerOptions& o) {
  return fmt::format("d_model={}, nhead={}, dim_feedforward={}, activation={}, norm_first={}", self_attn.embed_dim,
                     self_attn.num_heads, o.dim_feedforward,
                     o.activation == TransformerActivation::GELU ? "gelu" : "relu", o.norm_first);
}
}  // namespace

// ---------------------------------------------------------------- encoder

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d, int64_t h, TransformerLayerOptions o, Generator& gen)
    : options(o),
      self_attn(d, h, {.dropout = o.dropout}, gen),
      linear1(d, o.dim_feedforward, {}, gen),
      linear2(o.dim_feedforward, d, {}, gen),
      dropout({.p = o.dropout}, gen),
      dropout1({.p = o.dropout}, gen),
      dropout2({.p = o.dropout}, gen),
      norm1({d}, {.eps = o.layer_norm_eps}),
      norm2({d}, {.eps = o.layer_norm_eps}) {
  register_module("self_attn", self_attn);
  register_module("linear1", linear1);
  register_module("dropout", dropout);
  register_module("linear2", linear2);
  register_module("norm1", norm1);
  register_module("norm2", norm2);
  register_module("dropout1", dropout1);
  register_module("dropout2", dropout2);
}

Variable TransformerEncoderLayer::feed_forward(const Variable& x) const {
  return mlp(linear1, dropout, linear2, dropout2, options.activation, x);
}

Variable TransformerEncoderLayer::forward(const Variable& src, const AttentionForwardOptions& mask,
                                          Variable* attn_weights) const {
  auto sa = [&](const Variable& x) {
    if (!attn_weights) return dropout1(self_attn(x, x, x, mask).output);
    AttentionForwardOptions with_weights = mask;
    with_weights.need_weights = true;
    AttentionOutput a = self_attn(x, x, x, with_weights);
    *attn_weights = a.weights;
    return dropout1(a.output);
  };
  if (options.norm_first) {
    Variable x = src + sa(norm1(src));
    return x + feed_forward(norm2(x));
  }
  Variable x = norm1(src + sa(src));
  return norm2(x + feed_forward(x));
}

std::string TransformerEncoderLayer::extra_repr() const { return layer_repr(self_attn, options); }

// ---------------------------------------------------------------- decoder

TransformerDecoderLayer::TransformerDecoderLayer(int64_t d, int64_t h, TransformerLayerOptions o, Generator& gen)
    : options(o),
      self_attn(d, h, {.dropout = o.dropout}, gen),
      multihead_attn(d, h, {.dropout = o.dropout}, gen),
      linear1(d, o.dim_feedforward, {}, gen),
      linear2(o.dim_feedforward, d, {}, gen),
      dropout({.p = o.dropout}, gen),
      dropout1({.p = o.dropout}, gen),
      dropout2({.p = o.dropout}, gen),
      dropout3({.p = o.dropout}, gen),
      norm1({d}, {.eps = o.layer_norm_eps}),
      norm2({d}, {.eps = o.layer_norm_eps}),
      norm3({d}, {.eps = o.layer_norm_eps}) {
  register_module("self_attn", self_attn);
  register_module("multihead_attn", multihead_attn);
  register_module("linear1", linear1);
  register_module("dropout", dropout);
  register_module("linear2", linear2);
  register_module("norm1", norm1);
  register_module("norm2", norm2);
  register_module("norm3", norm3);
  register_module("dropout1", dropout1);
  register_module("dropout2", dropout2);
  register_module("dropout3", dropout3);
}

Variable TransformerDecoderLayer::feed_forward(const Variable& x) const {
  return mlp(linear1, dropout, linear2, dropout3, options.activation, x);
}

Variable TransformerDecoderLayer::forward(const Variable& tgt, const Variable& memory,
                                          const AttentionForwardOptions& tgt_mask,
                                          const AttentionForwardOptions& memory_mask) const {
  auto sa = [&](const Variable& x) { return dropout1(self_attn(x, x, x, tgt_mask).output); };
  // Cross-attention: queries from the decoder stream x, keys and values from the encoder's memory.
  auto ca = [&](const Variable& x) { return dropout2(multihead_attn(x, memory, memory, memory_mask).output); };
  if (options.norm_first) {
    Variable x = tgt + sa(norm1(tgt));
    x = x + ca(norm2(x));
    return x + feed_forward(norm3(x));
  }
  Variable x = norm1(tgt + sa(tgt));
  x = norm2(x + ca(x));
  return norm3(x + feed_forward(x));
}

std::string TransformerDecoderLayer::extra_repr() const { return layer_repr(self_attn, options); }

// ---------------------------------------------------------------- stacks

namespace {
void check_layers(const char* op, int64_t num_layers) {
  MG_CHECK(num_layers >= 0, ValueError, "{}: num_layers must be >= 0, got {}", op, num_layers);
}
std::string stack_repr(size_t num_layers, const std::shared_ptr<LayerNorm>& norm) {
  return fmt::format("num_layers={}, norm={}", num_layers, norm ? "LayerNorm" : "None");
}
}  // namespace

TransformerEncoder::TransformerEncoder(int64_t d, int64_t h, int64_t num_layers, TransformerLayerOptions o,
                                       bool final_norm, Generator& gen) {
  check_layers("TransformerEncoder", num_layers);
  for (int64_t i = 0; i < num_layers; ++i) layers.emplace_back<TransformerEncoderLayer>(d, h, o, gen);
  register_module("layers", layers);
  if (final_norm) {
    norm = std::make_shared<LayerNorm>(Shape{d}, LayerNormOptions{.eps = o.layer_norm_eps});
    register_module("norm", *norm);
  }
}

Variable TransformerEncoder::forward(const Variable& src, const AttentionForwardOptions& mask) const {
  Variable x = src;
  for (size_t i = 0; i < layers.size(); ++i) x = layer(i)(x, mask);
  return norm ? (*norm)(x) : x;
}

std::string TransformerEncoder::extra_repr() const { return stack_repr(layers.size(), norm); }

TransformerDecoder::TransformerDecoder(int64_t d, int64_t h, int64_t num_layers, TransformerLayerOptions o,
                                       bool final_norm, Generator& gen) {
  check_layers("TransformerDecoder", num_layers);
  for (int64_t i = 0; i < num_layers; ++i) layers.emplace_back<TransformerDecoderLayer>(d, h, o, gen);
  register_module("layers", layers);
  if (final_norm) {
    norm = std::make_shared<LayerNorm>(Shape{d}, LayerNormOptions{.eps = o.layer_norm_eps});
    register_module("norm", *norm);
  }
}

Variable TransformerDecoder::forward(const Variable& tgt, const Variable& memory,
                                     const AttentionForwardOptions& tgt_mask,
                                     const AttentionForwardOptions& memory_mask) const {
  Variable x = tgt;
  for (size_t i = 0; i < layers.size(); ++i) x = layer(i)(x, memory, tgt_mask, memory_mask);  // the same memory
  return norm ? (*norm)(x) : x;
}

std::string TransformerDecoder::extra_repr() const { return stack_repr(layers.size(), norm); }

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
// stacking is recorded, so each weight still gets its own gradient); then silu(gate) * up is one
// op, mg::swiglu, with no narrowed copies. A forward hook on either needs it called as a module.
Variable SwiGLU::forward(const Variable& x) const {
  if (gate_proj.has_forward_hooks() || up_proj.has_forward_hooks()) return down_proj(silu(gate_proj(x)) * up_proj(x));
  const Variable w = concat({gate_proj.weight, up_proj.weight}, 0);  // (2 hidden, d)
  const Variable b = gate_proj.bias.defined() ? concat({gate_proj.bias, up_proj.bias}, 0) : Variable();
  Variable both;
  {
    ForwardScope scope(gate_proj);  // an error inside names the layer, as gate_proj(x) would
    both = linear(x, w, b);         // (..., 2 hidden)
  }
  return down_proj(swiglu(both));  // silu(gate) * up in one pass, forward and backward
}

}  // namespace mg::nn
