// GPT2Tokenizer (data/bpe.h): GPT-2's byte-level BPE. Character classes (letter, digit, White_Space)
// are ICU's; the files are read with nlohmann-json.
#include "minigrad/data/bpe.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <functional>
#include <queue>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "minigrad/data/utf8.h"
#include "minigrad/tensor/error.h"

namespace mg::data {
namespace {

const char* const kSpecial = "<|endoftext|>";  // a single token wherever the text spells it out

std::string to_utf8(UChar32 c) {
  uint8_t buf[4];
  int32_t len = 0;
  U8_APPEND_UNSAFE(buf, len, c);
  return std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(len));
}

// ---- the byte alphabet ----

// Bytes that print as themselves: "!".."~", "¡".."¬", "®".."ÿ" (as Latin-1 code points).
bool prints_as_itself(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

// byte -> the code point that stands for it: itself when printable, else 256, 257, ... in byte order
const std::array<UChar32, 256>& byte_code_points() {
  static const std::array<UChar32, 256> table = [] {
    std::array<UChar32, 256> t{};
    UChar32 next = 256;
    for (int b = 0; b < 256; ++b) t[b] = prints_as_itself(b) ? b : next++;
    return t;
  }();
  return table;
}

// the way back: code point -> byte, or -1 for a code point outside the alphabet
int byte_of(UChar32 c) {
  static const std::vector<int> table = [] {
    std::vector<int> t(256 + 68, -1);  // the alphabet ends at U+0143: 68 bytes were moved up
    for (int b = 0; b < 256; ++b) t[static_cast<size_t>(byte_code_points()[b])] = b;
    return t;
  }();
  return c >= 0 && c < static_cast<UChar32>(table.size()) ? table[static_cast<size_t>(c)] : -1;
}

// ---- the pre-tokenizer, by hand ----

// The pattern's three classes and what is left: \s, \p{L}, \p{N}, [^\s\p{L}\p{N}].
enum class Kind { Space, Letter, Number, Other };

Kind kind_of(UChar32 c) {
  if (u_isUWhiteSpace(c)) return Kind::Space;  // Unicode's White_Space, as `regex` and `tokenizers`
  const uint32_t category = U_GET_GC_MASK(c);
  if (category & U_GC_L_MASK) return Kind::Letter;
  if (category & U_GC_N_MASK) return Kind::Number;
  return Kind::Other;
}

// Where the pattern's match starting at c[i] ends. The alternatives in the pattern's order:
//   's|'t|'re|'ve|'m|'ll|'d  |  ' ?\p{L}+' | ' ?\p{N}+' | ' ?[^\s\p{L}\p{N}]+'  |  \s+(?!\S) | \s+
size_t match_end(const std::vector<UChar32>& c, size_t i) {
  const size_t n = c.size();
  if (c[i] == '\'') {
    for (const char* rest : {"s", "t", "re", "ve", "m", "ll", "d"}) {
      size_t k = 0;
      while (rest[k] && i + 1 + k < n && c[i + 1 + k] == static_cast<UChar32>(rest[k])) ++k;
      if (!rest[k]) return i + 1 + k;
    }
  }
  // at most one space (U+0020 only), then a run of letters, digits or others
  const size_t start = c[i] == ' ' && i + 1 < n ? i + 1 : i;
  const Kind kind = kind_of(c[start]);
  if (kind != Kind::Space) {
    size_t j = start + 1;
    while (j < n && kind_of(c[j]) == kind) ++j;
    return j;
  }
  // a run of whitespace: all of it at the end of the text; else it leaves its last character to
  // the word that follows (\s+(?!\S)), unless that is its only one (\s+)
  size_t j = i + 1;
  while (j < n && kind_of(c[j]) == Kind::Space) ++j;
  return j < n && j - i >= 2 ? j - 1 : j;
}

// `text` (valid UTF-8) cut into the pattern's words, each a piece of its bytes.
std::vector<std::string> split_words(const std::string& text) {
  std::vector<UChar32> cps;
  std::vector<size_t> at;  // byte offset of each code point, and the end
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const int64_t n = static_cast<int64_t>(text.size());
  for (int64_t i = 0; i < n;) {
    at.push_back(static_cast<size_t>(i));
    UChar32 c;
    U8_NEXT(p, i, n, c);
    cps.push_back(c);
  }
  at.push_back(text.size());
  std::vector<std::string> words;
  for (size_t i = 0; i < cps.size();) {
    const size_t end = match_end(cps, i);
    words.push_back(text.substr(at[i], at[end] - at[i]));
    i = end;
  }
  return words;
}

// s with each maximal invalid part replaced by U+FFFD (Python's errors="replace", Rust's
// from_utf8_lossy): "\xF0\x9F" (an emoji cut short) is one U+FFFD, "\xC0\xAF" two.
std::string replace_invalid_utf8(const std::string& s) {
  std::string out;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const int64_t n = static_cast<int64_t>(s.size());
  for (int64_t i = 0; i < n;) {
    const int64_t start = i;
    UChar32 c;
    U8_NEXT(p, i, n, c);  // on a bad part, i stops at the first byte that cannot continue it
    if (c < 0)
      out += "\xEF\xBF\xBD";
    else
      out.append(s, static_cast<size_t>(start), static_cast<size_t>(i - start));
  }
  return out;
}

}  // namespace

// ---- the files ----

// Fills a GPT2Tokenizer's tables; both file layouts (vocab.json + merges.txt, tokenizer.json) go
// through it, so they check the same things in the same words.
struct GPT2TokenizerReader {
  GPT2Tokenizer& tok;
  const char* op;
  std::vector<std::string> merge_where;  // where each rank's merge was read, for the repeat error

  // {"token": id, ...}, the ids 0..N-1 each once; `source` names it ("'vocab.json'")
  void vocab(const nlohmann::json& vocab, const std::string& source) {
    MG_CHECK(vocab.is_object(), ValueError, "{}: {} must hold a JSON object of token -> id, not a JSON {}", op, source,
             vocab.type_name());
    const size_t n = vocab.size();
    tok.tokens_.resize(n);
    std::vector<bool> taken(n, false);
    for (const auto& item : vocab.items()) {  // (in the order of the tokens' bytes)
      const std::string& token = item.key();
      const nlohmann::json& id = item.value();
      // (a nested id is named by its type: dump() recurses, and a deep enough nesting overflows the stack)
      MG_CHECK(id.is_number_unsigned(), ValueError, "{}: {}: the id of token '{}' is {}, not a non-negative integer",
               op, source, token, id.is_structured() ? std::string("a JSON ") + id.type_name() : id.dump());
      const uint64_t i = id.get<uint64_t>();
      MG_CHECK(i < n, ValueError, "{}: {}: the id of token '{}' is {}, but the ids of {} tokens must be 0..{}", op,
               source, token, i, n, static_cast<int64_t>(n) - 1);
      MG_CHECK(!taken[i], ValueError, "{}: {}: the tokens '{}' and '{}' have the same id {}", op, source,
               tok.tokens_[i], token, i);
      taken[i] = true;
      tok.tokens_[i] = token;
      tok.ids_.emplace(token, static_cast<int64_t>(i));  // JSON keys are unique: the parser keeps the last
    }
    if (tok.ids_.count(kSpecial)) tok.special_ = kSpecial;
  }

  // the next merge "a b", read at `where` ("'merges.txt' line 3", in short `at`: "line 3"); its
  // rank is the count so far
  void merge(const std::string& a, const std::string& b, const std::string& where, const std::string& at,
             const std::string& vocab_source) {
    const std::string line = a + " " + b;
    for (const std::string& t : {a, b, a + b})
      MG_CHECK(tok.ids_.count(t), ValueError, "{}: {}: the merge '{}' needs the token '{}', which {} lacks", op, where,
               line, t, vocab_source);
    auto [it, added] = tok.ranks_.emplace(line, static_cast<int64_t>(merge_where.size()));
    MG_CHECK(added, ValueError, "{}: {} repeats the merge '{}' of {}", op, where, line,
             merge_where[static_cast<size_t>(it->second)]);
    merge_where.push_back(at);
  }
};

namespace {
std::ifstream open_file(const char* op, const std::string& path) {
  std::error_code ec;
  MG_CHECK(!std::filesystem::is_directory(path, ec), FileError, "{}: '{}' is a directory, not a file", op, path);
  std::ifstream in(path, std::ios::binary);
  MG_CHECK(in.is_open(), FileError, "{}: cannot open '{}'", op, path);
  return in;
}

nlohmann::json parse_json_file(const char* op, const std::string& path) {
  std::ifstream in = open_file(op, path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("{}: '{}' is not valid JSON: {}", op, path, e.what()));
  }
}
}  // namespace

GPT2Tokenizer GPT2Tokenizer::from_files(const std::string& vocab_json, const std::string& merges_txt) {
  GPT2Tokenizer tok;
  GPT2TokenizerReader read{tok, "GPT2Tokenizer::from_files", {}};
  const std::string vocab_source = fmt::format("'{}'", vocab_json);
  read.vocab(parse_json_file(read.op, vocab_json), vocab_source);

  // merges.txt: an optional "#version" line, then "a b" per line; rank = order
  std::ifstream merges_in = open_file(read.op, merges_txt);
  int64_t line_no = 0;
  for (std::string line; std::getline(merges_in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file written on Windows
    if (line_no == 1 && line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    MG_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                 line.find(' ', space + 1) == std::string::npos,
             ValueError, "{}: '{}' line {}: expected two tokens split by one space, got '{}'", read.op, merges_txt,
             line_no, line);
    read.merge(line.substr(0, space), line.substr(space + 1), fmt::format("'{}' line {}", merges_txt, line_no),
               fmt::format("line {}", line_no), vocab_source);
  }
  MG_CHECK(!merges_in.bad(), FileError, "{}: error reading '{}' after {} lines", read.op, merges_txt, line_no);
  return tok;
}

GPT2Tokenizer GPT2Tokenizer::from_tokenizer_json(const std::string& path) {
  GPT2Tokenizer tok;
  GPT2TokenizerReader read{tok, "GPT2Tokenizer::from_tokenizer_json", {}};
  const nlohmann::json j = parse_json_file(read.op, path);
  MG_CHECK(j.is_object() && j.contains("model") && j["model"].is_object(), ValueError,
           "{}: '{}' has no \"model\" object (is it a tokenizers tokenizer.json?)", read.op, path);
  const nlohmann::json& m = j["model"];
  MG_CHECK(!m.contains("type") || m["type"].is_string(), ValueError, "{}: '{}': model.type should be a string", read.op,
           path);
  const std::string type = m.value("type", std::string(m.contains("merges") ? "BPE" : "?"));
  MG_CHECK(type == "BPE", ValueError,
           "{}: '{}' holds a {} tokenizer (model.type), not GPT-2's byte-level BPE; data::AutoTokenizer reads either",
           read.op, path, type);
  // What GPT-2's byte-level BPE leaves unset; anything else changes the ids, and is refused.
  auto unset = [&](const char* field) {
    const bool ok = !m.contains(field) || m[field].is_null() ||
                    (m[field].is_string() && m[field].get<std::string>().empty()) ||
                    (m[field].is_boolean() && !m[field].get<bool>());
    MG_CHECK(ok, ValueError, "{}: '{}': model.{} is {}; only GPT-2's byte-level BPE (with it unset) is supported",
             read.op, path, field, m[field].dump());
  };
  for (const char* f :
       {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback", "ignore_merges"})
    unset(f);
  const nlohmann::json pre = j.value("pre_tokenizer", nlohmann::json());
  MG_CHECK(pre.is_object() && pre.value("type", nlohmann::json()) == "ByteLevel", ValueError,
           "{}: '{}': pre_tokenizer is {}, expected GPT-2's {{\"type\": \"ByteLevel\"}}", read.op, path,
           pre.is_structured() ? pre.dump().substr(0, 200) : pre.dump());
  MG_CHECK(pre.value("add_prefix_space", nlohmann::json(false)) == false, ValueError,
           "{}: '{}': pre_tokenizer.add_prefix_space is true; GPT-2's tokenizer (and this one) adds no space in front",
           read.op, path);
  MG_CHECK(pre.value("use_regex", nlohmann::json(true)) == true, ValueError,
           "{}: '{}': pre_tokenizer.use_regex is false; GPT-2's tokenizer (and this one) splits with its pattern",
           read.op, path);
  const nlohmann::json norm = j.value("normalizer", nlohmann::json());
  MG_CHECK(norm.is_null(), ValueError, "{}: '{}': normalizer {} changes the text first; GPT-2's tokenizer has none",
           read.op, path, norm.is_object() ? norm.value("type", std::string("?")) : norm.type_name());
  // A post-processor that adds special tokens (RoBERTa's <s> and </s>, a BOS in front) would change
  // every encoding: only none, ByteLevel, or a template without special tokens (or a Sequence of them).
  std::function<void(const nlohmann::json&)> check_post = [&](const nlohmann::json& post) {
    if (post.is_null()) return;
    const std::string type = post.is_object() ? post.value("type", std::string("?")) : post.type_name();
    if (type == "Sequence" && post.contains("processors") && post["processors"].is_array()) {
      for (const nlohmann::json& p : post["processors"]) check_post(p);
      return;
    }
    bool ok = type == "ByteLevel";
    if (type == "TemplateProcessing" && post.contains("single") && post["single"].is_array()) {
      ok = true;
      for (const nlohmann::json& piece : post["single"]) ok = ok && !piece.contains("SpecialToken");
    }
    MG_CHECK(
        ok, ValueError,
        "{}: '{}': post_processor {} adds special tokens to every text; GPT-2's tokenizer (and this one) adds none",
        read.op, path, type);
  };
  check_post(j.value("post_processor", nlohmann::json()));
  const std::string vocab_source = fmt::format("'{}' model.vocab", path);
  MG_CHECK(m.contains("vocab"), ValueError, "{}: '{}' has no model.vocab", read.op, path);
  read.vocab(m["vocab"], vocab_source);
  MG_CHECK(m.contains("merges") && m["merges"].is_array(), ValueError, "{}: '{}' has no model.merges list", read.op,
           path);
  const nlohmann::json& merges = m["merges"];
  for (size_t r = 0; r < merges.size(); ++r) {
    const nlohmann::json& e = merges[r];
    const std::string where = fmt::format("'{}' model.merges[{}]", path, r);
    std::string a, b;
    if (e.is_string()) {  // "a b", as in merges.txt (tokenizers before 0.20)
      const std::string line = e.get<std::string>();
      const size_t space = line.find(' ');
      MG_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                   line.find(' ', space + 1) == std::string::npos,
               ValueError, "{}: {}: expected two tokens split by one space, got '{}'", read.op, where, line);
      a = line.substr(0, space), b = line.substr(space + 1);
    } else {  // ["a", "b"] (tokenizers 0.20 and later)
      MG_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string(), ValueError,
               "{}: {}: expected \"a b\" or [\"a\", \"b\"], got a JSON {}", read.op, where, e.type_name());
      a = e[0].get<std::string>(), b = e[1].get<std::string>();
    }
    read.merge(a, b, where, fmt::format("model.merges[{}]", r), vocab_source);
  }
  // Added tokens must be tokens of the vocabulary with the same id (GPT-2's one is <|endoftext|>).
  for (const nlohmann::json& t : j.value("added_tokens", nlohmann::json::array())) {
    MG_CHECK(t.is_object() && t.contains("content") && t["content"].is_string() && t.contains("id") &&
                 t["id"].is_number_integer(),
             ValueError, "{}: '{}': an entry of added_tokens is not {{\"content\": token, \"id\": id, ...}}", read.op,
             path);
    const std::string content = t["content"].get<std::string>();
    const int64_t id = t["id"].get<int64_t>();
    auto it = tok.ids_.find(content);
    MG_CHECK(it != tok.ids_.end() && it->second == id, ValueError,
             "{}: '{}': the added token '{}' (id {}) is not that token of model.vocab; only a vocabulary's own "
             "special tokens are supported",
             read.op, path, content, id);
  }
  return tok;
}

// ---- lookups ----

const std::string& GPT2Tokenizer::byte_to_token(uint8_t b) {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (int i = 0; i < 256; ++i) t[i] = to_utf8(byte_code_points()[i]);
    return t;
  }();
  return table[b];
}

int64_t GPT2Tokenizer::token_to_id(const std::string& token) const {
  auto it = ids_.find(token);
  MG_CHECK(it != ids_.end(), ValueError, "GPT2Tokenizer::token_to_id: '{}' is not in the vocabulary", token);
  return it->second;
}

const std::string& GPT2Tokenizer::id_to_token(int64_t id) const {
  MG_CHECK(id >= 0 && id < vocab_size(), IndexError,
           "GPT2Tokenizer::id_to_token: id {} is out of range for a vocabulary of {} tokens", id, vocab_size());
  return tokens_[static_cast<size_t>(id)];
}

// ---- text -> tokens ----

std::vector<std::string> GPT2Tokenizer::pre_tokenize(const std::string& text) {
  const int64_t bad = invalid_utf8_offset(text);
  MG_CHECK(bad < 0, ValueError, "GPT2Tokenizer::pre_tokenize: the text is not valid UTF-8 (byte offset {})", bad);
  return split_words(text);
}

// The rule: merge the pair of neighbouring tokens with the lowest rank (the leftmost on a tie), and
// again, until no neighbouring pair is in merges.txt. Done literally (find the lowest pair, merge,
// repeat) that is O(n^2) in the word's length, and real text has long words (minified code, base64):
// a 64 KB word took 13.6 s, a 1 MB one never finished. Here the tokens are a linked list and the
// candidate pairs a min-heap ordered by (rank, position of the pair's left token); a merge changes
// only the two pairs around it, so it pushes at most two new candidates, and a candidate whose
// tokens have changed since it was pushed is skipped when it comes up: O(n log n), the same merges
// in the same order.
void GPT2Tokenizer::bpe(const std::string& word, std::vector<std::string>& out) const {
  const size_t n = word.size();
  std::vector<std::string> parts(n);  // parts[i]: the token starting at byte i (valid while alive)
  std::vector<size_t> next(n), prev(n);
  std::vector<uint32_t> stamp(n, 0);  // bumped whenever token i changes or dies
  for (size_t i = 0; i < n; ++i) {
    parts[i] = byte_to_token(static_cast<uint8_t>(word[i]));
    next[i] = i + 1, prev[i] = i - 1;  // prev[0] wraps to SIZE_MAX: "none"
  }
  struct Candidate {
    int64_t rank;
    size_t left, right;
    uint32_t left_stamp, right_stamp;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](size_t a, size_t b) {  // the pair (a, b) of neighbouring tokens, if merges.txt lists it
    auto it = ranks_.find(parts[a] + " " + parts[b]);
    if (it != ranks_.end()) heap.push({it->second, a, b, stamp[a], stamp[b]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i, i + 1);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (stamp[c.left] != c.left_stamp || stamp[c.right] != c.right_stamp) continue;  // a pair that changed
    parts[c.left] += parts[c.right];  // join the pair; its neighbours make new pairs
    parts[c.right].clear();
    ++stamp[c.left], ++stamp[c.right];
    next[c.left] = next[c.right];
    if (next[c.left] < n) prev[next[c.left]] = c.left;
    if (prev[c.left] < n) push(prev[c.left], c.left);
    if (next[c.left] < n) push(c.left, next[c.left]);
  }
  for (size_t i = 0; i < n; i = next[i]) out.push_back(std::move(parts[i]));
}

std::vector<std::string> GPT2Tokenizer::tokenize(const std::string& text) const {
  const int64_t bad = invalid_utf8_offset(text);
  MG_CHECK(bad < 0, ValueError, "GPT2Tokenizer::tokenize: the text is not valid UTF-8 (byte offset {})", bad);
  // the special token cuts the text into chunks first; each chunk is pre-tokenized on its own
  std::vector<std::string> out;
  for (size_t done = 0;;) {
    const size_t at = special_.empty() ? std::string::npos : text.find(special_, done);
    for (const std::string& word : split_words(text.substr(done, at == std::string::npos ? at : at - done)))
      bpe(word, out);
    if (at == std::string::npos) return out;
    out.push_back(special_);
    done = at + special_.size();
  }
}

std::vector<int64_t> GPT2Tokenizer::encode(const std::string& text) const {
  const int64_t bad = invalid_utf8_offset(text);
  MG_CHECK(bad < 0, ValueError, "GPT2Tokenizer::encode: the text is not valid UTF-8 (byte offset {})", bad);
  std::vector<int64_t> ids;
  for (const std::string& token : tokenize(text)) {
    auto it = ids_.find(token);
    // only a single byte's token can be missing: merges.txt was checked against the vocabulary
    MG_CHECK(it != ids_.end(), ValueError,
             "GPT2Tokenizer::encode: the byte token '{}' is not in the vocabulary (hint: GPT-2's has all 256 bytes)",
             token);
    ids.push_back(it->second);
  }
  return ids;
}

// ---- ids -> text ----

std::string GPT2Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string bytes;
  for (int64_t id : ids) {
    MG_CHECK(id >= 0 && id < vocab_size(), IndexError,
             "GPT2Tokenizer::decode: id {} is out of range for a vocabulary of {} tokens", id, vocab_size());
    const std::string& token = tokens_[static_cast<size_t>(id)];
    // each character back to its byte; a token with a character outside the byte alphabet (a
    // hand-made vocabulary) keeps its own UTF-8 bytes, as `tokenizers` does
    std::string own;
    const auto* p = reinterpret_cast<const uint8_t*>(token.data());
    const int64_t n = static_cast<int64_t>(token.size());
    bool in_alphabet = true;
    for (int64_t i = 0; i < n && in_alphabet;) {
      UChar32 c;
      U8_NEXT(p, i, n, c);
      const int b = byte_of(c);
      in_alphabet = b >= 0;
      own += static_cast<char>(b);
    }
    bytes += in_alphabet ? own : token;
  }
  return replace_invalid_utf8(bytes);
}

}  // namespace mg::data
