#include "minigrad/models/bert.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

namespace mg::models {

// ---------------------------------------------------------------- config

namespace {
// One field of a config.json: present with the right type, or a ValueError naming file and field.
template <class T>
void read_field(const nlohmann::json& j, const std::string& path, const char* name, T& out, bool required) {
  if (!j.contains(name)) {
    MG_CHECK(!required, ValueError, "BertConfig: {} has no field \"{}\"", path, name);
    return;
  }
  const nlohmann::json& v = j.at(name);
  bool ok = false;
  if constexpr (std::is_same_v<T, std::string>)
    ok = v.is_string();
  else if constexpr (std::is_same_v<T, int64_t>)
    ok = v.is_number_integer();
  else
    ok = v.is_number();
  MG_CHECK(ok, ValueError, "BertConfig: {}: field \"{}\" should be a {}, got {}", path, name,
           std::is_same_v<T, std::string> ? "string"
           : std::is_same_v<T, int64_t>   ? "whole number"
                                          : "number",
           v.dump());
  out = v.get<T>();
}
}  // namespace

namespace {
void check_config(const BertConfig& c) {
  MG_CHECK(c.vocab_size > 0 && c.hidden_size > 0 && c.num_hidden_layers >= 0 && c.num_attention_heads > 0 &&
               c.intermediate_size > 0 && c.max_position_embeddings > 0 && c.type_vocab_size > 0,
           ValueError,
           "BertModel: sizes must be positive, got vocab_size={} hidden_size={} num_hidden_layers={} "
           "num_attention_heads={} intermediate_size={} max_position_embeddings={} type_vocab_size={}",
           c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size,
           c.max_position_embeddings, c.type_vocab_size);
  MG_CHECK(c.hidden_size % c.num_attention_heads == 0, ValueError,
           "BertModel: hidden_size {} must divide by num_attention_heads {}", c.hidden_size, c.num_attention_heads);
  MG_CHECK(c.hidden_act == "gelu" || c.hidden_act == "relu", ValueError,
           "BertModel: hidden_act must be \"gelu\" or \"relu\", got \"{}\"", c.hidden_act);
  MG_CHECK(c.hidden_dropout_prob == c.attention_probs_dropout_prob, ValueError,
           "BertModel: hidden_dropout_prob {} and attention_probs_dropout_prob {} must be equal here (each "
           "TransformerEncoderLayer has one dropout p)",
           c.hidden_dropout_prob, c.attention_probs_dropout_prob);
  MG_CHECK(std::isfinite(c.layer_norm_eps) && c.layer_norm_eps > 0, ValueError,
           "BertModel: layer_norm_eps must be finite and positive, got {}", c.layer_norm_eps);
  MG_CHECK(c.hidden_dropout_prob >= 0 && c.hidden_dropout_prob <= 1, ValueError,
           "BertModel: hidden_dropout_prob must be in [0, 1], got {}", c.hidden_dropout_prob);
  // The size, before anything is built (a config.json of 2^40 layers once allocated until killed):
  // embeddings (V + P + T) h + 2h; per layer Q, K, V, O (4h^2 + 4h), the MLP (2 h I + I + h) and two
  // LayerNorms (4h); the pooler h^2 + h.
  const double h = static_cast<double>(c.hidden_size), I = static_cast<double>(c.intermediate_size);
  const double params = static_cast<double>(c.vocab_size + c.max_position_embeddings + c.type_vocab_size) * h + 2 * h +
                        static_cast<double>(c.num_hidden_layers) * (4 * h * h + 2 * h * I + I + 9 * h) + h * h + h;
  check_fits_in_memory(params * 4,
                       fmt::format("BertModel: a model of num_hidden_layers={}, hidden_size={}, "
                                   "intermediate_size={}, vocab_size={} ({:.3g} float32 parameters)",
                                   c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.vocab_size, params));
}
}  // namespace

BertConfig BertConfig::from_json_file(const std::string& path) {
  std::ifstream in(path);
  MG_CHECK(in.good(), FileError, "BertConfig: cannot open {}", path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("BertConfig: {} is not valid JSON ({})", path, e.what()));
  }
  MG_CHECK(j.is_object(), FileError, "BertConfig: {} should hold a JSON object", path);
  std::string model_type = "bert";
  read_field(j, path, "model_type", model_type, false);
  MG_CHECK(model_type == "bert", ValueError, "BertConfig: {} is a \"{}\" model's config, expected model_type \"bert\"",
           path, model_type);
  BertConfig c;
  read_field(j, path, "vocab_size", c.vocab_size, true);
  read_field(j, path, "hidden_size", c.hidden_size, true);
  read_field(j, path, "num_hidden_layers", c.num_hidden_layers, true);
  read_field(j, path, "num_attention_heads", c.num_attention_heads, true);
  read_field(j, path, "intermediate_size", c.intermediate_size, true);
  read_field(j, path, "hidden_act", c.hidden_act, false);
  read_field(j, path, "max_position_embeddings", c.max_position_embeddings, false);
  read_field(j, path, "type_vocab_size", c.type_vocab_size, false);
  read_field(j, path, "layer_norm_eps", c.layer_norm_eps, false);
  read_field(j, path, "hidden_dropout_prob", c.hidden_dropout_prob, false);
  read_field(j, path, "attention_probs_dropout_prob", c.attention_probs_dropout_prob, false);
  std::string position_type = "absolute";
  read_field(j, path, "position_embedding_type", position_type, false);
  MG_CHECK(position_type == "absolute", ValueError,
           "BertConfig: {}: position_embedding_type \"{}\" is not supported (only \"absolute\")", path, position_type);
  try {
    check_config(c);
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("BertConfig: {}: {}", path, e.what()));
  } catch (const MemoryError& e) {
    throw MemoryError(fmt::format("BertConfig: {}: {}", path, e.what()));
  }
  return c;
}

// ---------------------------------------------------------------- embeddings

BertEmbeddings::BertEmbeddings(const BertConfig& c, Generator& gen)
    : word_embeddings(c.vocab_size, c.hidden_size, {}, gen),
      position_embeddings(c.max_position_embeddings, c.hidden_size, {}, gen),
      token_type_embeddings(c.type_vocab_size, c.hidden_size, {}, gen),
      norm({c.hidden_size}, {.eps = c.layer_norm_eps}),
      dropout({.p = c.hidden_dropout_prob}, gen) {
  register_module("word_embeddings", word_embeddings);
  register_module("position_embeddings", position_embeddings);
  register_module("token_type_embeddings", token_type_embeddings);
  register_module("LayerNorm", norm);
  register_module("dropout", dropout);
}

Variable BertEmbeddings::forward(const Tensor& ids, const Tensor& types) const {
  MG_CHECK(ids.dim() == 2 && ids.dtype() == DType::Int64, ShapeError,
           "BertEmbeddings: input_ids must be (batch, seq) int64, got shape {} {}", shape_str(ids.shape()),
           dtype_name(ids.dtype()));
  const int64_t T = ids.size(1), max_T = position_embeddings.num_embeddings;
  MG_CHECK(T >= 1 && T <= max_T, ShapeError,
           "BertEmbeddings: a sequence of {} tokens does not fit the position table of {} rows "
           "(max_position_embeddings); truncate it to at most {}",
           T, max_T, max_T);
  if (types.defined())
    MG_CHECK(types.shape() == ids.shape() && types.dtype() == DType::Int64, ShapeError,
             "BertEmbeddings: token_type_ids must be int64 of the shape of input_ids {}, got {} {}",
             shape_str(ids.shape()), shape_str(types.shape()), dtype_name(types.dtype()));
  // Position t gets row t; every sequence of the batch shares them (broadcast over B).
  Variable x = word_embeddings(ids) + position_embeddings(arange(T));
  x = x + token_type_embeddings(types.defined() ? types : zeros_like(ids));
  return dropout(norm(x));
}

// ---------------------------------------------------------------- encoder, pooler

BertEncoder::BertEncoder(const BertConfig& c, Generator& gen) {
  check_config(c);
  register_module("layer", layer);
  const nn::TransformerLayerOptions o{
      .dim_feedforward = c.intermediate_size,
      .dropout = c.hidden_dropout_prob,
      .activation = c.hidden_act == "gelu" ? nn::TransformerActivation::GELU : nn::TransformerActivation::ReLU,
      .layer_norm_eps = c.layer_norm_eps};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layer.emplace_back<nn::TransformerEncoderLayer>(c.hidden_size, c.num_attention_heads, o, gen);
}

BertPooler::BertPooler(const BertConfig& c, Generator& gen) : dense(c.hidden_size, c.hidden_size, {}, gen) {
  register_module("dense", dense);
}

Variable BertPooler::forward(const Variable& h) const {
  const Variable first = squeeze(slice(h, 1, 0, 1), 1);  // (B, hidden): the [CLS] position
  return tanh(dense(first));
}

// ---------------------------------------------------------------- model

BertModel::BertModel(const BertConfig& c, Generator& gen) : config(c), embeddings(c, gen), encoder(c, gen) {
  register_module("embeddings", embeddings);
  register_module("encoder", encoder);
  if (c.add_pooling_layer) register_module("pooler", pooler.emplace(c, gen));
}

BertOutput BertModel::forward(const Tensor& ids, const BertForwardOptions& o) const {
  nn::ForwardScope scope(*this);
  nn::AttentionForwardOptions attn;
  MG_CHECK(ids.dim() == 2 && ids.size(0) >= 1 && ids.size(1) >= 1, ShapeError,
           "BertModel: input_ids must be (batch, seq) with at least one sequence of at least one token, got shape {}",
           shape_str(ids.shape()));
  // What the embeddings would refuse, refused here in BertModel's own words (the caller called it)
  MG_CHECK(ids.dtype() == DType::Int64, DTypeError, "BertModel: input_ids must be int64, got {}",
           dtype_name(ids.dtype()));
  MG_CHECK(ids.size(1) <= config.max_position_embeddings, ShapeError,
           "BertModel: a sequence of {} tokens is longer than max_position_embeddings {}; truncate it to at most {}",
           ids.size(1), config.max_position_embeddings, config.max_position_embeddings);
  const auto [lo, hi] = std::pair{min(ids).item<int64_t>(), max(ids).item<int64_t>()};
  MG_CHECK(lo >= 0 && hi < config.vocab_size, IndexError,
           "BertModel: input_ids must be token ids in [0, {}) (vocab_size), got ids from {} to {}", config.vocab_size,
           lo, hi);
  if (o.token_type_ids.defined()) {
    MG_CHECK(o.token_type_ids.shape() == ids.shape() && o.token_type_ids.dtype() == DType::Int64, ShapeError,
             "BertModel: token_type_ids must be int64 of the shape of input_ids {}, got {} {}", shape_str(ids.shape()),
             shape_str(o.token_type_ids.shape()), dtype_name(o.token_type_ids.dtype()));
    const int64_t tlo = min(o.token_type_ids).item<int64_t>(), thi = max(o.token_type_ids).item<int64_t>();
    MG_CHECK(tlo >= 0 && thi < config.type_vocab_size, IndexError,
             "BertModel: token_type_ids must be in [0, {}) (type_vocab_size), got {} to {}", config.type_vocab_size,
             tlo, thi);
  }
  if (o.attention_mask.defined()) {
    MG_CHECK(o.attention_mask.dtype() == DType::Int64 || o.attention_mask.dtype() == DType::Bool, DTypeError,
             "BertModel: attention_mask must be int64 or Bool (1 = a real token, 0 = padding), got {}",
             dtype_name(o.attention_mask.dtype()));
    MG_CHECK(o.attention_mask.shape() == ids.shape(), ShapeError,
             "BertModel: attention_mask must have the shape of input_ids {}, got {}", shape_str(ids.shape()),
             shape_str(o.attention_mask.shape()));
    // Hugging Face adds a very negative number to the scores of padding keys; -inf (PyTorch's
    // key_padding_mask) gives the same weights: exactly 0 after the softmax. A row with no real
    // token would leave a query nothing to attend to (NaN here, meaningless numbers there).
    const Tensor mask64 = o.attention_mask.to(DType::Int64);
    const int64_t mlo = min(mask64).item<int64_t>(), mhi = max(mask64).item<int64_t>();
    MG_CHECK(mlo >= 0 && mhi <= 1, ValueError,
             "BertModel: attention_mask must hold 1 (a real token) or 0 (padding), got values from {} to {}", mlo, mhi);
    const Tensor real = sum(mask64, {1});
    for (int64_t b = 0; b < ids.size(0); ++b)
      MG_CHECK(real.narrow(0, b, 1).item() > 0, ValueError,
               "BertModel: attention_mask row {} marks every token as padding; each sequence needs at least one real "
               "token",
               b);
    // A mask with no padding in it masks nothing: it is left out (as transformers does), so the
    // layers can take the fused attention kernel, which takes no mask. The weights are the same:
    // the composed path would add 0 to every score.
    if (sum(real).item<int64_t>() < ids.numel()) attn.key_padding_mask = eq(mask64, zeros({}, DType::Int64));
  }
  const int64_t L = config.num_hidden_layers, H = config.num_attention_heads;
  if (o.head_mask.defined()) {
    MG_CHECK(is_floating(o.head_mask.dtype()), DTypeError, "BertModel: head_mask must be floating, got {}",
             dtype_name(o.head_mask.dtype()));
    MG_CHECK(o.head_mask.shape() == Shape({L, H}), ShapeError,
             "BertModel: head_mask must have shape ({}, {}) (layers, heads), got {}", L, H,
             shape_str(o.head_mask.shape()));
  }
  BertOutput out;
  Variable x = embeddings(ids, o.token_type_ids);
  if (o.output_hidden_states) out.hidden_states.push_back(x);
  for (int64_t l = 0; l < L; ++l) {
    if (o.head_mask.defined()) attn.head_mask = o.head_mask.narrow(0, l, 1).reshape({H});
    Variable weights;
    x = encoder.layer.at<nn::TransformerEncoderLayer>(static_cast<size_t>(l))(x, attn,
                                                                              o.output_attentions ? &weights : nullptr);
    if (o.output_hidden_states) out.hidden_states.push_back(x);
    if (o.output_attentions)  // with the head mask applied, as transformers 4 returned them
      out.attentions.push_back(attn.head_mask.defined()
                                   ? weights * Variable(attn.head_mask.to(weights.dtype()).reshape({1, H, 1, 1}))
                                   : weights);
  }
  out.last_hidden_state = x;
  if (pooler) out.pooler_output = (*pooler)(x);
  return out;
}

std::string BertModel::extra_repr() const {
  return fmt::format("hidden_size={}, num_hidden_layers={}, num_attention_heads={}, vocab_size={}", config.hidden_size,
                     config.num_hidden_layers, config.num_attention_heads, config.vocab_size);
}

Variable mean_pooling(const Variable& hidden, const Tensor& mask) {
  MG_CHECK(hidden.dim() == 3 && mask.dim() == 2 && mask.size(0) == hidden.size(0) && mask.size(1) == hidden.size(1),
           ShapeError, "mean_pooling: hidden must be (B, T, D) and attention_mask (B, T), got {} and {}",
           shape_str(hidden.shape()), shape_str(mask.shape()));
  // m (B, T, 1): 1 on real tokens. sum over T of m * h, divided by the count of real tokens
  // (at least 1e-9, as sentence-transformers, so a row of padding gives 0, not NaN).
  const Tensor m = mask.to(hidden.dtype()).unsqueeze(2);
  const Variable total = sum(hidden * Variable(m), {1});
  const Tensor count = clamp(sum(m, {1}), 1e-9, std::nullopt);
  return total / Variable(count);
}

}  // namespace mg::models
