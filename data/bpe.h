#pragma once
// GPT-2's tokenizer: text -> the integer ids a GPT-2-style model reads, by byte-level BPE.
//
// It works in three stages.
//
// 1. Bytes as characters. The text is taken as UTF-8 *bytes*, and each of the 256 byte values is
//    written as one printable character, so that any byte string, valid UTF-8 or not, has a
//    spelling, and no byte is ever unknown. The printable bytes ("!".."~", "¡".."¬", "®".."ÿ") stand
//    for themselves; the other 68 (controls, space, DEL, no-break space, soft hyphen) are given the
//    code points U+0100, U+0101, ... in byte order. So space (0x20) is written "Ġ" (U+0120),
//    newline (0x0A) "Ċ" (U+010A), and "é" (the bytes C3 A9) is the two characters "Ã©".
//
// 2. Pre-tokenization cuts the text into words, which BPE never merges across. The pattern is
//      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//    tried left to right at each place, the first alternative that matches winning: an English
//    contraction; else a run of letters, of digits, or of other symbols, each with at most one
//    space in front; else a run of whitespace, leaving its last character to the next word when
//    one follows (so that word gets its " "). "I'm here  now!" -> I|'m| here| | now|!
//    \s is Unicode's White_Space (ICU's u_isUWhiteSpace: tab..CR, space, U+0085, U+00A0, U+2028,
//    U+3000, ...; not U+001C..U+001F, which Python's str.isspace counts); \p{L} and \p{N} are
//    the general categories L* and N*. We match it by hand with ICU, no regex engine.
//
// 3. Byte-pair merges. merges.txt lists pairs of tokens, most frequent in the training text first;
//    line k (from 0) has rank k. A word starts as its single byte-characters, and while some two
//    neighbours form a listed pair, the pair of lowest rank is joined (the leftmost, on a tie).
//    With the merges "h e" (rank 0), "l l" (1), "he ll" (2):
//      h e l l o  ->  he l l o  ->  he ll o  ->  hell o        " hello" would start with "Ġ"
//    Each resulting token is looked up in vocab.json for its id.
//
// Decoding runs it backwards: ids -> token strings -> each character back to its byte -> the
// bytes read as UTF-8, where a part that is not valid UTF-8 (ids cut inside a character) becomes
// U+FFFD, as Python's bytes.decode(errors="replace").
//
//   auto tok = data::GPT2Tokenizer::from_files("vocab.json", "merges.txt");
//   tok.tokenize("Hello world");               // {"Hello", "Ġworld"} under GPT-2's own files
//   tok.decode(tok.encode("naïve café"));      // "naïve café"
//
// The ids equal Hugging Face's GPT2TokenizerFast (the `tokenizers` library, which is also
// transformers 5's GPT2Tokenizer), default options: no prefix space, no BOS/EOS added, and the
// special token "<|endoftext|>" written in the text is that one token, with no space stripped
// around it ("a <|endoftext|> b" -> a|Ġ|<|endoftext|>|Ġb). NOTE: differences, all on purpose or
// out of reach:
//   - a character that Unicode assigned after version 15.0 (ICU 72's tables; `tokenizers` knows
//     Unicode 16) is "other" to us, not a letter or digit: U+105C0 (Todhri, Unicode 16) splits
//     "a\U000105C0b" in three, where `tokenizers` keeps one word;
//   - an id out of range is an IndexError in decode (`tokenizers` skips it), and a byte with no
//     token of its own is a ValueError in encode (`tokenizers` drops it; GPT-2's vocabulary has
//     all 256, so only a hand-made one can miss one).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace mg::data {

/// GPT-2's byte-level BPE tokenizer (Hugging Face's GPT2TokenizerFast, OpenAI's encoder.py).
class GPT2Tokenizer {
 public:
  /// Read GPT-2's two files. vocab.json is a JSON object token -> id, the ids 0..N-1 each used
  /// once; merges.txt has an optional first line starting with "#version", then one merge "a b"
  /// per line, rank = order. A FileError when a file cannot be read or is not JSON; a ValueError
  /// naming the file and the token or line for a bad id, a repeated id, a line that is not two
  /// tokens split by one space, a merge whose parts or result are not in the vocabulary, or a
  /// merge listed twice.
  static GPT2Tokenizer from_files(const std::string& vocab_json, const std::string& merges_txt);
  /// Read the one file the `tokenizers` library writes, tokenizer.json, when it holds GPT-2's kind
  /// of BPE: model.type "BPE" with its vocab and merges (as "a b" strings or ["a", "b"] pairs),
  /// a ByteLevel pre-tokenizer without add_prefix_space, no dropout, unk_token or word affixes.
  /// A FileError when it cannot be read or is not JSON; a ValueError naming the file and the field
  /// for another kind of tokenizer or a bad vocabulary or merge (as from_files).
  static GPT2Tokenizer from_tokenizer_json(const std::string& path);

  /// Stage 2 alone: `text` (UTF-8) cut into the pattern's words, which BPE merges within but never
  /// across: "I'm here  now!" -> {"I", "'m", " here", " ", " now", "!"}. The special token is not
  /// looked for here. A ValueError naming the byte offset when `text` is not valid UTF-8.
  static std::vector<std::string> pre_tokenize(const std::string& text);
  /// The BPE tokens of `text` (UTF-8), as token strings in the byte alphabet: "hi there" ->
  /// {"hi", "Ġthere"}. "<|endoftext|>" in the text stays one token when the vocabulary has it.
  /// A ValueError naming the byte offset when `text` is not valid UTF-8.
  std::vector<std::string> tokenize(const std::string& text) const;
  /// The ids of tokenize(text). A ValueError also when a byte of the text has no token (a
  /// vocabulary without all 256 bytes).
  std::vector<int64_t> encode(const std::string& text) const;
  /// Ids back to text: the tokens' bytes, read as UTF-8 with each bad part replaced by U+FFFD.
  /// An IndexError for an id out of [0, vocab_size()).
  std::string decode(const std::vector<int64_t>& ids) const;

  /// Number of tokens in vocab.json.
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  /// The id of `token` (in the byte alphabet: "Ġthe"); a ValueError when it is not in the vocabulary.
  int64_t token_to_id(const std::string& token) const;
  /// The token of `id`; an IndexError out of [0, vocab_size()).
  const std::string& id_to_token(int64_t id) const;

  /// The byte alphabet: the one-character token (UTF-8) that stands for byte `b` (0x20 -> "Ġ").
  static const std::string& byte_to_token(uint8_t b);

 private:
  friend struct GPT2TokenizerReader;  // fills the tables from either kind of file (bpe.cpp)
  GPT2Tokenizer() = default;
  // one pre-tokenized word (UTF-8 bytes) -> its BPE tokens, appended to `out`
  void bpe(const std::string& word, std::vector<std::string>& out) const;

  std::vector<std::string> tokens_;                 // id -> token
  std::unordered_map<std::string, int64_t> ids_;    // token -> id
  std::unordered_map<std::string, int64_t> ranks_;  // "a b" (a merges.txt line) -> its rank
  std::string special_;                             // "<|endoftext|>" when the vocabulary has it, else ""
};

}  // namespace mg::data
