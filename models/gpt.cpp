#include "minigrad/models/gpt.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "minigrad/tensor/ops/random.h"

namespace mg::models {

// ---------------------------------------------------------------- GPT block

GPTBlock::GPTBlock(int64_t d, int64_t h, GPTBlockOptions o, Generator& gen)
    : ln_1({d}, {.eps = o.layer_norm_eps}),
      ln_2({d}, {.eps = o.layer_norm_eps}),
      attn(d, h, {.dropout = o.dropout}, gen),
      fc(d, 4 * d, {}, gen),
      proj(4 * d, d, {}, gen),
      resid_dropout({.p = o.dropout}, gen),
      gelu_approximate(o.gelu_approximate) {
  register_module("ln_1", ln_1);
  register_module("attn", attn);
  register_module("ln_2", ln_2);
  register_module("fc", fc);
  register_module("proj", proj);
  register_module("resid_dropout", resid_dropout);
}

Variable GPTBlock::forward(const Variable& x0, nn::KVCache* cache, Variable* attn_weights) const {
  const nn::AttentionOutput a =
      attn(ln_1(x0),
           nn::AttentionForwardOptions{.is_causal = true, .need_weights = attn_weights != nullptr, .cache = cache});
  if (attn_weights) *attn_weights = a.weights;
  Variable x = x0 + resid_dropout(a.output);
  // proj(gelu(fc(h))), with fc and the GELU as one op (autograd/ops/matmul.cpp: the same numbers, a
  // backward with one pass fewer); a forward hook on fc needs fc called as a module.
  const Variable h = ln_2(x);
  Variable hidden;
  if (fc.has_forward_hooks()) {
    hidden = gelu(fc(h), gelu_approximate);
  } else {
    nn::ForwardScope scope(fc);  // an error inside names "blocks.i.fc (Linear)", as fc(h) would
    hidden = linear_gelu(h, fc.weight, fc.bias, gelu_approximate);
  }
  return x + resid_dropout(proj(hidden));
}

// ---------------------------------------------------------------- GPT

namespace {
// The model's size checked before any parameter is made: a config.json asking for 2^40 layers is a
// MemoryError at once, not an allocation loop that runs until the system kills the process.
// Per block: two LayerNorms (4d), four d x d Linears with biases (4d^2 + 4d), fc (4d^2 + 4d), proj (4d^2 + d).
int64_t checked_vocab(int64_t vocab, int64_t ctx, const GPTOptions& o) {
  const double V = static_cast<double>(vocab), d = static_cast<double>(o.d_model);
  const double params = (V + static_cast<double>(ctx)) * d +
                        static_cast<double>(std::max<int64_t>(o.num_layers, 0)) * (12 * d * d + 13 * d) + 2 * d +
                        (o.tie_weights ? 0 : V * d) + (o.head_bias ? V : 0);
  check_fits_in_memory(params * 4, fmt::format("GPT: a model of num_layers={}, d_model={}, vocab {} and context {} "
                                               "({:.3g} float32 parameters)",
                                               o.num_layers, o.d_model, vocab, ctx, params));
  return vocab;
}
}  // namespace

GPT::GPT(int64_t vocab, int64_t ctx, GPTOptions o, Generator& gen)
    : vocab_size(checked_vocab(vocab, ctx, o)),
      context(ctx),
      options(o),
      tok(vocab, o.d_model, {}, gen),
      pos(ctx, o.d_model, {}, gen),
      ln_f({o.d_model}, {.eps = o.layer_norm_eps}),
      head(o.d_model, vocab, {.bias = o.head_bias}, gen) {
  register_module("tok", tok);
  register_module("pos", pos);
  register_module("blocks", blocks);
  register_module("ln_f", ln_f);
  register_module("head", head);
  for (int64_t i = 0; i < o.num_layers; ++i)
    blocks.emplace_back<GPTBlock>(
        o.d_model, o.nhead,
        GPTBlockOptions{
            .dropout = o.dropout, .gelu_approximate = o.gelu_approximate, .layer_norm_eps = o.layer_norm_eps},
        gen);
  // Tying, the PyTorch way: the head's slot now holds the embedding's Variable. The registry reads
  // the slot, so the model lists, counts, optimizes and saves the matrix once ("tok.weight").
  if (o.tie_weights) head.weight = tok.weight;
}

Variable GPT::forward(const Tensor& ids, GPTCache* cache) const {
  return forward_outputs(ids, {.cache = cache}).logits;
}

GPTOutput GPT::forward_outputs(const Tensor& ids, const GPTForwardOptions& o) const {
  GPTCache* cache = o.cache;
  MG_CHECK(ids.dim() == 2 && ids.size(1) >= 1 && ids.size(1) <= context, ShapeError,
           "GPT: ids must be (batch, seq) with 1 <= seq <= context {}, got shape {}", context, shape_str(ids.shape()));
  const int64_t past = cache ? cache->size() : 0, T = ids.size(1);
  MG_CHECK(past <= context - T, ShapeError,
           "GPT: the cache holds {} tokens, and {} more would pass the context of {} positions (clear() the cache and "
           "run a window of at most {} tokens)",
           past, T, context, context);
  if (cache && cache->layers.size() != blocks.size()) {
    MG_CHECK(cache->size() == 0, ValueError, "GPT: the cache has {} layers for a model of {} blocks",
             cache->layers.size(), blocks.size());
    cache->layers.assign(blocks.size(), nn::KVCache());
  }
  GPTOutput out;
  Variable x = tok(ids) + pos(arange(past, past + T));  // (B, T, dim)
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (o.output_hidden_states) out.hidden_states.push_back(x);
    Variable weights;
    x = blocks.at<GPTBlock>(i)(x, cache ? &cache->layers[i] : nullptr, o.output_attentions ? &weights : nullptr);
    if (o.output_attentions) out.attentions.push_back(weights);
  }
  x = ln_f(x);
  if (o.output_hidden_states) out.hidden_states.push_back(x);  // the last one after ln_f, as GPT2Model
  out.logits = head(x);                                        // (B, T, vocab)
  return out;
}

Tensor GPT::generate(const Tensor& ids, int64_t max_new_tokens, double temperature, std::optional<int64_t> top_k,
                     Generator& gen, bool use_cache) const {
  MG_CHECK(ids.defined(), StateError, "GPT::generate: ids is undefined; expected (batch, seq) int64 token ids");
  MG_CHECK(ids.dtype() == DType::Int64, DTypeError, "GPT::generate: ids must be int64 token ids, got {} {}",
           dtype_name(ids.dtype()), shape_str(ids.shape()));
  MG_CHECK(ids.dim() == 2 && ids.size(1) >= 1, ShapeError,
           "GPT::generate: ids must be (batch, seq) with seq >= 1, got shape {}", shape_str(ids.shape()));
  MG_CHECK(max_new_tokens >= 0 && max_new_tokens <= std::numeric_limits<int64_t>::max() - ids.size(1), ValueError,
           "GPT::generate: max_new_tokens must be >= 0, got {}", max_new_tokens);
  MG_CHECK(std::isfinite(temperature) && temperature >= 0, ValueError,
           "GPT::generate: temperature must be finite and >= 0 (0 = always the most likely token), got {}",
           temperature);
  MG_CHECK(!top_k || *top_k >= 1, ValueError, "GPT::generate: top_k must be >= 1, got {}", top_k.value_or(0));
  NoGradGuard no_grad;
  const int64_t B = ids.size(0), T0 = ids.size(1);
  Tensor out = empty({B, T0 + max_new_tokens}, DType::Int64);
  out.narrow(1, 0, T0).copy_(ids);
  GPTCache cache;
  for (int64_t len = T0; len < T0 + max_new_tokens; ++len) {
    // The cache can take the newest token when it holds every earlier one and the window has not
    // slid; otherwise run the whole window (the last `context` tokens) from position 0.
    Variable logits;  // (B, T, vocab)
    if (use_cache && len <= context && cache.size() == len - 1) {
      logits = forward(out.narrow(1, len - 1, 1).contiguous(), &cache);
    } else {
      const int64_t start = std::max<int64_t>(0, len - context);
      cache.clear();
      logits = forward(out.narrow(1, start, len - start).contiguous(), use_cache ? &cache : nullptr);
    }
    // (B, vocab), float32 also when the logits are bfloat16 (AutocastOptions::bfloat16_outputs)
    const Tensor last = widened(logits.data().narrow(1, logits.size(1) - 1, 1).reshape({B, vocab_size}));
    const Tensor next = sample_logits(last, temperature, top_k, gen);  // (B, 1)
    out.narrow(1, len, 1).copy_(next);
  }
  return out;
}

Tensor GPT::generate(const Tensor& ids, const GenerationConfig& config, Generator& gen) const {
  MG_CHECK(ids.defined(), StateError, "GPT::generate: ids is undefined; expected (batch, seq) int64 token ids");
  MG_CHECK(ids.dtype() == DType::Int64, DTypeError, "GPT::generate: ids must be int64 token ids, got {} {}",
           dtype_name(ids.dtype()), shape_str(ids.shape()));
  MG_CHECK(ids.dim() == 2 && ids.size(1) >= 1, ShapeError,
           "GPT::generate: ids must be (batch, seq) with seq >= 1, got shape {}", shape_str(ids.shape()));
  MG_CHECK(ids.size(0) >= 1, ShapeError, "GPT::generate: ids has no rows (shape {}); give at least one prompt",
           shape_str(ids.shape()));
  check_generation_config(config, vocab_size, "GPT::generate");
  MG_CHECK(config.max_new_tokens <= std::numeric_limits<int64_t>::max() - ids.size(1), ValueError,
           "GPT::generate: max_new_tokens {} is too large", config.max_new_tokens);
  const int64_t lo = min(ids).item<int64_t>(), hi = max(ids).item<int64_t>();
  MG_CHECK(lo >= 0 && hi < vocab_size, IndexError, "GPT::generate: ids must be token ids in [0, {}), got {} to {}",
           vocab_size, lo, hi);
  NoGradGuard no_grad;
  Generator seeded(config.seed.value_or(0));
  Generator& g = config.seed ? seeded : gen;
  const std::optional<int64_t> pad = config.pad_token_id ? config.pad_token_id : config.eos_token_id;
  const int64_t B = ids.size(0), T0 = ids.size(1);
  Tensor out = empty({B, T0 + config.max_new_tokens}, DType::Int64);
  out.narrow(1, 0, T0).copy_(ids);
  std::vector<bool> finished(static_cast<size_t>(B), false);
  GPTCache cache;
  int64_t len = T0;
  for (; len < T0 + config.max_new_tokens; ++len) {
    Variable logits;  // as the other generate: one new token through the cache, or the whole window
    if (config.use_cache && len <= context && cache.size() == len - 1) {
      logits = forward(out.narrow(1, len - 1, 1).contiguous(), &cache);
    } else {
      const int64_t start = std::max<int64_t>(0, len - context);
      cache.clear();
      logits = forward(out.narrow(1, start, len - start).contiguous(), config.use_cache ? &cache : nullptr);
    }
    // (B, vocab) in float32 whatever the model's dtype, as transformers' generate casts them
    const Tensor last = logits.data().narrow(1, logits.size(1) - 1, 1).reshape({B, vocab_size}).to(DType::Float32);
    const Tensor scores = process_logits(last, out.narrow(1, 0, len), config);
    Tensor next = config.do_sample ? multinomial(softmax(scores, -1), 1, false, g) : argmax(scores, -1, true);
    std::vector<int64_t> chosen = next.contiguous().to_vector<int64_t>();
    bool all_done = true;
    for (int64_t b = 0; b < B; ++b) {
      if (finished[b]) chosen[b] = *pad;  // a finished row only pads
      if (config.eos_token_id && chosen[b] == *config.eos_token_id) finished[b] = true;
      all_done = all_done && finished[b];
    }
    out.narrow(1, len, 1).copy_(from_vector(chosen, {B, 1}));
    if (all_done) {
      ++len;
      break;
    }
  }
  return out.narrow(1, 0, len).contiguous();
}

std::string GPT::extra_repr() const {
  return fmt::format("vocab_size={}, context={}, d_model={}, nhead={}, num_layers={}{}{}{}", vocab_size, context,
                     options.d_model, options.nhead, options.num_layers,
                     options.tie_weights ? ", tie_weights=true" : "",
                     options.gelu_approximate != GeluApproximate::None
                         ? std::string(", gelu_approximate=") + gelu_approximate_name(options.gelu_approximate)
                         : "",
                     options.head_bias ? "" : ", head_bias=false");
}

}  // namespace mg::models
