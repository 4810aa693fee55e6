#include "nn/gpt.h"

namespace mg::nn {

// ---------------------------------------------------------------- GPT block

GPTBlock::GPTBlock(int64_t d, int64_t h, GPTBlockOptions o, Generator& gen)
    : ln_1({d}), ln_2({d}), attn(d, h, {.dropout = o.dropout}, gen), fc(d, 4 * d, {}, gen), proj(4 * d, d, {}, gen),
      resid_dropout({.p = o.dropout}, gen) {
  register_module("ln_1", ln_1);
  register_module("attn", attn);
  register_module("ln_2", ln_2);
  register_module("fc", fc);
  register_module("proj", proj);
  register_module("resid_dropout", resid_dropout);
}

Variable GPTBlock::forward(const Variable& x0) const {
  const AttentionOutput a = attn.forward(ln_1.forward(x0), AttentionForwardOptions{.is_causal = true});
  Variable x = x0 + resid_dropout.forward(a.output);
  return x + resid_dropout.forward(proj.forward(gelu(fc.forward(ln_2.forward(x)))));
}

// ---------------------------------------------------------------- GPT

GPT::GPT(int64_t vocab, int64_t ctx, GPTOptions o, Generator& gen)
    : vocab_size(vocab), context(ctx), options(o), tok(vocab, o.d_model, {}, gen), pos(ctx, o.d_model, {}, gen),
      ln_f({o.d_model}), head(o.d_model, vocab, {}, gen) {
  register_module("tok", tok);
  register_module("pos", pos);
  register_module("blocks", blocks);
  register_module("ln_f", ln_f);
  register_module("head", head);
  for (int64_t i = 0; i < o.num_layers; ++i) blocks.emplace_back<GPTBlock>(o.d_model, o.nhead, GPTBlockOptions{.dropout = o.dropout}, gen);
}

Variable GPT::forward(const Tensor& ids) const {
  MG_CHECK(ids.dim() == 2 && ids.size(1) >= 1 && ids.size(1) <= context, ShapeError,
           "GPT: ids must be (batch, seq) with 1 <= seq <= context {}, got shape {}", context, shape_str(ids.shape()));
  Variable x = tok.forward(ids) + pos.forward(arange(ids.size(1)));  // (B, T, dim)
  for (size_t i = 0; i < blocks.size(); ++i) x = blocks.at<GPTBlock>(i).forward(x);
  return head.forward(ln_f.forward(x));  // (B, T, vocab)
}

std::string GPT::extra_repr() const {
  return fmt::format("vocab_size={}, context={}, d_model={}, nhead={}, num_layers={}", vocab_size, context, options.d_model,
                     options.nhead, options.num_layers);
}

}  // namespace mg::nn
