// data::GPT2Tokenizer: the byte alphabet, the pre-tokenizer's words, merges by rank and the special
// token, checked by hand on tiny files written here; Hugging Face's ids for ~70 tricky texts and
// the decode of bytes that are not UTF-8 (tests/golden/bpe.txt under tests/golden/bpe/, both
// written by tests/golden/gen_bpe.py); every bad file and bad text, typed.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "minigrad/data/bpe.h"
#include "minigrad/tensor/error.h"
#include "minigrad/tensor/generator.h"

#include "golden_lines.h"

using namespace mg;
using data::GPT2Tokenizer;
using testing::ElementsAre;
using testing::HasSubstr;
using Tokens = std::vector<std::string>;
using Ids = std::vector<int64_t>;
namespace fs = std::filesystem;
using mgtest::parse_ids;
using mgtest::show;
using mgtest::split_tabs;
using mgtest::unhex;

namespace {

const std::string kGolden = MG_GOLDEN_DIR;
const std::string kEot = "<|endoftext|>";

// `fn` throws exactly E, with `text` in its message.
template <class E, class Fn>
void expect_error(Fn&& fn, const std::string& text) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one saying: " << text;
  } catch (const E& e) {
    EXPECT_THAT(e.what(), HasSubstr(text));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type: " << e.what();
  }
}

// A file of this test's own with `bytes` in it.
std::string write_temp(const std::string& name, const std::string& bytes) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::temp_directory_path() / "minigrad_test_files" / info->test_suite_name() / info->name();
  fs::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// vocab.json text: the 256 byte tokens (ids 0..255, in byte order), then `extra` (ids 256, ...).
std::string vocab_json(const Tokens& extra, bool all_bytes = true) {
  nlohmann::json j = nlohmann::json::object();
  int64_t id = 0;
  for (int b = 0; b < 256; ++b)
    if (all_bytes || b != 'x') j[GPT2Tokenizer::byte_to_token(static_cast<uint8_t>(b))] = id++;
  for (const std::string& t : extra) j[t] = id++;
  return j.dump();
}

// A tokenizer from the 256 bytes + `extra` tokens and the merges `lines` (after a #version line).
GPT2Tokenizer tiny(const Tokens& extra, const Tokens& lines) {
  std::string merges = "#version: 0.2\n";
  for (const std::string& l : lines) merges += l + "\n";
  return GPT2Tokenizer::from_files(write_temp("vocab.json", vocab_json(extra)), write_temp("merges.txt", merges));
}

// The tiny tokenizer of the hand-written cases: "h e", "l l", "he ll" (ranks 0, 1, 2).
GPT2Tokenizer hello() { return tiny({"he", "ll", "hell", kEot}, {"h e", "l l", "he ll"}); }

}  // namespace

// ---- hand-written cases ----

TEST(BPE, ByteAlphabet) {
  // printable bytes stand for themselves
  EXPECT_EQ(GPT2Tokenizer::byte_to_token('A'), "A");
  EXPECT_EQ(GPT2Tokenizer::byte_to_token('!'), "!");
  EXPECT_EQ(GPT2Tokenizer::byte_to_token(0xE9), "\xc3\xa9");  // byte E9 -> "é" (U+00E9)
  // the other 68 take U+0100, U+0101, ... in byte order
  EXPECT_EQ(GPT2Tokenizer::byte_to_token(0x00), "\xc4\x80");  // U+0100 "Ā"
  EXPECT_EQ(GPT2Tokenizer::byte_to_token('\n'), "\xc4\x8a");  // U+010A "Ċ" (0x0A = 10)
  EXPECT_EQ(GPT2Tokenizer::byte_to_token(' '), "\xc4\xa0");   // U+0120 "Ġ" (0x20 = 32)
  EXPECT_EQ(GPT2Tokenizer::byte_to_token(0x7F), "\xc4\xa1");  // U+0121, the 34th: 0..32, then DEL
  EXPECT_EQ(GPT2Tokenizer::byte_to_token(0xA0), "\xc5\x82");  // U+0142: DEL..0xA0 are 289..322
  EXPECT_EQ(GPT2Tokenizer::byte_to_token(0xAD), "\xc5\x83");  // U+0143, the last (soft hyphen)
  // 256 different one-character tokens
  std::vector<std::string> all;
  for (int b = 0; b < 256; ++b) all.push_back(GPT2Tokenizer::byte_to_token(static_cast<uint8_t>(b)));
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());
  // so "é" (C3 A9) is "Ã©" and " \n" is "ĠĊ" before any merge
  const GPT2Tokenizer tok = hello();
  EXPECT_THAT(tok.tokenize("\xc3\xa9"), ElementsAre("\xc3\x83", "\xc2\xa9"));
  EXPECT_THAT(tok.tokenize(" \n"), ElementsAre("\xc4\xa0", "\xc4\x8a"));
}

TEST(BPE, PreTokenizerWords) {
  auto words = [](const std::string& t) { return GPT2Tokenizer::pre_tokenize(t); };
  EXPECT_THAT(words("I'm here  now!"), ElementsAre("I", "'m", " here", " ", " now", "!"));
  // contractions: only the seven, lower-case, even at the start or one after another
  EXPECT_THAT(words("they're"), ElementsAre("they", "'re"));
  EXPECT_THAT(words("'s at"), ElementsAre("'s", " at"));
  EXPECT_THAT(words("don't'll"), ElementsAre("don", "'t", "'ll"));
  EXPECT_THAT(words("'S"), ElementsAre("'", "S"));
  EXPECT_THAT(words("''s"), ElementsAre("''", "s"));  // the symbol run takes both quotes first
  // a run of spaces gives its last one to the next word; at the end it stays whole
  EXPECT_THAT(words("a   b"), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(words("end  "), ElementsAre("end", "  "));
  EXPECT_THAT(words("a\n\nb"), ElementsAre("a", "\n", "\n", "b"));  // only " " joins a word
  EXPECT_THAT(words("\n\n"), ElementsAre("\n\n"));
  EXPECT_THAT(words(" !!"), ElementsAre(" !!"));
  // digits, letters and other symbols are runs of their own
  EXPECT_THAT(words("2024-11-25 12:30"), ElementsAre("2024", "-", "11", "-", "25", " 12", ":", "30"));
  EXPECT_THAT(words("x1y"), ElementsAre("x", "1", "y"));
  // Unicode letters are letters; a combining accent (Mn) is not
  EXPECT_THAT(words("na\xc3\xafve caf\xc3\xa9"), ElementsAre("na\xc3\xafve", " caf\xc3\xa9"));
  EXPECT_THAT(words("e\xcc\x81"), ElementsAre("e", "\xcc\x81"));
  // \s is Unicode's White_Space: no-break space is one (but does not join a word), U+001C is not
  EXPECT_THAT(words(std::string("a\xc2\xa0") + "b"), ElementsAre("a", "\xc2\xa0", "b"));
  EXPECT_THAT(words("x\x1c\x1cy"), ElementsAre("x", "\x1c\x1c", "y"));  // a run of symbols, not of spaces
  EXPECT_THAT(words("x\xc2\x85\xc2\x85y"), ElementsAre("x", "\xc2\x85", "\xc2\x85", "y"));  // U+0085 is a space
  EXPECT_THAT(words(""), ElementsAre());
}

TEST(BPE, MergesApplyLowestRankFirst) {
  const GPT2Tokenizer tok = hello();
  // h e l l o -> he l l o (rank 0) -> he ll o (1) -> hell o (2)
  EXPECT_THAT(tok.tokenize("hello"), ElementsAre("hell", "o"));
  EXPECT_EQ(tok.encode("hello"), (Ids{258, 'o'}));  // hell is id 256 + 2; "o" is byte 0x6F
  // the space is a token of its own: no merge joins "Ġ" and "h"
  EXPECT_THAT(tok.tokenize(" hello hell"), ElementsAre("\xc4\xa0", "hell", "o", "\xc4\xa0", "hell"));
  // the order of merges.txt decides: "l l" before "e l" gives h e ll o, the other way h el l o
  EXPECT_THAT(tiny({"ll", "el"}, {"l l", "e l"}).tokenize("hello"), ElementsAre("h", "e", "ll", "o"));
  EXPECT_THAT(tiny({"ll", "el"}, {"e l", "l l"}).tokenize("hello"), ElementsAre("h", "el", "l", "o"));
  // a tie goes to the leftmost pair
  EXPECT_THAT(tiny({"aa"}, {"a a"}).tokenize("aaa"), ElementsAre("aa", "a"));
  EXPECT_THAT(tiny({"aa", "aaaa"}, {"a a", "aa aa"}).tokenize("aaaaa"), ElementsAre("aaaa", "a"));
  // merges never cross the pre-tokenizer's words
  EXPECT_THAT(tiny({"o!"}, {"o !"}).tokenize("o! o"), ElementsAre("o", "!", "\xc4\xa0", "o"));
}

namespace {
// The rule written literally, as it was implemented before: find the neighbouring pair of the lowest
// rank (the leftmost on a tie), merge it, repeat. O(n^2); the reference for short words.
Tokens literal_bpe(const std::string& word, const Tokens& merge_lines) {
  Tokens parts;
  for (char b : word) parts.push_back(GPT2Tokenizer::byte_to_token(static_cast<uint8_t>(b)));
  for (;;) {
    size_t best_i = 0, best_rank = merge_lines.size();
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto it = std::find(merge_lines.begin(), merge_lines.end(), parts[i] + " " + parts[i + 1]);
      const size_t rank = static_cast<size_t>(it - merge_lines.begin());
      if (rank < best_rank) best_rank = rank, best_i = i;
    }
    if (best_rank == merge_lines.size()) return parts;
    parts[best_i] += parts[best_i + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best_i) + 1);
  }
}
}  // namespace

TEST(BPE, TheHeapMergesAsTheLiteralRuleDoes) {
  // Merges over a three-letter alphabet whose results overlap and chain, on 300 random words.
  const Tokens merges = {"a b", "b a", "ab a", "c c", "a a", "ab ab", "cc c", "ba b", "aa b", "abab ab", "b b"};
  const GPT2Tokenizer tok = tiny({"ab", "ba", "aba", "cc", "aa", "abab", "ccc", "bab", "aab", "ababab", "bb"}, merges);
  Generator g(3);
  for (int w = 0; w < 300; ++w) {
    std::string word;
    const int64_t len = 1 + static_cast<int64_t>(g.next_below(40));
    for (int64_t i = 0; i < len; ++i) word += "abc"[g.next_below(3)];
    EXPECT_EQ(tok.tokenize(word), literal_bpe(word, merges)) << word;
  }
}

TEST(BPE, AOneMegabyteWordIsTokenized) {
  // One word of 2^20 bytes (a minified file, base64 have such words): the literal rule is
  // quadratic here (64 K bytes took 13.6 s, a megabyte never finished); the heap takes n log n.
  const GPT2Tokenizer tok =
      tiny({"aa", "aaaa", "aaaaaaaa", std::string(16, 'a')}, {"a a", "aa aa", "aaaa aaaa", "aaaaaaaa aaaaaaaa"});
  const Tokens t = tok.tokenize(std::string(size_t{1} << 20, 'a'));
  ASSERT_EQ(t.size(), size_t{1} << 16);  // 2^20 / 16 tokens of 16 a's
  EXPECT_EQ(t.front(), std::string(16, 'a'));
  EXPECT_EQ(t.back(), std::string(16, 'a'));
  // random letters and digits with the real vocabulary subset: decoding gives the word back
  const GPT2Tokenizer real = GPT2Tokenizer::from_files(kGolden + "/bpe/vocab.json", kGolden + "/bpe/merges.txt");
  Generator g(4);
  std::string word;
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  for (int64_t i = 0; i < (int64_t{1} << 20); ++i) word += alphabet[g.next_below(alphabet.size())];
  const std::vector<int64_t> ids = real.encode(word);
  EXPECT_LT(ids.size(), word.size());  // merges happened
  EXPECT_EQ(real.decode(ids), word);
}

TEST(BPE, EndOfTextIsOneToken) {
  const GPT2Tokenizer tok = hello();
  EXPECT_THAT(tok.tokenize("hello<|endoftext|> hello"),
              ElementsAre("hell", "o", kEot, "\xc4\xa0", "hell", "o"));  // the space is not stripped
  EXPECT_EQ(tok.encode(kEot + kEot), (Ids{259, 259}));
  // only written exactly
  EXPECT_EQ(tok.encode("<|endoftext|").size(), 12u);
  EXPECT_EQ(tok.encode("<|ENDOFTEXT|>").size(), 13u);
  // without it in the vocabulary it is plain text: "<|", "endoftext", "|>" in bytes
  const GPT2Tokenizer plain = tiny({}, {});
  EXPECT_EQ(plain.encode(kEot).size(), 13u);
  EXPECT_EQ(plain.decode(plain.encode(kEot)), kEot);
}

TEST(BPE, DecodeGivesTheBytesBack) {
  const GPT2Tokenizer tok = hello();
  for (const std::string& s :
       {std::string("hello world"), std::string(" \t\n  x  "), std::string("caf\xc3\xa9 \xf0\x9f\x98\x80"),
        std::string("a<|endoftext|>b"), std::string("")})
    EXPECT_EQ(tok.decode(tok.encode(s)), s);
  // byte ids are the bytes here; a cut-off character becomes one U+FFFD per bad part
  const std::string fffd = "\xef\xbf\xbd";                              // U+FFFD, the replacement character
  EXPECT_EQ(tok.decode({0xF0, 0x9F}), fffd);                            // an emoji cut short
  EXPECT_EQ(tok.decode({'a', 0x80, 'b'}), "a" + fffd + "b");            // a stray continuation byte
  EXPECT_EQ(tok.decode({0xC0, 0xAF}), fffd + fffd);                     // overlong: two bad parts
  EXPECT_EQ(tok.decode({0xE2, 0x82, 'x'}), fffd + "x");                 // a 3-byte character cut short
  EXPECT_EQ(tok.decode({0xF0, 0x9F, 0x98, 0x80}), "\xf0\x9f\x98\x80");  // whole again: an emoji
  // a token with a character outside the byte alphabet (here "€x") keeps its own UTF-8 bytes, as
  // in `tokenizers`
  const GPT2Tokenizer euro = tiny({"\xe2\x82\xacx"}, {});
  EXPECT_EQ(euro.decode({'a', 256, ' ', 'b'}), "a\xe2\x82\xacx b");
  EXPECT_EQ(euro.decode({0xC3, 256, 0xA9}), fffd + "\xe2\x82\xacx" + fffd);
  const std::string out_of_range = "GPT2Tokenizer::decode: id 260 is out of range for a vocabulary of 260 tokens";
  expect_error<IndexError>([&] { tok.decode({1, 260}); }, out_of_range);
  expect_error<IndexError>([&] { tok.decode({-1}); }, "id -1 is out of range");
}

TEST(BPE, VocabularyLookups) {
  const GPT2Tokenizer tok = hello();
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.token_to_id("hell"), 258);
  EXPECT_EQ(tok.token_to_id("\xc4\xa0"), ' ');
  EXPECT_EQ(tok.id_to_token(256), "he");
  EXPECT_EQ(tok.id_to_token(259), kEot);
  expect_error<ValueError>([&] { tok.token_to_id("hello"); },
                           "GPT2Tokenizer::token_to_id: 'hello' is not in the vocabulary");
  expect_error<IndexError>([&] { tok.id_to_token(260); }, "id 260 is out of range for a vocabulary of 260 tokens");
  expect_error<IndexError>([&] { tok.id_to_token(-1); }, "id -1 is out of range");
}

// ---- Hugging Face's ids ----

TEST(BPE, MatchesHuggingFaceOnTrickyTexts) {
  const GPT2Tokenizer tok = GPT2Tokenizer::from_files(kGolden + "/bpe/vocab.json", kGolden + "/bpe/merges.txt");
  const std::string path = kGolden + "/bpe.txt";
  std::ifstream in(path);
  ASSERT_TRUE(in.is_open()) << "cannot open " << path;
  int encodes = 0, decodes = 0, line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const auto f = split_tabs(line);
    const std::string where = path + ":" + std::to_string(line_no);
    if (f[0] == "vocab_size") {
      EXPECT_EQ(tok.vocab_size(), std::stoll(f[1])) << "not the vocabulary the golden file was made with";
    } else if (f[0] == "encode" && f.size() == 4) {
      const std::string text = unhex(f[1]);
      const Ids want = parse_ids(f[2]), ids = tok.encode(text);
      EXPECT_EQ(ids, want) << where << " text \"" << text << "\"\n  ours: " << show(tok, ids)
                           << "\n  HF:   " << show(tok, want);
      EXPECT_EQ(tok.decode(want), unhex(f[3])) << where << " decode";
      EXPECT_EQ(tok.decode(ids), text) << where << " round trip";
      ++encodes;
    } else if (f[0] == "decode" && f.size() == 3) {
      EXPECT_EQ(tok.decode(parse_ids(f[1])), unhex(f[2])) << where;
      ++decodes;
    } else {
      ADD_FAILURE() << where << ": not a golden line: " << line;
    }
  }
  EXPECT_GE(encodes, 60);
  EXPECT_GE(decodes, 10);
}

// ---- bad files and texts ----

TEST(BPE, BadVocabularyFilesAreNamed) {
  const std::string merges = write_temp("merges.txt", "#version: 0.2\n");
  auto load = [&](const std::string& vocab_text) {
    return GPT2Tokenizer::from_files(write_temp("vocab.json", vocab_text), merges);
  };
  expect_error<FileError>([&] { GPT2Tokenizer::from_files("/nonexistent/vocab.json", merges); },
                          "GPT2Tokenizer::from_files: cannot open '/nonexistent/vocab.json'");
  expect_error<FileError>([&] { GPT2Tokenizer::from_files(fs::path(merges).parent_path().string(), merges); },
                          "is a directory");
  const std::string vocab = write_temp("vocab.json", "{\"a\": 0,\n \"b\": 1,\n \"c\" 2}");
  expect_error<FileError>([&] { GPT2Tokenizer::from_files(vocab, merges); }, "'" + vocab + "' is not valid JSON");
  expect_error<FileError>([&] { GPT2Tokenizer::from_files(vocab, merges); }, "line 3");
  expect_error<FileError>([&] { load(""); }, "is not valid JSON");
  expect_error<ValueError>([&] { load("[\"a\", \"b\"]"); }, "must hold a JSON object of token -> id, not a JSON array");
  expect_error<ValueError>([&] { load(R"({"a": 0, "b": -1})"); }, "the id of token 'b' is -1, not a non-negative");
  expect_error<ValueError>([&] { load(R"({"a": 0, "b": "1"})"); }, "the id of token 'b' is \"1\", not a non-negative");
  expect_error<ValueError>([&] { load(R"({"a": 0, "b": 1.5})"); }, "the id of token 'b' is 1.5");
  expect_error<ValueError>([&] { load(R"({"a": 0, "b": 7})"); },
                           "the id of token 'b' is 7, but the ids of 2 tokens must be 0..1");
  expect_error<ValueError>([&] { load(R"({"a": 0, "b": 1, "c": 1})"); }, "the tokens 'b' and 'c' have the same id 1");
  // an empty vocabulary is a (useless) tokenizer
  EXPECT_EQ(load("{}").vocab_size(), 0);
}

TEST(BPE, BadMergesFilesAreNamed) {
  const std::string vocab = write_temp("vocab.json", vocab_json({"he", "ll", "hell"}));
  auto load = [&](const std::string& merges_text) {
    return GPT2Tokenizer::from_files(vocab, write_temp("merges.txt", merges_text));
  };
  expect_error<FileError>([&] { GPT2Tokenizer::from_files(vocab, "/nonexistent/merges.txt"); },
                          "cannot open '/nonexistent/merges.txt'");
  const std::string path = write_temp("merges.txt", "");
  expect_error<ValueError>([&] { load("#version: 0.2\nh e\nhe ll x\n"); },
                           "'" + path + "' line 3: expected two tokens split by one space, got 'he ll x'");
  expect_error<ValueError>([&] { load("h e\nll\n"); }, "line 2: expected two tokens split by one space, got 'll'");
  expect_error<ValueError>([&] { load("h e\n\nl l\n"); }, "line 2: expected two tokens");
  expect_error<ValueError>([&] { load("h  e\n"); }, "line 1: expected two tokens");
  // "#version" is a header only on line 1; later it is a merge of two unknown tokens
  expect_error<ValueError>([&] { load("#version: 0.2\n#version: 0.2\n"); },
                           "line 2: the merge '#version: 0.2' needs the token '#version:'");
  expect_error<ValueError>(
      [&] { load("h e\nhe zz\n"); },
      "'" + path + "' line 2: the merge 'he zz' needs the token 'zz', which '" + vocab + "' lacks");
  expect_error<ValueError>([&] { load("h e\nl o\n"); }, "line 2: the merge 'l o' needs the token 'lo'");
  expect_error<ValueError>([&] { load("h e\nl l\nh e\n"); }, "'" + path + "' line 3 repeats the merge 'h e' of line 1");
  expect_error<ValueError>([&] { load("#version: 0.2\nh e\nl l\nh e\n"); }, "line 4 repeats the merge 'h e' of line 2");
  // Windows line ends and a missing last line end are fine; so is no #version line
  EXPECT_THAT(load("#version: 0.2\r\nh e\r\nl l\r\nhe ll").tokenize("hello"), ElementsAre("hell", "o"));
  EXPECT_THAT(load("h e\n").tokenize("hello"), ElementsAre("he", "l", "l", "o"));
}

TEST(BPE, BadTextsAreNamed) {
  const GPT2Tokenizer tok = hello();
  expect_error<ValueError>([&] { tok.encode("hello \xc3"); },
                           "GPT2Tokenizer::encode: the text is not valid UTF-8 (byte offset 6)");
  expect_error<ValueError>([&] { tok.tokenize("ab\x80"); },
                           "GPT2Tokenizer::tokenize: the text is not valid UTF-8 (byte offset 2)");
  expect_error<ValueError>([&] { GPT2Tokenizer::pre_tokenize("a\xed\xa0\x80"); }, "(byte offset 1)");  // a surrogate
  expect_error<ValueError>([&] { tok.encode("\xc0\xaf"); }, "(byte offset 0)");  // an overlong "/"
  // a vocabulary without the byte "x": encode cannot give it an id
  const GPT2Tokenizer no_x =
      GPT2Tokenizer::from_files(write_temp("vocab.json", vocab_json({}, false)), write_temp("merges.txt", ""));
  EXPECT_EQ(no_x.vocab_size(), 255);
  EXPECT_THAT(no_x.tokenize("ax"), ElementsAre("a", "x"));
  expect_error<ValueError>([&] { no_x.encode("ax"); },
                           "GPT2Tokenizer::encode: the byte token 'x' is not in the vocabulary");
}
