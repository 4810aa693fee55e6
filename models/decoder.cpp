#include "minigrad/models/decoder.h"

#include "minigrad/tensor/ops.h"

namespace mg::models {
namespace {
void add_norm(nn::Sequential& n, const DecoderOptions& o) {
  if (o.rms_norm)
    n.emplace_back<nn::RMSNorm>(Shape{o.d_model}, nn::RMSNormOptions{.eps = 1e-5});
  else
    n.emplace_back<nn::LayerNorm>(Shape{o.d_model});
}
}  // namespace

DecoderBlock::DecoderBlock(const DecoderOptions& o, Generator& gen)
    : attn(o.d_model, o.nhead,
           {.bias = o.bias,
            .num_kv_heads = o.grouped ? o.nhead / 2 : 0,
            .rotary = o.rope ? std::optional(nn::RotaryEmbeddingOptions{.max_seq_len = o.context}) : std::nullopt},
           gen) {
  add_norm(norm_1, o);
  add_norm(norm_2, o);
  if (o.swiglu) {
    mlp.emplace_back<nn::SwiGLU>(o.d_model, o.hidden, nn::SwiGLUOptions{.bias = o.bias}, gen);
  } else {
    mlp.emplace_back<nn::Linear>(o.d_model, o.hidden, nn::LinearOptions{.bias = o.bias}, gen);
    mlp.emplace_back<nn::GELU>();
    mlp.emplace_back<nn::Linear>(o.hidden, o.d_model, nn::LinearOptions{.bias = o.bias}, gen);
  }
  register_module("norm_1", norm_1);
  register_module("attn", attn);
  register_module("norm_2", norm_2);
  register_module("mlp", mlp);
}

// x + attn(norm_1(x)), then + mlp(norm_2(.)): the residual stream, each branch reading a normed copy
Variable DecoderBlock::forward(const Variable& x, nn::KVCache* cache) const {
  const Variable h = x + attn(norm_1(x), {.is_causal = true, .cache = cache}).output;
  return h + mlp(norm_2(h));
}

Decoder::Decoder(int64_t vocab, const DecoderOptions& o, Generator& gen)
    : tok(vocab, o.d_model, {}, gen), head(o.d_model, vocab, {.bias = o.bias}, gen) {
  register_module("tok", tok);
  if (!o.rope) register_module("pos", pos.emplace(o.context, o.d_model, nn::EmbeddingOptions{}, gen));
  register_module("blocks", blocks);
  for (int64_t i = 0; i < o.num_layers; ++i) blocks.emplace_back<DecoderBlock>(o, gen);
  add_norm(norm_f, o);
  register_module("norm_f", norm_f);
  register_module("head", head);
  if (o.tie_weights) head.weight = tok.weight;  // one (vocab, d_model) matrix for both ends (counted once)
}

// tokens (+ positions) -> blocks -> norm_f -> head; a cache's size is where the new tokens start
Variable Decoder::forward(const Tensor& ids, std::vector<nn::KVCache>* caches) const {
  const int64_t past = caches && !caches->empty() ? caches->front().size() : 0;
  Variable x = tok(ids);
  if (pos) x = x + (*pos)(arange(past, past + ids.size(1)));
  if (caches && caches->empty()) caches->resize(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) x = blocks.at<DecoderBlock>(i)(x, caches ? &(*caches)[i] : nullptr);
  return head(norm_f(x));
}

}  // namespace mg::models
