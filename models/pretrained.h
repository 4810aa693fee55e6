#pragma once
// Published models in Hugging Face's layout, in and out: a BERT encoder (BertModel, e.g.
// sentence-transformers' all-MiniLM-L6-v2) and GPT-2 (GPT2LMHeadModel / GPT2Model), read from
// and written to the model.safetensors + config.json pair that transformers' save_pretrained
// writes and from_pretrained reads.
//
// BERT: the embeddings and the pooler have the same names in both libraries; inside encoder layer
// i, eight modules are named differently (bert_name_from_hf):
//
//   Hugging Face (encoder.layer.i.)   minigrad (encoder.layer.i.)   what it is
//   attention.self.query              self_attn.w_q                 W_Q (and its bias)
//   attention.self.key                self_attn.w_k                 W_K
//   attention.self.value              self_attn.w_v                 W_V
//   attention.output.dense            self_attn.w_o                 W_O
//   attention.output.LayerNorm        norm1                         LayerNorm after attention
//   intermediate.dense                linear1                       MLP, hidden -> intermediate
//   output.dense                      linear2                       MLP, intermediate -> hidden
//   output.LayerNorm                  norm2                         LayerNorm after the MLP
//
// GPT-2: more than names. Hugging Face's GPT-2 keeps OpenAI's "Conv1D" layers, y = x W + b with
// W stored (in, out), the transpose of Linear's (out, in); and one c_attn for the three
// projections, W (d, 3d) = [W_Q^T | W_K^T | W_V^T]. Loading splits and transposes; saving stacks
// and transposes back:
//
//   Hugging Face (transformer.)   minigrad                        how
//   wte, wpe                      tok, pos                        as is
//   h.i.ln_1, h.i.ln_2            blocks.i.ln_1, blocks.i.ln_2    as is
//   h.i.attn.c_attn (d, 3d)       blocks.i.attn.w_q, w_k, w_v     split in three, each transposed
//   h.i.attn.c_proj (d, d)        blocks.i.attn.w_o               transposed
//   h.i.mlp.c_fc (d, 4d)          blocks.i.fc                     transposed
//   h.i.mlp.c_proj (4d, d)        blocks.i.proj                   transposed
//   ln_f                          ln_f                            as is
//   lm_head (tied to wte)         head (no bias, tied to tok)     one matrix
//
// Loading checks every tensor's presence and shape, names the file and the tensor in its errors,
// and changes nothing in the model unless everything checks out (as nn::load).
#include <memory>
#include <string>

#include "minigrad/models/bert.h"
#include "minigrad/models/gpt.h"
#include "minigrad/nn/serialize.h"

namespace mg::models {

/// A Hugging Face BERT tensor name -> the BertModel name ("encoder.layer.0.attention.self.query.weight"
/// -> "encoder.layer.0.self_attn.w_q.weight"). A leading "bert." (BertForMaskedLM and the like) is
/// dropped, and the original release's "LayerNorm.gamma"/"beta" read as "weight"/"bias". Empty
/// when the name is not part of a BertModel (a task head's "cls.*", say).
std::string bert_name_from_hf(const std::string& hf_name);
/// The inverse of bert_name_from_hf: a BertModel name -> Hugging Face's.
std::string bert_name_to_hf(const std::string& name);

/// Load a Hugging Face BERT checkpoint (model.safetensors of a BertModel or a Bert*For* model) into
/// `model`. Strict: every tensor of the model must be in the file, and every BertModel tensor of
/// the file in the model; tensors of task heads ("cls.*", "classifier.*", anything outside
/// embeddings, encoder and pooler) and the position_ids buffer are skipped.
/// A FileError names the file and each missing, unexpected or mis-shaped tensor (both names).
void load_hf_bert(BertModel& model, const std::string& safetensors_path);

/// A BertModel from a Hugging Face model folder (config.json + model.safetensors), with a pooler
/// when the file has one.
std::unique_ptr<BertModel> bert_from_pretrained(const std::string& folder);

/// Write `model` in Hugging Face's layout into `folder` (created if missing): model.safetensors
/// under BertModel's names and config.json, so transformers' BertModel.from_pretrained(folder) loads it.
void save_hf_bert(const BertModel& model, const std::string& folder);

/// GPT's sizes from a Hugging Face GPT-2 config.json (n_embd, n_head, n_layer, n_positions,
/// vocab_size, layer_norm_epsilon, activation_function "gelu_new", tie_word_embeddings):
/// the GPTOptions, with the context and vocabulary size through the two out-parameters.
GPTOptions gpt2_options_from_json(const std::string& config_path, int64_t& vocab_size, int64_t& context);

/// Load a Hugging Face GPT-2 checkpoint (model.safetensors of GPT2LMHeadModel, names under
/// "transformer.", or of GPT2Model, names without it) into `model`, which must be built with
/// gelu_approximate GeluApproximate::Tanh, head_bias false and the checkpoint's sizes (gpt2_from_pretrained does
/// that). The causal-mask buffers older files carry ("h.i.attn.bias", "h.i.attn.masked_bias") are
/// skipped. A FileError names the file and each missing, unexpected or mis-shaped tensor.
void load_hf_gpt2(GPT& model, const std::string& safetensors_path);

/// A GPT from a Hugging Face GPT-2 folder (config.json + model.safetensors), ready to generate.
std::unique_ptr<GPT> gpt2_from_pretrained(const std::string& folder);

/// Write `model` as transformers' GPT2LMHeadModel into `folder`: model.safetensors (Conv1D
/// layout, "transformer." names; a tied head is left out, as save_pretrained does, and config.json
/// says tie_word_embeddings) and config.json. The model must have head_bias false (GPT-2's lm_head has no bias).
void save_hf_gpt2(const GPT& model, const std::string& folder);

}  // namespace mg::models
