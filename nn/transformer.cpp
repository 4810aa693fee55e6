#include "nn/transformer.h"

namespace mg::nn {
namespace {
Variable activate(const Variable& x, const std::string& name) { return name == "gelu" ? gelu(x) : relu(x); }
// The position-wise MLP both layers end with: dropout_out(linear2(dropout(act(linear1(x))))).
Variable mlp(const Linear& linear1, const Dropout& dropout, const Linear& linear2, const Dropout& dropout_out,
             const std::string& activation, const Variable& x) {
  return dropout_out.forward(linear2.forward(dropout.forward(activate(linear1.forward(x), activation))));
}
void check_activation(const std::string& a) {
  MG_CHECK(a == "relu" || a == "gelu", ValueError, "Transformer layer: activation must be \"relu\" or \"gelu\", got \"{}\"", a);
}
}  // namespace

// ---------------------------------------------------------------- encoder

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d, int64_t h, TransformerLayerOptions o, Generator& gen)
    : options(o),
      self_attn(d, h, {true, o.dropout}, gen),
      linear1(d, o.dim_feedforward, true, gen),
      linear2(o.dim_feedforward, d, true, gen),
      dropout(o.dropout, gen),
      dropout1(o.dropout, gen),
      dropout2(o.dropout, gen),
      norm1({d}, o.layer_norm_eps),
      norm2({d}, o.layer_norm_eps) {
  check_activation(o.activation);
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

Variable TransformerEncoderLayer::forward(const Variable& src, const AttentionMask& mask) const {
  auto sa = [&](const Variable& x) { return dropout1.forward(self_attn.forward(x, x, x, mask).output); };
  if (options.norm_first) {
    Variable x = src + sa(norm1.forward(src));
    return x + feed_forward(norm2.forward(x));
  }
  Variable x = norm1.forward(src + sa(src));
  return norm2.forward(x + feed_forward(x));
}

std::string TransformerEncoderLayer::extra_repr() const {
  return fmt::format("d_model={}, nhead={}, dim_feedforward={}, activation={}, norm_first={}", self_attn.embed_dim,
                     self_attn.num_heads, options.dim_feedforward, options.activation, options.norm_first);
}

// ---------------------------------------------------------------- decoder

TransformerDecoderLayer::TransformerDecoderLayer(int64_t d, int64_t h, TransformerLayerOptions o, Generator& gen)
    : options(o),
      self_attn(d, h, {true, o.dropout}, gen),
      multihead_attn(d, h, {true, o.dropout}, gen),
      linear1(d, o.dim_feedforward, true, gen),
      linear2(o.dim_feedforward, d, true, gen),
      dropout(o.dropout, gen),
      dropout1(o.dropout, gen),
      dropout2(o.dropout, gen),
      dropout3(o.dropout, gen),
      norm1({d}, o.layer_norm_eps),
      norm2({d}, o.layer_norm_eps),
      norm3({d}, o.layer_norm_eps) {
  check_activation(o.activation);
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

Variable TransformerDecoderLayer::forward(const Variable& tgt, const Variable& memory, const AttentionMask& tgt_mask,
                                          const AttentionMask& memory_mask) const {
  auto sa = [&](const Variable& x) { return dropout1.forward(self_attn.forward(x, x, x, tgt_mask).output); };
  // Cross-attention: queries from the decoder stream x, keys and values from the encoder's memory.
  auto ca = [&](const Variable& x) {
    return dropout2.forward(multihead_attn.forward(x, memory, memory, memory_mask).output);
  };
  if (options.norm_first) {
    Variable x = tgt + sa(norm1.forward(tgt));
    x = x + ca(norm2.forward(x));
    return x + feed_forward(norm3.forward(x));
  }
  Variable x = norm1.forward(tgt + sa(tgt));
  x = norm2.forward(x + ca(x));
  return norm3.forward(x + feed_forward(x));
}

std::string TransformerDecoderLayer::extra_repr() const {
  return fmt::format("d_model={}, nhead={}, dim_feedforward={}, activation={}, norm_first={}", self_attn.embed_dim,
                     self_attn.num_heads, options.dim_feedforward, options.activation, options.norm_first);
}

// ---------------------------------------------------------------- GPT block

GPTBlock::GPTBlock(int64_t d, int64_t h, double p, Generator& gen)
    : ln_1({d}), ln_2({d}), attn(d, h, {true, p}, gen), fc(d, 4 * d, true, gen), proj(4 * d, d, true, gen),
      resid_dropout(p, gen) {
  register_module("ln_1", ln_1);
  register_module("attn", attn);
  register_module("ln_2", ln_2);
  register_module("fc", fc);
  register_module("proj", proj);
  register_module("resid_dropout", resid_dropout);
}

Variable GPTBlock::forward(const Variable& x0) const {
  const AttentionOutput a = attn.forward(ln_1.forward(x0), AttentionMask{.is_causal = true});
  Variable x = x0 + resid_dropout.forward(a.output);
  return x + resid_dropout.forward(proj.forward(gelu(fc.forward(ln_2.forward(x)))));
}

// ---------------------------------------------------------------- GPT

GPT::GPT(GPTOptions o, Generator& gen)
    : options(o), tok(o.vocab, o.dim, gen), pos(o.context, o.dim, gen), ln_f({o.dim}), head(o.dim, o.vocab, true, gen) {
  register_module("tok", tok);
  register_module("pos", pos);
  register_module("blocks", blocks);
  register_module("ln_f", ln_f);
  register_module("head", head);
  for (int64_t i = 0; i < o.layers; ++i) blocks.emplace_back<GPTBlock>(o.dim, o.heads, o.dropout, gen);
}

Variable GPT::forward(const Tensor& ids) const {
  MG_CHECK(ids.dim() == 2 && ids.size(1) >= 1 && ids.size(1) <= options.context, ShapeError,
           "GPT: ids must be (batch, seq) with 1 <= seq <= context {}, got shape {}", options.context, shape_str(ids.shape()));
  Variable x = tok.forward(ids) + pos.forward(arange(ids.size(1)));  // (B, T, dim)
  for (size_t i = 0; i < blocks.size(); ++i) x = blocks.at<GPTBlock>(i).forward(x);
  return head.forward(ln_f.forward(x));  // (B, T, vocab)
}

std::string GPT::extra_repr() const {
  return fmt::format("vocab={}, context={}, dim={}, heads={}, layers={}", options.vocab, options.context, options.dim,
                     options.heads, options.layers);
}

}  // namespace mg::nn
