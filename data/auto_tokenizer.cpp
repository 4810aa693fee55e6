// AutoTokenizer (data/auto_tokenizer.h): a model folder's tokenizer, chosen and configured by its files.
#include "minigrad/data/auto_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "minigrad/tensor/error.h"

namespace mg::data {
namespace {

namespace fs = std::filesystem;
const char* const kOp = "AutoTokenizer::from_pretrained";

// A JSON file of the folder, or null when the folder does not have it.
nlohmann::json read_optional_json(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return nullptr;
  std::ifstream in(path, std::ios::binary);
  MG_CHECK(in.is_open(), FileError, "{}: cannot open '{}'", kOp, path.string());
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    MG_CHECK(j.is_object(), ValueError, "{}: '{}' should hold a JSON object, not a JSON {}", kOp, path.string(),
             j.type_name());
    return j;
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("{}: '{}' is not valid JSON: {}", kOp, path.string(), e.what()));
  }
}

// A special token as the config files write it: "[SEP]", or an AddedToken {"content": "[SEP]", ...}.
// Null or absent: nullopt.
std::optional<std::string> special_token(const nlohmann::json& j, const char* key, const fs::path& file) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return std::nullopt;
  const nlohmann::json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  MG_CHECK(v.is_object() && v.contains("content") && v["content"].is_string(), ValueError,
           "{}: '{}': {} should be a token (a string, or an object with \"content\"), got a JSON {}", kOp,
           file.string(), key, v.type_name());
  return v["content"].get<std::string>();
}

std::optional<bool> flag(const nlohmann::json& j, const char* key, const fs::path& file) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return std::nullopt;
  MG_CHECK(j[key].is_boolean(), ValueError, "{}: '{}': {} should be true, false or null, got {}", kOp, file.string(),
           key, j[key].dump());
  return j[key].get<bool>();
}

// What the folder holds, for the error that finds no tokenizer in it.
std::string listing(const fs::path& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  if (names.empty()) return "it is empty";
  if (names.size() > 12) names.resize(12), names.push_back("...");
  return fmt::format("it holds {}", fmt::join(names, ", "));
}

// The same vocabulary under other options.
WordPieceTokenizer with_options(const WordPieceTokenizer& tok, WordPieceOptions o) {
  std::vector<std::string> vocab(static_cast<size_t>(tok.vocab_size()));
  for (int64_t i = 0; i < tok.vocab_size(); ++i) vocab[static_cast<size_t>(i)] = tok.id_to_token(i);
  return WordPieceTokenizer(std::move(vocab), std::move(o));
}

}  // namespace

AutoTokenizer AutoTokenizer::from_pretrained(const std::string& folder_name) {
  const fs::path folder(folder_name);
  std::error_code ec;
  MG_CHECK(fs::exists(folder, ec), FileError, "{}: '{}' does not exist (expected a model folder)", kOp, folder_name);
  MG_CHECK(fs::is_directory(folder, ec), FileError,
           "{}: '{}' is a file; pass the model folder that holds it and the tokenizer's files ('{}')", kOp, folder_name,
           folder.parent_path().string());
  const fs::path tokenizer_json = folder / "tokenizer.json", vocab_txt = folder / "vocab.txt",
                 vocab_json = folder / "vocab.json", merges_txt = folder / "merges.txt",
                 config_path = folder / "tokenizer_config.json", map_path = folder / "special_tokens_map.json";
  const nlohmann::json config = read_optional_json(config_path);
  const nlohmann::json map = read_optional_json(map_path);
  // A special token: special_tokens_map.json's, else tokenizer_config.json's (transformers' order).
  auto special = [&](const char* key) {
    std::optional<std::string> t = special_token(map, key, map_path);
    return t ? t : special_token(config, key, config_path);
  };

  AutoTokenizer tok;
  tok.folder_ = folder_name;
  if (config.is_object() && config.contains("model_max_length") && !config["model_max_length"].is_null()) {
    const nlohmann::json& v = config["model_max_length"];
    MG_CHECK(v.is_number() && v.get<double>() >= 1, ValueError,
             "{}: '{}': model_max_length should be a positive number, got {}", kOp, config_path.string(), v.dump());
    // transformers writes 1e30 (int(1e30)) for "no limit"
    tok.model_max_length_ = v.get<double>() >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(v.get<double>());
  }

  std::string model_type;
  if (fs::is_regular_file(tokenizer_json, ec)) {
    const nlohmann::json j = read_optional_json(tokenizer_json);
    const nlohmann::json m = j.value("model", nlohmann::json());
    MG_CHECK(m.is_object(), ValueError, "{}: '{}' has no \"model\" object", kOp, tokenizer_json.string());
    model_type = m.value("type", std::string(m.contains("merges") ? "BPE" : "WordPiece"));
    MG_CHECK(model_type == "WordPiece" || model_type == "BPE", ValueError,
             "{}: '{}' holds a {} tokenizer (model.type); WordPiece (BERT) and byte-level BPE (GPT-2) are supported",
             kOp, tokenizer_json.string(), model_type);
    if (model_type == "BPE") {
      tok.bpe_ = GPT2Tokenizer::from_tokenizer_json(tokenizer_json.string());
    } else {
      tok.wordpiece_ = WordPieceTokenizer::from_tokenizer_json(tokenizer_json.string());
    }
  } else if (fs::is_regular_file(vocab_txt, ec)) {
    tok.wordpiece_ = WordPieceTokenizer::from_file(vocab_txt.string());
  } else if (fs::is_regular_file(vocab_json, ec) && fs::is_regular_file(merges_txt, ec)) {
    tok.bpe_ = GPT2Tokenizer::from_files(vocab_json.string(), merges_txt.string());
  } else {
    throw FileError(fmt::format(
        "{}: '{}' has no tokenizer: expected tokenizer.json, vocab.txt (BERT), or vocab.json and merges.txt "
        "(GPT-2); {}",
        kOp, folder_name, listing(folder)));
  }

  if (tok.wordpiece_) {
    // transformers 5's BertTokenizer takes only the vocabulary from tokenizer.json and builds the
    // rest from its own arguments: tokenizer_config.json's, else its defaults (lower-case, [CLS],
    // [SEP], ...). Another class (or no tokenizer_config.json) keeps tokenizer.json's own options,
    // as the tokenizers library reads them.
    const bool bert_class = config.is_object() && config.contains("tokenizer_class") &&
                            config["tokenizer_class"].is_string() &&
                            config["tokenizer_class"].get<std::string>().starts_with("BertTokenizer");
    WordPieceOptions o = bert_class ? WordPieceOptions{} : tok.wordpiece_->options();
    if (auto v = flag(config, "do_lower_case", config_path)) o.do_lower_case = *v;
    if (auto v = flag(config, "tokenize_chinese_chars", config_path)) o.tokenize_chinese_chars = *v;
    if (config.is_object() && config.contains("strip_accents"))
      o.strip_accents = flag(config, "strip_accents", config_path);
    for (auto [key, field] : {std::pair{"unk_token", &o.unk_token}, std::pair{"cls_token", &o.cls_token},
                              std::pair{"sep_token", &o.sep_token}, std::pair{"pad_token", &o.pad_token},
                              std::pair{"mask_token", &o.mask_token}})
      if (auto t = special(key)) *field = *t;
    if (!(o == tok.wordpiece_->options())) {
      try {
        tok.wordpiece_.emplace(with_options(*tok.wordpiece_, o));
      } catch (const ValueError& e) {
        throw ValueError(fmt::format("{}: '{}' with the options of '{}': {}", kOp, folder_name,
                                     config_path.filename().string(), e.what()));
      }
    }
    tok.pad_id_ = tok.wordpiece_->token_to_id(o.pad_token);
    if (auto eos = special("eos_token")) tok.eos_id_ = tok.wordpiece_->token_to_id(*eos);
  } else {
    MG_CHECK(!flag(config, "add_prefix_space", config_path).value_or(false), ValueError,
             "{}: '{}': add_prefix_space is true; GPT-2's tokenizer here adds no space in front", kOp,
             config_path.string());
    MG_CHECK(!flag(config, "add_bos_token", config_path).value_or(false), ValueError,
             "{}: '{}': add_bos_token is true; GPT-2's tokenizer here adds no special token", kOp,
             config_path.string());
    // GPT-2's folders name <|endoftext|> as bos, eos and unk, and no pad token.
    auto id_of = [&](const char* key) -> std::optional<int64_t> {
      const std::optional<std::string> t = special(key);
      if (!t) return std::nullopt;
      try {
        return tok.bpe_->token_to_id(*t);
      } catch (const ValueError&) {
        throw ValueError(fmt::format("{}: '{}': the {} '{}' is not in the vocabulary", kOp, folder_name, key, *t));
      }
    };
    tok.eos_id_ = id_of("eos_token");
    tok.pad_id_ = id_of("pad_token");
    if (!tok.eos_id_ && tok.bpe_->vocab_size() > 0) {
      // no config: GPT-2's own end-of-text token when the vocabulary has it
      try {
        tok.eos_id_ = tok.bpe_->token_to_id("<|endoftext|>");
      } catch (const ValueError&) {
      }
    }
  }
  return tok;
}

const WordPieceTokenizer& AutoTokenizer::wordpiece() const {
  MG_CHECK(wordpiece_.has_value(), ValueError,
           "AutoTokenizer::wordpiece: '{}' holds a byte-level BPE tokenizer (use bpe())", folder_);
  return *wordpiece_;
}

const GPT2Tokenizer& AutoTokenizer::bpe() const {
  MG_CHECK(bpe_.has_value(), ValueError, "AutoTokenizer::bpe: '{}' holds a WordPiece tokenizer (use wordpiece())",
           folder_);
  return *bpe_;
}

AutoTokenizer AutoTokenizer::with_lower_case() const {
  MG_CHECK(wordpiece_.has_value(), ValueError,
           "AutoTokenizer::with_lower_case: '{}' holds a byte-level BPE tokenizer, which keeps case", folder_);
  WordPieceOptions o = wordpiece_->options();
  if (o.do_lower_case) return *this;
  o.strip_accents = o.strip_accents.value_or(o.do_lower_case);  // the accents stay as they were
  o.do_lower_case = true;
  AutoTokenizer out = *this;
  out.wordpiece_.emplace(with_options(*wordpiece_, o));
  return out;
}

int64_t AutoTokenizer::vocab_size() const { return wordpiece_ ? wordpiece_->vocab_size() : bpe_->vocab_size(); }

std::vector<int64_t> AutoTokenizer::encode(const std::string& text, std::optional<int64_t> max_length) const {
  const int64_t limit = max_length.value_or(model_max_length_);
  MG_CHECK(limit >= 1, ValueError, "AutoTokenizer::encode: max_length must be at least 1, got {}", limit);
  if (wordpiece_) {
    MG_CHECK(limit >= 2, ValueError, "AutoTokenizer::encode: max_length {} leaves no room for [CLS] and [SEP]", limit);
    return wordpiece_->encode(text, std::nullopt, limit, true).input_ids;
  }
  std::vector<int64_t> ids = bpe_->encode(text);
  if (static_cast<int64_t>(ids.size()) > limit) ids.resize(static_cast<size_t>(limit));
  return ids;
}

BatchEncoding AutoTokenizer::encode_batch(const std::vector<std::string>& texts,
                                          std::optional<int64_t> max_length) const {
  const int64_t limit = max_length.value_or(model_max_length_);
  if (wordpiece_) {
    MG_CHECK(limit >= 2, ValueError, "AutoTokenizer::encode_batch: max_length {} leaves no room for [CLS] and [SEP]",
             limit);
    return wordpiece_->encode_batch(texts, limit);
  }
  MG_CHECK(pad_id_.has_value(), ValueError,
           "AutoTokenizer::encode_batch: '{}' has no pad token, so texts of different lengths cannot be padded "
           "(GPT-2's folders name none; encode one text at a time)",
           folder_);
  std::vector<std::vector<int64_t>> rows;
  size_t T = 0;
  for (const std::string& t : texts) {
    rows.push_back(encode(t, limit));
    T = std::max(T, rows.back().size());
  }
  const size_t B = rows.size();
  std::vector<int64_t> ids(B * T, *pad_id_), types(B * T, 0), mask(B * T, 0);
  for (size_t i = 0; i < B; ++i) {
    std::copy(rows[i].begin(), rows[i].end(), ids.begin() + static_cast<std::ptrdiff_t>(i * T));
    std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(i * T), rows[i].size(), 1);
  }
  const Shape shape{static_cast<int64_t>(B), static_cast<int64_t>(T)};
  return {from_vector(ids, shape), from_vector(types, shape), from_vector(mask, shape)};
}

std::string AutoTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  if (wordpiece_) return wordpiece_->decode(ids, skip_special_tokens);
  if (!skip_special_tokens) return bpe_->decode(ids);
  std::vector<int64_t> kept;
  for (int64_t id : ids)
    if (id != eos_id_ && id != pad_id_) kept.push_back(id);
  return bpe_->decode(kept);
}

}  // namespace mg::data
