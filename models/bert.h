#pragma once
// BERT: the encoder-only Transformer of Devlin et al. (2018), built from nn's pieces so that a
// published checkpoint (Hugging Face's BertModel: all-MiniLM-L6-v2, bert-base-uncased, ...) loads
// into it and gives the same numbers.
//
//   ids (B, T) ----> word_embeddings ----+
//   positions 0..T-1 -> position_embeddings -+-> LayerNorm -> dropout          "embeddings"
//   token types (B, T) -> token_type_embeddings +
//   -> num_hidden_layers x TransformerEncoderLayer (post-LN, GELU)             "encoder.layer.i"
//   -> last_hidden_state (B, T, hidden)
//   -> pooler: tanh(dense(hidden state of [CLS]))   (optional)                 "pooler"
//
// Each encoder layer is nn's own TransformerEncoderLayer (PyTorch's structure: post-LN is its
// default norm_first = false), with the same MultiheadAttention and its four Linear layers w_q,
// w_k, w_v, w_o that every other model here uses. So the trained W_Q of a real model is read in
// exactly the place a student already knows. The embeddings and pooler carry Hugging Face's names;
// inside a layer the names differ, and models/pretrained.h translates them (a table of eight rows).
//
// One difference in training mode only: Hugging Face's BertLayer has no dropout between the GELU
// and the second Linear, and PyTorch's TransformerEncoderLayer has one (`dropout`, p of the config's
// hidden_dropout_prob). In eval() mode, where a pretrained model is run, none of them acts.
#include <optional>
#include <string>
#include <vector>

#include "minigrad/nn/container.h"
#include "minigrad/nn/embedding.h"
#include "minigrad/nn/layers.h"
#include "minigrad/nn/normalization.h"
#include "minigrad/nn/transformer.h"

namespace mg::models {

/// The sizes of a BERT model: Hugging Face's BertConfig, names and defaults (bert-base).
struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  /// "gelu" (the erf form) or "relu".
  std::string hidden_act = "gelu";
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  double hidden_dropout_prob = 0.1;
  /// Must equal hidden_dropout_prob (one p per layer here)
  double attention_probs_dropout_prob = 0.1;
  /// The pooler (BertModel's default)
  bool add_pooling_layer = true;

  /// Read a Hugging Face config.json (model_type "bert"). A FileError names the file when it is
  /// missing or not JSON; a ValueError names the file and the field that is missing, of the wrong
  /// type, or out of range. Fields it does not use are ignored.
  static BertConfig from_json_file(const std::string& path);
};

/// Token, position and token-type embeddings, summed, then LayerNorm and dropout.
class BertEmbeddings : public nn::Callable<BertEmbeddings> {
 public:
  /// Three tables of config.hidden_size columns; LayerNorm with config.layer_norm_eps.
  explicit BertEmbeddings(const BertConfig& config, Generator& gen = default_generator());
  /// ids (B, T) int64 and token types (B, T) int64 (undefined: all 0) -> (B, T, hidden).
  Variable forward(const Tensor& input_ids, const Tensor& token_type_ids = Tensor()) const;
  std::string type_name() const override { return "BertEmbeddings"; }

  nn::Embedding word_embeddings, position_embeddings, token_type_embeddings;
  nn::LayerNorm norm;  // registered as "LayerNorm", Hugging Face's name: "embeddings.LayerNorm.*" loads as is
  nn::Dropout dropout;
};

/// The stack of encoder layers ("encoder.layer.i", as Hugging Face nests them).
class BertEncoder : public nn::Module {
 public:
  /// config.num_hidden_layers TransformerEncoderLayers.
  explicit BertEncoder(const BertConfig& config, Generator& gen = default_generator());
  std::string type_name() const override { return "BertEncoder"; }

  nn::ModuleList layer;  // TransformerEncoderLayer x num_hidden_layers
};

/// tanh(dense(h[:, 0])): the [CLS] token's vector through one more layer (BERT's next-sentence head).
class BertPooler : public nn::Callable<BertPooler> {
 public:
  /// dense: hidden -> hidden.
  explicit BertPooler(const BertConfig& config, Generator& gen = default_generator());
  /// hidden (B, T, hidden) -> (B, hidden).
  Variable forward(const Variable& hidden) const;
  std::string type_name() const override { return "BertPooler"; }

  nn::Linear dense;
};

/// Options of one BertModel forward.
struct BertForwardOptions {
  /// (B, T) int64 or Bool: 1 for a real token, 0 for padding (Hugging Face's attention_mask).
  /// Undefined: every token is real.
  Tensor attention_mask;
  /// (B, T) int64: 0 for the first sentence, 1 for the second. Undefined: all 0.
  Tensor token_type_ids;
  /// (num_hidden_layers, num_attention_heads) floating: head h of layer l has its output multiplied
  /// by head_mask[l, h] (0 removes it; Hugging Face's head_mask). Undefined: every head as it is.
  Tensor head_mask;
  /// Return every layer's attention weights (Hugging Face's output_attentions); the layers then
  /// run the composed attention, which builds them.
  bool output_attentions = false;
  /// Return the hidden states between layers (Hugging Face's output_hidden_states).
  bool output_hidden_states = false;
};

/// What a BertModel forward returns.
struct BertOutput {
  Variable last_hidden_state;  // (B, T, hidden)
  Variable pooler_output;      // (B, hidden), undefined without a pooler
  /// With output_hidden_states: num_hidden_layers + 1 of (B, T, hidden), the embeddings' output, then each layer's.
  std::vector<Variable> hidden_states;
  /// With output_attentions: num_hidden_layers of (B, heads, T, T), each layer's softmax weights
  /// (a padding key's weight is 0; with a head_mask, each head's weights times its entry, as transformers
  /// 4 returned them: version 5 dropped head_mask).
  std::vector<Variable> attentions;
};

/// A BERT encoder (Hugging Face's BertModel): embeddings, encoder.layer.i, pooler.
class BertModel : public nn::Module {
 public:
  /// Every weight initialised as nn's layers do (train it, or load a checkpoint with
  /// models::load_hf_bert, or build it from a folder with models::bert_from_pretrained: models/pretrained.h).
  explicit BertModel(const BertConfig& config, Generator& gen = default_generator());
  /// input_ids (B, T) int64 with 1 <= T <= max_position_embeddings -> the hidden states of every
  /// layer. A padding token (attention_mask 0) is never attended to; its own rows are computed
  /// but mean nothing.
  BertOutput forward(const Tensor& input_ids, const BertForwardOptions& options = {}) const;
  /// forward(), errors naming the model ("BertModel: ...").
  BertOutput operator()(const Tensor& input_ids, const BertForwardOptions& options = {}) const {
    return forward(input_ids, options);
  }
  std::string type_name() const override { return "BertModel"; }
  std::string extra_repr() const override;

  const BertConfig config;
  BertEmbeddings embeddings;
  BertEncoder encoder;
  std::optional<BertPooler> pooler;  // config.add_pooling_layer
};

/// Sentence embeddings the way sentence-transformers' Pooling(mean) makes them: the mean of the
/// hidden states of the real tokens, hidden (B, T, D) and attention_mask (B, T) (1 real, 0 padding)
/// -> (B, D). Derivative: each real token's row gets dy / (number of real tokens); padding gets 0.
Variable mean_pooling(const Variable& hidden, const Tensor& attention_mask);

}  // namespace mg::models
