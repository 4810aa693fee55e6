// WordPieceTokenizer (data/wordpiece.h): BERT's basic tokenizer and WordPiece. The Unicode facts
// (categories, case mappings, canonical decomposition) are ICU's.
#include "minigrad/data/wordpiece.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "minigrad/data/utf8.h"
#include "minigrad/tensor/error.h"

namespace mg::data {
namespace {

using CodePoints = std::vector<UChar32>;

CodePoints to_code_points(const std::string& s, const char* op) {
  CodePoints out;
  const int64_t bad = invalid_utf8_offset(s, &out);
  MG_CHECK(bad < 0, ValueError, "{}: the text is not valid UTF-8 (byte offset {})", op, bad);
  return out;
}

std::string to_utf8(CodePoints::const_iterator begin, CodePoints::const_iterator end) {
  std::string s;
  for (auto it = begin; it != end; ++it) {
    uint8_t buf[4];
    int32_t len = 0;
    U8_APPEND_UNSAFE(buf, len, *it);  // *it is a valid code point: it came from U8_NEXT or ICU
    s.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(len));
  }
  return s;
}

// ---- what kind of character is c (the `tokenizers` library's definitions) ----

// Tab, newline and carriage return count as whitespace, although Unicode calls them controls.
bool is_whitespace(UChar32 c) { return c == '\t' || c == '\n' || c == '\r' || u_isUWhiteSpace(c); }

// c's general category as a bit (U_GC_MN_MASK for an accent, ...).
// NOTE: `tokenizers` reads categories from tables of Unicode 8.0 (2015): to it, a character added
// since is unassigned (not punctuation, not an accent, not a control). ICU tells the Unicode
// version that added c, and we do the same.
uint32_t category(UChar32 c) {
  UVersionInfo age;
  u_charAge(c, age);
  return age[0] > 8 ? U_GC_CN_MASK : U_GET_GC_MASK(c);
}

// Control (Cc), format (Cf: zero-width space, soft hyphen, ...) and private-use (Co) characters
// are dropped from the text, except tab, newline and carriage return.
bool is_control(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return (category(c) & (U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK)) != 0;
}

// Every ASCII non-letter, non-digit ("$", "+", "^" are symbols to Unicode), and every Unicode
// punctuation category (P*).
bool is_punctuation(UChar32 c) {
  if (c < 128) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  return (category(c) & U_GC_P_MASK) != 0;
}

// The CJK ideograph blocks that BERT cuts into one word per character (not Hangul, Hiragana or
// Katakana, which are written with spaces or are split by WordPiece).
// NOTE: 0x2B920 (not 0x2B820) is where `tokenizers` starts the fifth range; the Python tokenizer
// says 0x2B820. We follow `tokenizers`, so U+2B820..U+2B91F are not cut.
bool is_cjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void check_icu(UErrorCode status, const char* what) {
  MG_CHECK(U_SUCCESS(status), ValueError, "WordPieceTokenizer: ICU failed to {}: {}", what, u_errorName(status));
}

// ---- the normalizer: clean, space out CJK, strip accents, lower-case ----

CodePoints normalize(const CodePoints& text, bool strip_accents, const WordPieceOptions& o) {
  CodePoints out;
  out.reserve(text.size());
  for (UChar32 c : text) {
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_whitespace(c)) {
      out.push_back(' ');
    } else if (o.tokenize_chinese_chars && is_cjk(c)) {
      out.insert(out.end(), {' ', c, ' '});
    } else {
      out.push_back(c);
    }
  }
  if (strip_accents) {
    // NFD splits "é" into "e" + U+0301 (a non-spacing mark, category Mn), which we drop.
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
    check_icu(status, "load NFD data");
    // ICU's strings count in int32: a longer text would be cut short without a word
    MG_CHECK(out.size() <= static_cast<size_t>(INT32_MAX / 2), ValueError,
             "WordPieceTokenizer: a text of {} code points is more than ICU's strings hold ({}); split it first",
             out.size(), INT32_MAX / 2);
    const icu::UnicodeString decomposed =
        nfd->normalize(icu::UnicodeString::fromUTF32(out.data(), static_cast<int32_t>(out.size())), status);
    check_icu(status, "decompose the text (NFD)");
    out.clear();
    for (int32_t i = 0; i < decomposed.length(); i = decomposed.moveIndex32(i, 1)) {
      const UChar32 c = decomposed.char32At(i);
      if (!(category(c) & U_GC_MN_MASK)) out.push_back(c);
    }
  }
  if (o.do_lower_case) {
    // NOTE: one character at a time, as `tokenizers` does (its Rust char::to_lowercase): full
    // mappings ("İ" -> "i" + U+0307 when accents are kept), but no final sigma: "ΟΔΟΣ" -> "οδοσ".
    CodePoints lower;
    lower.reserve(out.size());
    for (UChar32 c : out) {
      if (c < 128) {
        lower.push_back(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
        continue;
      }
      icu::UnicodeString s(c);
      s.toLower(icu::Locale::getRoot());
      for (int32_t i = 0; i < s.length(); i = s.moveIndex32(i, 1)) lower.push_back(s.char32At(i));
    }
    out = std::move(lower);
  }
  return out;
}

// Hugging Face's decoder tidies each piece with these replacements (" ." -> "."); for pieces this
// tokenizer makes, only the first four can apply.
const std::pair<const char*, const char*> kDecodeCleanup[] = {
    {" .", "."},   {" ?", "?"},   {" !", "!"},     {" ,", ","},           {" ' ", "'"},   {" n't", "n't"},
    {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" do not", " don't"}, {" 're", "'re"}};

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace

// ---- the vocabulary ----

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab, WordPieceOptions options)
    : WordPieceTokenizer(std::move(vocab), std::move(options), "") {}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab, WordPieceOptions options,
                                       const std::string& path)
    : options_(std::move(options)), tokens_(std::move(vocab)) {
  // where token i came from, for the error messages: "vocab.txt line 8" or "vocabulary id 7"
  auto where = [&](size_t i) {
    return path.empty() ? fmt::format("vocabulary id {}", i) : fmt::format("{} line {}", path, i + 1);
  };
  const char* op = path.empty() ? "WordPieceTokenizer" : "WordPieceTokenizer::from_file";
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& t = tokens_[i];
    MG_CHECK(!t.empty(), ValueError, "{}: {} is empty (a token cannot be the empty string)", op, where(i));
    const int64_t bad = invalid_utf8_offset(t);
    MG_CHECK(bad < 0, ValueError, "{}: {} is not valid UTF-8 (byte offset {})", op, where(i), bad);
    auto [it, added] = ids_.emplace(t, static_cast<int64_t>(i));
    MG_CHECK(added, ValueError, "{}: {} repeats the token '{}' of {}", op, where(i), t, where(it->second));
  }
  MG_CHECK(options_.max_input_chars_per_word >= 0, ValueError, "{}: max_input_chars_per_word must be >= 0, got {}", op,
           options_.max_input_chars_per_word);
  // The longest piece the vocabulary has, in code points (a "##" piece counted without its "##"):
  // wordpiece() tries no longer candidate, so a long word costs O(length x this), not O(length^2).
  for (const std::string& t : tokens_) {
    const size_t skip = t.starts_with("##") ? 2 : 0;
    int64_t chars = 0;
    for (size_t i = skip; i < t.size(); ++i) chars += !U8_IS_TRAIL(static_cast<uint8_t>(t[i]));
    max_piece_chars_ = std::max(max_piece_chars_, chars);
  }
  const std::string source = path.empty() ? "the vocabulary" : fmt::format("the vocabulary {}", path);
  auto required = [&](const std::string& token, const char* name) {
    auto it = ids_.find(token);
    MG_CHECK(it != ids_.end(), ValueError, "{}: {} has no {} '{}'", op, source, name, token);
    specials_.push_back(token);
    return it->second;
  };
  unk_id_ = required(options_.unk_token, "unk_token");
  cls_id_ = required(options_.cls_token, "cls_token");
  sep_id_ = required(options_.sep_token, "sep_token");
  pad_id_ = required(options_.pad_token, "pad_token");
  if (ids_.count(options_.mask_token)) specials_.push_back(options_.mask_token);
}

WordPieceTokenizer WordPieceTokenizer::from_file(const std::string& vocab_path, WordPieceOptions options) {
  std::error_code ec;
  MG_CHECK(!std::filesystem::is_directory(vocab_path, ec), FileError,
           "WordPieceTokenizer::from_file: '{}' is a directory, not a vocab.txt", vocab_path);
  std::ifstream in(vocab_path, std::ios::binary);
  MG_CHECK(in.is_open(), FileError, "WordPieceTokenizer::from_file: cannot open '{}'", vocab_path);
  std::vector<std::string> tokens;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file written on Windows
    tokens.push_back(std::move(line));
  }
  MG_CHECK(!in.bad(), FileError, "WordPieceTokenizer::from_file: error reading '{}' after {} lines", vocab_path,
           tokens.size());
  return WordPieceTokenizer(std::move(tokens), std::move(options), vocab_path);
}

int64_t WordPieceTokenizer::token_to_id(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? unk_id_ : it->second;
}

const std::string& WordPieceTokenizer::id_to_token(int64_t id) const {
  MG_CHECK(id >= 0 && id < vocab_size(), IndexError,
           "WordPieceTokenizer::id_to_token: id {} is out of range for a vocabulary of {} tokens", id, vocab_size());
  return tokens_[static_cast<size_t>(id)];
}

bool WordPieceTokenizer::is_special(const std::string& token) const {
  return std::find(specials_.begin(), specials_.end(), token) != specials_.end();
}

// ---- text -> tokens ----

std::vector<std::string> WordPieceTokenizer::basic_tokenize(const std::string& text) const {
  const bool strip = options_.strip_accents.value_or(options_.do_lower_case);
  const CodePoints cps = normalize(to_code_points(text, "WordPieceTokenizer::basic_tokenize"), strip, options_);
  // split on whitespace (dropped) and around punctuation (kept, one character per word)
  std::vector<std::string> words;
  auto word_start = cps.begin();
  for (auto it = cps.begin(); it != cps.end(); ++it) {
    if (!is_whitespace(*it) && !is_punctuation(*it)) continue;
    if (word_start != it) words.push_back(to_utf8(word_start, it));
    if (is_punctuation(*it)) words.push_back(to_utf8(it, it + 1));
    word_start = it + 1;
  }
  if (word_start != cps.end()) words.push_back(to_utf8(word_start, cps.end()));
  return words;
}

std::vector<std::string> WordPieceTokenizer::wordpiece(const std::string& word) const {
  const int64_t bad = invalid_utf8_offset(word);
  MG_CHECK(bad < 0, ValueError, "WordPieceTokenizer::wordpiece: the word is not valid UTF-8 (byte offset {})", bad);
  // the byte offset where each code point starts, and the end
  std::vector<size_t> bounds;
  for (size_t i = 0; i < word.size(); ++i)
    if (!U8_IS_TRAIL(static_cast<uint8_t>(word[i]))) bounds.push_back(i);
  const int64_t chars = static_cast<int64_t>(bounds.size());
  bounds.push_back(word.size());
  if (chars > options_.max_input_chars_per_word) return {options_.unk_token};

  std::vector<std::string> pieces;
  size_t start = 0;  // index into bounds: the first code point not yet covered
  while (start + 1 < bounds.size()) {
    // the longest piece of the vocabulary that starts here: try word[start:end] for end = the
    // word's end (or as far as the longest piece reaches), then one code point shorter, ...
    bool found = false;
    const size_t longest = start + static_cast<size_t>(std::min<int64_t>(max_piece_chars_, chars));
    for (size_t end = std::min(bounds.size() - 1, longest); end > start; --end) {
      std::string piece = word.substr(bounds[start], bounds[end] - bounds[start]);
      if (start > 0) piece = "##" + piece;  // a piece that continues a word
      if (ids_.count(piece)) {
        pieces.push_back(std::move(piece));
        start = end;
        found = true;
        break;
      }
    }
    if (!found) return {options_.unk_token};  // no piece fits: the whole word is unknown
  }
  return pieces;
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
  to_code_points(text, "WordPieceTokenizer::tokenize");  // only to report invalid UTF-8 with its offset
  std::vector<std::string> out;
  auto add_text = [&](const std::string& piece) {
    for (const std::string& word : basic_tokenize(piece))
      for (std::string& p : wordpiece(word)) out.push_back(std::move(p));
  };
  // Special tokens written in the text ("a [MASK] b") are single tokens, found before any cleaning
  // (so "[mask]" is not one). Where several start at one place, the longest wins.
  size_t done = 0;
  for (size_t i = 0; i < text.size();) {
    const std::string* match = nullptr;
    for (const std::string& s : specials_)
      if (text.compare(i, s.size(), s) == 0 && (!match || s.size() > match->size())) match = &s;
    if (!match) {
      ++i;
      continue;
    }
    add_text(text.substr(done, i - done));
    out.push_back(*match);
    i += match->size();
    done = i;
  }
  add_text(text.substr(done));
  return out;
}

// ---- tokens -> model inputs ----

Encoding WordPieceTokenizer::encode(const std::string& text, std::optional<std::string> pair, int64_t max_length,
                                    bool truncation) const {
  const OpScope scope("WordPieceTokenizer::encode");  // tokenize's and token_to_id's errors name encode
  auto ids_of = [&](const std::string& t) {
    std::vector<int64_t> ids;
    for (const std::string& token : tokenize(t)) ids.push_back(token_to_id(token));
    return ids;
  };
  std::vector<int64_t> a = ids_of(text), b = pair ? ids_of(*pair) : std::vector<int64_t>{};
  const int64_t specials = pair ? 3 : 2;  // [CLS] a [SEP] (b [SEP])
  const int64_t na = static_cast<int64_t>(a.size()), nb = static_cast<int64_t>(b.size());
  if (na + nb + specials > max_length) {
    MG_CHECK(truncation, ValueError,
             "WordPieceTokenizer::encode: the encoding has {} tokens, more than max_length {} "
             "(hint: pass truncation = true)",
             na + nb + specials, max_length);
    MG_CHECK(max_length >= specials, ValueError,
             "WordPieceTokenizer::encode: max_length {} leaves no room for the {} special tokens", max_length,
             specials);
    const int64_t budget = max_length - specials;
    if (!pair) {
      a.resize(static_cast<size_t>(budget));
    } else {
      // Hugging Face's "longest_first": the shorter segment keeps all its tokens if they fill at
      // most half the budget and the longer gets the rest; else each gets half, the odd token
      // going to the longer one (to b on a tie).
      const bool a_short = na <= nb;
      const int64_t s = std::min(na, nb);
      const int64_t keep_short = 2 * s <= budget ? s : budget / 2;
      const int64_t keep_long = budget - keep_short;
      a.resize(static_cast<size_t>(std::min(na, a_short ? keep_short : keep_long)));
      b.resize(static_cast<size_t>(std::min(nb, a_short ? keep_long : keep_short)));
    }
  }
  Encoding e;
  e.input_ids.push_back(cls_id_);
  e.input_ids.insert(e.input_ids.end(), a.begin(), a.end());
  e.input_ids.push_back(sep_id_);
  e.token_type_ids.assign(e.input_ids.size(), 0);
  if (pair) {
    e.input_ids.insert(e.input_ids.end(), b.begin(), b.end());
    e.input_ids.push_back(sep_id_);
    e.token_type_ids.resize(e.input_ids.size(), 1);
  }
  e.attention_mask.assign(e.input_ids.size(), 1);
  return e;
}

BatchEncoding WordPieceTokenizer::encode_batch(const std::vector<std::string>& texts, int64_t max_length) const {
  const OpScope scope("WordPieceTokenizer::encode_batch");
  std::vector<Encoding> encodings;
  size_t T = 0;  // the longest encoding
  for (const std::string& t : texts) {
    encodings.push_back(encode(t, std::nullopt, max_length, true));
    T = std::max(T, encodings.back().input_ids.size());
  }
  const size_t B = texts.size();
  std::vector<int64_t> ids(B * T, pad_id_), types(B * T, 0), mask(B * T, 0);
  for (size_t i = 0; i < B; ++i) {
    const Encoding& e = encodings[i];
    std::copy(e.input_ids.begin(), e.input_ids.end(), ids.begin() + i * T);
    std::copy(e.token_type_ids.begin(), e.token_type_ids.end(), types.begin() + i * T);
    std::copy(e.attention_mask.begin(), e.attention_mask.end(), mask.begin() + i * T);
  }
  const Shape shape{static_cast<int64_t>(B), static_cast<int64_t>(T)};
  return {from_vector(ids, shape), from_vector(types, shape), from_vector(mask, shape)};
}

std::string WordPieceTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  const OpScope scope("WordPieceTokenizer::decode");  // id_to_token's range error names decode
  std::string text;
  bool first = true;
  for (int64_t id : ids) {
    const std::string& token = id_to_token(id);
    if (skip_special_tokens && is_special(token)) continue;
    std::string piece;
    if (first)
      piece = token;  // even a "##" piece stays as it is at the start
    else if (token.starts_with("##"))
      piece = token.substr(2);  // glued to the piece before
    else
      piece = " " + token;
    for (const auto& [from, to] : kDecodeCleanup) replace_all(piece, from, to);
    text += piece;
    first = false;
  }
  return text;
}

}  // namespace mg::data
