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
#include <nlohmann/json.hpp>

#include "minigrad/data/utf8.h"
#include "minigrad/tensor/error.h"
#include "minigrad/tensor/parallel.h"

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
    : WordPieceTokenizer(std::move(vocab), std::move(options), "", false) {}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab, WordPieceOptions options,
                                       const std::string& path, bool json)
    : options_(std::move(options)), tokens_(std::move(vocab)) {
  // where token i came from, for the error messages: "vocab.txt line 8" or "vocabulary id 7"
  auto where = [&](size_t i) {
    return path.empty() ? fmt::format("vocabulary id {}", i)
           : json       ? fmt::format("'{}' model.vocab id {}", path, i)
                        : fmt::format("{} line {}", path, i + 1);
  };
  const char* op = path.empty() ? "WordPieceTokenizer"
                   : json       ? "WordPieceTokenizer::from_tokenizer_json"
                                : "WordPieceTokenizer::from_file";
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
           "WordPieceTokenizer::from_file: '{}' is a directory, not a vocab.txt (data::AutoTokenizer::from_pretrained "
           "reads a model folder)",
           vocab_path);
  std::ifstream in(vocab_path, std::ios::binary);
  MG_CHECK(in.is_open(), FileError, "WordPieceTokenizer::from_file: cannot open '{}'", vocab_path);
  // A tokenizer.json (what a Hugging Face folder holds beside, or instead of, vocab.txt): a JSON
  // object, where a vocab.txt's first line is a token ("[PAD]").
  in >> std::ws;
  if (in.peek() == '{') {
    MG_CHECK(options == WordPieceOptions{}, ValueError,
             "WordPieceTokenizer::from_file: '{}' is a tokenizer.json, which carries its own options; pass none "
             "(or set them in the file)",
             vocab_path);
    return from_tokenizer_json(vocab_path);
  }
  in.seekg(0);
  std::vector<std::string> tokens;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file written on Windows
    tokens.push_back(std::move(line));
  }
  MG_CHECK(!in.bad(), FileError, "WordPieceTokenizer::from_file: error reading '{}' after {} lines", vocab_path,
           tokens.size());
  return WordPieceTokenizer(std::move(tokens), std::move(options), vocab_path, false);
}

WordPieceTokenizer WordPieceTokenizer::from_tokenizer_json(const std::string& path) {
  const char* op = "WordPieceTokenizer::from_tokenizer_json";
  std::error_code ec;
  MG_CHECK(!std::filesystem::is_directory(path, ec), FileError, "{}: '{}' is a directory, not a tokenizer.json", op,
           path);
  std::ifstream in(path, std::ios::binary);
  MG_CHECK(in.is_open(), FileError, "{}: cannot open '{}'", op, path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("{}: '{}' is not valid JSON: {}", op, path, e.what()));
  }
  MG_CHECK(j.is_object() && j.contains("model") && j["model"].is_object(), ValueError,
           "{}: '{}' has no \"model\" object (is it a tokenizers tokenizer.json?)", op, path);
  const nlohmann::json& m = j["model"];
  const std::string type = m.value("type", std::string(m.contains("merges") ? "BPE" : "WordPiece"));
  MG_CHECK(type == "WordPiece", ValueError,
           "{}: '{}' holds a {} tokenizer (model.type), not WordPiece; data::AutoTokenizer reads either", op, path,
           type);
  // a string field, or a ValueError naming it
  auto text = [&](const nlohmann::json& o, const char* field, const std::string& where, std::string fallback) {
    if (!o.contains(field) || o[field].is_null()) return fallback;
    MG_CHECK(o[field].is_string(), ValueError, "{}: '{}': {}.{} should be a string, got a JSON {}", op, path, where,
             field, o[field].type_name());
    return o[field].get<std::string>();
  };
  const std::string prefix = text(m, "continuing_subword_prefix", "model", "##");
  MG_CHECK(prefix == "##", ValueError,
           "{}: '{}': model.continuing_subword_prefix is '{}'; only BERT's \"##\" is supported", op, path, prefix);

  WordPieceOptions o;
  o.unk_token = text(m, "unk_token", "model", o.unk_token);
  if (m.contains("max_input_chars_per_word")) {
    MG_CHECK(m["max_input_chars_per_word"].is_number_integer(), ValueError,
             "{}: '{}': model.max_input_chars_per_word should be a whole number", op, path);
    o.max_input_chars_per_word = m["max_input_chars_per_word"].get<int64_t>();
  }
  // BertNormalizer: the basic tokenizer's cleaning, CJK splitting, accents and case.
  const nlohmann::json norm = j.value("normalizer", nlohmann::json());
  if (!norm.is_null()) {
    MG_CHECK(norm.is_object() && norm.value("type", std::string()) == "BertNormalizer", ValueError,
             "{}: '{}': normalizer is {}, expected a BertNormalizer (or none)", op, path,
             norm.is_object() ? "of type \"" + norm.value("type", std::string("?")) + "\"" : norm.type_name());
    MG_CHECK(norm.value("clean_text", true), ValueError,
             "{}: '{}': normalizer.clean_text is false; this tokenizer always cleans the text as BERT's does", op,
             path);
    auto flag = [&](const char* field, bool fallback) {
      if (!norm.contains(field) || norm[field].is_null()) return fallback;
      MG_CHECK(norm[field].is_boolean(), ValueError, "{}: '{}': normalizer.{} should be true, false or null", op, path,
               field);
      return norm[field].get<bool>();
    };
    o.do_lower_case = flag("lowercase", true);
    o.tokenize_chinese_chars = flag("handle_chinese_chars", true);
    if (norm.contains("strip_accents") && !norm["strip_accents"].is_null())
      o.strip_accents = flag("strip_accents", false);
  }
  // [CLS] and [SEP]: the post-processor's (TemplateProcessing's special tokens, or BertProcessing's pairs).
  const nlohmann::json post = j.value("post_processor", nlohmann::json());
  if (post.is_object()) {
    if (post.contains("cls") && post["cls"].is_array() && !post["cls"].empty() && post["cls"][0].is_string())
      o.cls_token = post["cls"][0].get<std::string>();
    if (post.contains("sep") && post["sep"].is_array() && !post["sep"].empty() && post["sep"][0].is_string())
      o.sep_token = post["sep"][0].get<std::string>();
    if (post.contains("single") && post["single"].is_array()) {
      std::vector<std::string> specials;
      for (const nlohmann::json& piece : post["single"])
        if (piece.contains("SpecialToken")) specials.push_back(text(piece["SpecialToken"], "id", "post_processor", ""));
      MG_CHECK(specials.size() == 2, ValueError,
               "{}: '{}': post_processor.single should be [CLS] A [SEP] (two special tokens), got {} special tokens",
               op, path, specials.size());
      o.cls_token = specials[0], o.sep_token = specials[1];
    }
  }
  const nlohmann::json pad = j.value("padding", nlohmann::json());
  if (pad.is_object()) o.pad_token = text(pad, "pad_token", "padding", o.pad_token);

  // The vocabulary: token -> id, the ids 0..N-1 each once.
  MG_CHECK(m.contains("vocab") && m["vocab"].is_object(), ValueError,
           "{}: '{}' has no model.vocab object of token -> id", op, path);
  const nlohmann::json& vocab = m["vocab"];
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> taken(vocab.size(), false);
  for (const auto& item : vocab.items()) {
    const nlohmann::json& id = item.value();
    MG_CHECK(id.is_number_unsigned() && id.get<uint64_t>() < tokens.size(), ValueError,
             "{}: '{}': model.vocab gives token '{}' the id {}; the ids of {} tokens must be 0..{}", op, path,
             item.key(), id.is_structured() ? std::string("a JSON ") + id.type_name() : id.dump(), tokens.size(),
             static_cast<int64_t>(tokens.size()) - 1);
    const size_t i = id.get<uint64_t>();
    MG_CHECK(!taken[i], ValueError, "{}: '{}': model.vocab gives the tokens '{}' and '{}' the same id {}", op, path,
             tokens[i], item.key(), i);
    taken[i] = true;
    tokens[i] = item.key();
  }
  return WordPieceTokenizer(std::move(tokens), std::move(o), path, true);
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
  // Each text on its own, the texts spread over the threads (set_num_threads): the same ids in
  // any order. A text that fails is encoded again here, on the calling thread, so that its error
  // is the first bad text's and reads as a serial loop's would.
  std::vector<Encoding> encodings(texts.size());
  std::vector<char> failed(texts.size(), 0);
  parallel_for(0, static_cast<int64_t>(texts.size()), 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      try {
        encodings[static_cast<size_t>(i)] = encode(texts[static_cast<size_t>(i)], std::nullopt, max_length, true);
      } catch (...) {
        failed[static_cast<size_t>(i)] = 1;
      }
    }
  });
  size_t T = 0;  // the longest encoding
  for (size_t i = 0; i < texts.size(); ++i) {
    if (failed[i]) encode(texts[i], std::nullopt, max_length, true);  // throws
    T = std::max(T, encodings[i].input_ids.size());
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
