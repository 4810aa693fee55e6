#pragma once
// A tokenizer read from a Hugging Face model folder, the way transformers' AutoTokenizer reads it:
// the folder says which kind of tokenizer it is and with which options, and the user says nothing.
//
//   auto tok = data::AutoTokenizer::from_pretrained("all-MiniLM-L6-v2");
//   data::BatchEncoding batch = tok.encode_batch({"A cat.", "Dogs bark loudly."});
//
// What it reads, in the order transformers reads it:
//   tokenizer.json           the `tokenizers` library's file: the model (WordPiece or BPE), its
//                            vocabulary (and merges) and its normalizer's options. Read first when
//                            present, as the "fast" tokenizers do.
//   vocab.txt                BERT's vocabulary (WordPiece), when there is no tokenizer.json.
//   vocab.json + merges.txt  GPT-2's vocabulary and merges (byte-level BPE), likewise.
//   tokenizer_config.json    options over those: do_lower_case, strip_accents,
//                            tokenize_chinese_chars, model_max_length, the special tokens. When
//                            its tokenizer_class is BertTokenizer, transformers 5 takes only the
//                            vocabulary from tokenizer.json and the options from here or its
//                            defaults (lower-case, [CLS], [SEP], ...); so do we.
//   special_tokens_map.json  the special tokens again; its values win over tokenizer_config.json's.
//
// A cased BERT's folder says do_lower_case false, so it gets cased ids; no option to remember.
// model_max_length is what encode_batch truncates to by default (512 for BERT's folders).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "minigrad/data/bpe.h"
#include "minigrad/data/wordpiece.h"

namespace mg::data {

/// The kinds of tokenizer a folder can hold.
enum class TokenizerKind {
  WordPiece,  // BERT's: data::WordPieceTokenizer
  BPE,        // GPT-2's byte-level BPE: data::GPT2Tokenizer
};

/// A WordPiece or byte-level BPE tokenizer and its options, read from a model folder.
class AutoTokenizer {
 public:
  /// Read the tokenizer of a Hugging Face model folder (see the top of this file for the files).
  /// A FileError when `folder` is missing, is a file (it names the folder to pass instead), or
  /// holds none of tokenizer.json, vocab.txt, vocab.json + merges.txt (it lists what it found);
  /// a ValueError naming the file and field of a bad or unsupported setting.
  static AutoTokenizer from_pretrained(const std::string& folder);

  /// WordPiece or BPE.
  TokenizerKind kind() const { return wordpiece_ ? TokenizerKind::WordPiece : TokenizerKind::BPE; }
  /// The WordPiece tokenizer; a ValueError when the folder holds BPE.
  const WordPieceTokenizer& wordpiece() const;
  /// The byte-level BPE tokenizer; a ValueError when the folder holds WordPiece.
  const GPT2Tokenizer& bpe() const;

  /// One text's ids as the model reads them: WordPiece [CLS] text [SEP], truncated to max_length
  /// (unset: model_max_length); BPE the plain ids (GPT-2's tokenizer adds no special tokens),
  /// truncated likewise.
  std::vector<int64_t> encode(const std::string& text, std::optional<int64_t> max_length = std::nullopt) const;
  /// Texts encoded as encode() does, padded on the right with the pad token to the longest
  /// (transformers' tokenizer(texts, padding=True, truncation=True)). A ValueError when the
  /// tokenizer has no pad token (GPT-2's folder has none), as transformers says.
  BatchEncoding encode_batch(const std::vector<std::string>& texts,
                             std::optional<int64_t> max_length = std::nullopt) const;
  /// Ids back to text. skip_special_tokens false by default, as transformers' decode.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const;

  /// A copy that lower-cases every text first, as sentence-transformers' do_lower_case adds a
  /// Lowercase normalizer in front of the folder's: WordPiece with do_lower_case on and
  /// strip_accents as it was. A ValueError for BPE (GPT-2's byte-level BPE keeps case).
  AutoTokenizer with_lower_case() const;

  /// Tokens in the vocabulary.
  int64_t vocab_size() const;
  /// The longest sequence the model takes (tokenizer_config.json's model_max_length); INT64_MAX
  /// when the folder does not say (transformers' "very large integer").
  int64_t model_max_length() const { return model_max_length_; }
  /// The pad token's id, if the tokenizer has one.
  std::optional<int64_t> pad_token_id() const { return pad_id_; }
  /// The end-of-sequence token's id (GPT-2's <|endoftext|>; BERT's folders name none), if any.
  std::optional<int64_t> eos_token_id() const { return eos_id_; }
  /// The folder it was read from.
  const std::string& folder() const { return folder_; }

 private:
  AutoTokenizer() = default;
  std::optional<WordPieceTokenizer> wordpiece_;
  std::optional<GPT2Tokenizer> bpe_;
  int64_t model_max_length_ = INT64_MAX;
  std::optional<int64_t> pad_id_, eos_id_;
  std::string folder_;
};

}  // namespace mg::data
