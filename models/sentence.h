#pragma once
// Sentence embeddings from a sentence-transformers folder, in one call, as its users write it:
//
//   auto st = models::SentenceTransformer::from_pretrained("all-MiniLM-L6-v2");
//   Tensor e = st.encode({"A cat sat on the mat.", "A dog lay on the rug."});   // (2, 384)
//
// A sentence-transformers model is a pipeline of modules listed in the folder's modules.json.
// encode() runs exactly the pipeline the folder names, and what each step does is something you
// can also call yourself (docs/04-nn.md, "Published models", shows the steps one by one):
//
//   text --tokenizer--> ids (B, T) --BertModel--> token vectors (B, T, D) --pool--> (B, D) --L2--> (B, D)
//         Transformer module: the model folder        Pooling module:           Normalize module
//         (tokenizer files, config.json, weights),    1_Pooling/config.json     (no settings)
//         sentence_bert_config.json: max_seq_length
//         and do_lower_case
//
// Pooling turns the T vectors of a text into one. sentence-transformers names six modes; a folder
// may ask for several, and their vectors are concatenated in the order it lists them:
//   cls          the first real token's vector ([CLS])
//   max          each feature's largest value over the real tokens
//   mean         the mean of the real tokens' vectors (all-MiniLM-L6-v2's)
//   mean_sqrt_len_tokens  their sum divided by sqrt(number of real tokens)
//   weightedmean the mean weighted by position: token t (from 1) weighs t
//   lasttoken    the last real token's vector (decoder-style models)
// "Real" means attention_mask 1: padding never counts; [CLS] and [SEP] do.
//
// encode() runs without recording gradients (as sentence-transformers' encode does: twice the
// speed and half the memory), in eval mode, truncating each text to max_seq_length tokens (256 for
// all-MiniLM-L6-v2, whatever BERT's own 512 allows), and batching texts of similar length together
// (longest first, as sentence-transformers sorts them) so little is spent on padding. The rows come
// back in the order of the input.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "minigrad/data/auto_tokenizer.h"
#include "minigrad/models/bert.h"

namespace mg::models {

/// sentence-transformers' pooling modes (its names: "cls", "max", "mean", "mean_sqrt_len_tokens",
/// "weightedmean", "lasttoken").
enum class PoolingMode { CLS, Max, Mean, MeanSqrtLen, WeightedMean, LastToken };

/// The name sentence-transformers gives `mode` ("mean_sqrt_len_tokens").
const char* pooling_mode_name(PoolingMode mode);

/// sentence-transformers' Pooling module: its 1_Pooling/config.json.
struct PoolingConfig {
  /// The token vectors' width (the model's hidden_size).
  int64_t embedding_dimension = 0;
  /// The modes, each giving embedding_dimension numbers, concatenated in this order.
  std::vector<PoolingMode> modes{PoolingMode::Mean};
  /// false: the tokens of EncodeOptions::prompt are left out of the pooling (the cls mode then
  /// takes the first token after the prompt, as sentence-transformers does).
  bool include_prompt = true;

  /// Read a 1_Pooling/config.json in either of sentence-transformers' layouts: "pooling_mode" (one
  /// name or a list) with "embedding_dimension", or the older flags "pooling_mode_cls_token",
  /// "pooling_mode_max_tokens", ... with "word_embedding_dimension" (no flag set means mean).
  /// A FileError when it cannot be read or is not JSON; a ValueError naming the file and the field.
  static PoolingConfig from_json_file(const std::string& path);
};

/// Pooling, differentiable: hidden (B, T, D) and attention_mask (B, T) int64 or Bool (1 a real
/// token, 0 padding) -> (B, D * config.modes.size()). The first prompt_length real tokens of each
/// row are left out when config.include_prompt is false. Derivatives: mean-like modes send each
/// real token its weight times dy (weight 1/n, 1/sqrt(n), t/sum(t)); max sends dy to the
/// largest entry; cls and lasttoken to the one token they read; padding gets 0.
Variable pool(const Variable& hidden, const Tensor& attention_mask, const PoolingConfig& config,
              int64_t prompt_length = 0);

/// Options of SentenceTransformer::encode (sentence-transformers' names and defaults).
struct EncodeOptions {
  /// Texts per forward pass.
  int64_t batch_size = 32;
  /// L2-normalise each embedding (the folder's Normalize module does it anyway).
  bool normalize_embeddings = false;
  /// Text put in front of every input ("query: "); with a Pooling include_prompt false its tokens
  /// are not pooled.
  std::string prompt;
  /// Print "Batches: i/n" to stderr as it goes. Unset: when stderr is a terminal and there are at
  /// least 4 batches.
  std::optional<bool> show_progress_bar;
};

/// A sentence-transformers model read from its folder: tokenizer, BERT encoder, pooling, normalise.
class SentenceTransformer {
 public:
  /// Read a sentence-transformers folder: modules.json (Transformer, Pooling and Normalize modules;
  /// a folder without modules.json is a plain Hugging Face BERT folder, and gets mean pooling as
  /// sentence-transformers gives it), sentence_bert_config.json, the Pooling module's
  /// config.json, and the Transformer module's Hugging Face folder (models::bert_from_pretrained,
  /// data::AutoTokenizer::from_pretrained). Errors name the file and what it expected; a module
  /// type it cannot run (Dense, say) is a ValueError naming it.
  static SentenceTransformer from_pretrained(const std::string& folder);

  /// The embeddings of `sentences` -> (N, get_sentence_embedding_dimension()), row i for sentence i,
  /// in the model's dtype (float32 as loaded). No gradients are recorded, and the model is put in
  /// eval mode. N may be 0.
  Tensor encode(const std::vector<std::string>& sentences, const EncodeOptions& options = {}) const;
  /// One sentence's embedding -> (dimension).
  Tensor encode(const std::string& sentence, const EncodeOptions& options = {}) const;

  /// The texts as the model reads them: lower-cased first with do_lower_case, then tokenized,
  /// truncated to max_seq_length and padded to the longest.
  data::BatchEncoding tokenize(const std::vector<std::string>& texts) const;
  /// The pipeline on a tokenized batch, recorded (for fine-tuning): BertModel, pool, and L2 when
  /// the folder has a Normalize module -> (B, dimension). prompt_length as in pool().
  Variable forward(const data::BatchEncoding& batch, int64_t prompt_length = 0) const;

  /// The width of an embedding: embedding_dimension times the number of pooling modes.
  int64_t get_sentence_embedding_dimension() const {
    return pooling.embedding_dimension * static_cast<int64_t>(pooling.modes.size());
  }

  /// Texts are cut to this many tokens, [CLS] and [SEP] included (sentence_bert_config.json's
  /// max_seq_length, at most the model's max_position_embeddings). May be changed, up to that.
  int64_t max_seq_length = 512;
  /// Lower-case each text before the tokenizer sees it (sentence_bert_config.json).
  bool do_lower_case = false;
  /// The folder lists a Normalize module: every embedding has L2 norm 1.
  bool normalize = false;
  PoolingConfig pooling;
  data::AutoTokenizer tokenizer;
  std::shared_ptr<BertModel> model;  // in eval mode; model->to(DType::Float64) makes encode float64

 private:
  SentenceTransformer(data::AutoTokenizer tok, std::shared_ptr<BertModel> m)
      : tokenizer(std::move(tok)), model(std::move(m)) {}
};

}  // namespace mg::models
