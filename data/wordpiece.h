#pragma once
// BERT's tokenizer: text -> the integer ids a BERT-style model (all-MiniLM-L6-v2, ...) reads.
//
// It works in two stages.
//
// 1. The basic tokenizer cleans the text and cuts it into words:
//      - drop control and format characters (U+0000, U+FFFD, zero-width spaces, ...),
//        turn every kind of whitespace (tab, newline, no-break space, ...) into a plain space;
//      - put spaces around Chinese/Japanese ideographs, so that each becomes a word of its own;
//      - (uncased models) strip accents ("é" is split into "e" plus a combining accent, the accent
//        is dropped) and lower-case;
//      - split on whitespace, and make every punctuation character a word of its own.
//    "Héllo, Wörld!" -> hello , world !
//
// 2. WordPiece splits each word into pieces of the vocabulary, taking at each step the longest piece
//    that matches. A piece that continues a word is written with "##" in front, so the vocabulary
//    tells "able" (a word) from "##able" (the end of one):
//      unaffable: "unaffable"? no ... "un"? yes      -> un
//                 "##affable"? no ... "##aff"? yes   -> ##aff
//                 "##able"? yes                      -> ##able      = un ##aff ##able
//    A word that cannot be covered this way, or is longer than max_input_chars_per_word code points,
//    becomes the single token [UNK].
//
// Finally encode() wraps the ids as the model expects: [CLS] a [SEP] for one text, [CLS] a [SEP] b
// [SEP] for a pair, with token_type_ids telling the two segments apart.
//
//   auto tok = data::WordPieceTokenizer::from_file("vocab.txt");
//   tok.tokenize("unaffable");                  // {"un", "##aff", "##able"}
//   data::Encoding e = tok.encode("Hello!");    // input_ids [CLS] hello ! [SEP]
//
// The result equals Hugging Face's BertTokenizerFast (the `tokenizers` library, which
// sentence-transformers uses). NOTE: it differs from the older pure-Python BertTokenizer in a few
// places, and we follow the fast one:
//   - accents are stripped *before* lower-casing, and each character is lower-cased on its own
//     (Greek "ΟΔΟΣ" -> "οδοσ", where Python's str.lower gives the final sigma "οδος");
//   - every Unicode whitespace character is a space (U+2028 too), and private-use characters are
//     dropped like control characters;
//   - the ideographs U+2B820..U+2B91F are not cut apart (a range typo in `tokenizers`).
// As in both, special tokens written verbatim in the text ("a [MASK] b") stay single tokens.
// Unicode data (categories, case mappings, NFD) comes from ICU. `tokenizers` classifies characters
// (punctuation, accent, control) with the tables of Unicode 8.0, and so do we, by asking ICU which
// Unicode version added a character. A few dozen rare characters still differ: ones whose category
// changed since (U+166D, U+1885), and capitals of Unicode 16, newer than Debian's ICU 72.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg::data {

/// How to tokenize (Hugging Face's names and defaults).
struct WordPieceOptions {
  /// Lower-case the text (uncased models)
  bool do_lower_case = true;
  /// Unset: follows do_lower_case, as Hugging Face.
  std::optional<bool> strip_accents;
  /// Each CJK ideograph is a word of its own.
  bool tokenize_chinese_chars = true;
  std::string unk_token = "[UNK]", cls_token = "[CLS]", sep_token = "[SEP]", pad_token = "[PAD]";
  /// Longer words become unk_token.
  int64_t max_input_chars_per_word = 100;
  /// A special token too when the vocabulary has it (optional)
  std::string mask_token = "[MASK]";

  bool operator==(const WordPieceOptions&) const = default;
};

/// One text (or pair of texts) as ids: [CLS] a [SEP] (b [SEP]).
struct Encoding {
  std::vector<int64_t> input_ids;       // token ids
  std::vector<int64_t> token_type_ids;  // 0 for [CLS] a [SEP], 1 for b [SEP]
  std::vector<int64_t> attention_mask;  // all 1
};

/// A batch of texts, padded to the longest: int64 tensors of shape (B, T).
struct BatchEncoding {
  Tensor input_ids;       // (B, T), pad_token's id after each text's end
  Tensor token_type_ids;  // (B, T), all 0 (one segment per text)
  Tensor attention_mask;  // (B, T), 1 on tokens, 0 on padding
};

/// BERT's tokenizer (Hugging Face's BertTokenizerFast): basic tokenizer, then WordPiece.
class WordPieceTokenizer {
 public:
  /// Token i of `vocab` has id i. A ValueError for an empty or duplicate token, invalid UTF-8, or
  /// unk/cls/sep/pad_token missing from the vocabulary.
  explicit WordPieceTokenizer(std::vector<std::string> vocab, WordPieceOptions options = {});
  /// Read BERT's vocab.txt: one token per line, id = line number from 0 (a trailing '\r' is
  /// dropped). A FileError when it cannot be read; a ValueError naming the file and line for a
  /// duplicate, empty or invalid line.
  /// A tokenizer.json (a file whose text starts with '{') is read by from_tokenizer_json instead,
  /// and then `options` must be left at their defaults (the file carries its own).
  static WordPieceTokenizer from_file(const std::string& vocab_path, WordPieceOptions options = {});
  /// Read the one file the `tokenizers` library writes, tokenizer.json, when it holds a WordPiece
  /// model: the vocabulary from model.vocab (token -> id, ids 0..N-1), unk_token and
  /// max_input_chars_per_word from the model, do_lower_case, strip_accents and
  /// tokenize_chinese_chars from its BertNormalizer, cls and sep from its post-processor, pad from
  /// its padding. A FileError when it cannot be read or is not JSON; a ValueError naming the file
  /// and the field for another kind of tokenizer (BPE, a prefix other than "##", clean_text off)
  /// or a bad vocabulary.
  static WordPieceTokenizer from_tokenizer_json(const std::string& path);

  /// The words of `text` after cleaning, accent stripping, lower-casing and punctuation splitting.
  /// A ValueError naming the byte offset when `text` is not valid UTF-8.
  std::vector<std::string> basic_tokenize(const std::string& text) const;
  /// One word's pieces, longest match first ("unaffable" -> un ##aff ##able), or {unk_token}.
  std::vector<std::string> wordpiece(const std::string& word) const;
  /// All pieces of `text`: basic_tokenize, then wordpiece on each word. Special tokens written in
  /// the text ("[MASK]") are kept whole.
  std::vector<std::string> tokenize(const std::string& text) const;

  /// The id of `token`, or unk_token's id when the vocabulary does not have it.
  int64_t token_to_id(const std::string& token) const;
  /// The token of `id`; an IndexError out of [0, vocab_size()).
  const std::string& id_to_token(int64_t id) const;
  /// Number of tokens in the vocabulary.
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  /// The options the tokenizer was made with.
  const WordPieceOptions& options() const { return options_; }

  /// [CLS] text [SEP] (pair [SEP]) as ids. Longer than max_length: with truncation, trimmed from
  /// the longer segment first (Hugging Face's "longest_first"); without, a ValueError. An empty
  /// pair is still a pair, [CLS] text [SEP] [SEP], as in `tokenizers` and HF's batch call.
  Encoding encode(const std::string& text, std::optional<std::string> pair = std::nullopt, int64_t max_length = 512,
                  bool truncation = true) const;
  /// Each text encoded (truncated to max_length), padded with pad_token to the longest.
  BatchEncoding encode_batch(const std::vector<std::string>& texts, int64_t max_length = 512) const;
  /// Ids back to text: tokens joined by spaces, "##" pieces glued to the one before, and
  /// ". , ! ?" glued to the word before (as Hugging Face's decoder). With skip_special_tokens,
  /// [CLS], [SEP], [PAD], [UNK] and [MASK] are left out. An IndexError for an id out of range.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = true) const;

 private:
  // path: where the vocabulary was read, for errors (a vocab.txt, or with json a tokenizer.json)
  WordPieceTokenizer(std::vector<std::string> vocab, WordPieceOptions options, const std::string& path, bool json);
  bool is_special(const std::string& token) const;

  WordPieceOptions options_;
  std::vector<std::string> tokens_;               // id -> token
  int64_t max_piece_chars_ = 0;                   // the longest token, in code points (no "##")
  std::unordered_map<std::string, int64_t> ids_;  // token -> id
  std::vector<std::string> specials_;             // special tokens found in the vocabulary
  int64_t unk_id_ = 0, cls_id_ = 0, sep_id_ = 0, pad_id_ = 0;
};

}  // namespace mg::data
