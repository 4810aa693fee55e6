// SentenceTransformer (models/sentence.h): a sentence-transformers folder's pipeline, run as it runs it.
#include "minigrad/models/sentence.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "minigrad/autograd/grad_mode.h"
#include "minigrad/data/utf8.h"
#include "minigrad/models/pretrained.h"

namespace mg::models {
namespace {

namespace fs = std::filesystem;

constexpr std::pair<PoolingMode, const char*> kModeNames[] = {
    {PoolingMode::CLS, "cls"},
    {PoolingMode::Max, "max"},
    {PoolingMode::Mean, "mean"},
    {PoolingMode::MeanSqrtLen, "mean_sqrt_len_tokens"},
    {PoolingMode::WeightedMean, "weightedmean"},
    {PoolingMode::LastToken, "lasttoken"},
};
// The older config's flags, in the order sentence-transformers concatenates them.
constexpr std::pair<const char*, PoolingMode> kLegacyFlags[] = {
    {"pooling_mode_cls_token", PoolingMode::CLS},
    {"pooling_mode_max_tokens", PoolingMode::Max},
    {"pooling_mode_mean_tokens", PoolingMode::Mean},
    {"pooling_mode_mean_sqrt_len_tokens", PoolingMode::MeanSqrtLen},
    {"pooling_mode_weightedmean_tokens", PoolingMode::WeightedMean},
    {"pooling_mode_lasttoken", PoolingMode::LastToken},
};

nlohmann::json read_json(const fs::path& path, const char* op) {
  std::ifstream in(path, std::ios::binary);
  MG_CHECK(in.is_open(), FileError, "{}: cannot open '{}'", op, path.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("{}: '{}' is not valid JSON: {}", op, path.string(), e.what()));
  }
}

PoolingMode mode_from_name(const std::string& name, const std::string& where) {
  for (const auto& [mode, n] : kModeNames)
    if (name == n) return mode;
  throw ValueError(
      fmt::format("PoolingConfig: {}: unknown pooling mode \"{}\" (expected cls, max, mean, "
                  "mean_sqrt_len_tokens, weightedmean or lasttoken)",
                  where, name));
}

}  // namespace

const char* pooling_mode_name(PoolingMode mode) {
  for (const auto& [m, n] : kModeNames)
    if (m == mode) return n;
  return "?";
}

PoolingConfig PoolingConfig::from_json_file(const std::string& path) {
  const char* op = "PoolingConfig::from_json_file";
  const nlohmann::json j = read_json(path, op);
  MG_CHECK(j.is_object(), ValueError, "{}: '{}' should hold a JSON object", op, path);
  PoolingConfig c;
  const char* dim_key = j.contains("embedding_dimension") ? "embedding_dimension" : "word_embedding_dimension";
  MG_CHECK(j.contains(dim_key) && j[dim_key].is_number_integer() && j[dim_key].get<int64_t>() > 0, ValueError,
           "{}: '{}' needs a positive whole \"embedding_dimension\" (or \"word_embedding_dimension\")", op, path);
  c.embedding_dimension = j[dim_key].get<int64_t>();
  if (j.contains("pooling_mode")) {  // sentence-transformers 5.2 and later: a name or a list of names
    const nlohmann::json& m = j["pooling_mode"];
    std::vector<std::string> names;
    if (m.is_string()) {
      names.push_back(m.get<std::string>());
    } else {
      MG_CHECK(m.is_array() && !m.empty(), ValueError,
               "{}: '{}': pooling_mode should be a mode's name or a non-empty list of them", op, path);
      for (const nlohmann::json& n : m) {
        MG_CHECK(n.is_string(), ValueError, "{}: '{}': pooling_mode lists a JSON {}, not a name", op, path,
                 n.type_name());
        names.push_back(n.get<std::string>());
      }
    }
    c.modes.clear();
    for (const std::string& n : names) c.modes.push_back(mode_from_name(n, "'" + path + "'"));
  } else {  // the older flags; none set means mean
    c.modes.clear();
    for (const auto& [key, mode] : kLegacyFlags) {
      if (!j.contains(key)) continue;
      MG_CHECK(j[key].is_boolean(), ValueError, "{}: '{}': {} should be true or false", op, path, key);
      if (j[key].get<bool>()) c.modes.push_back(mode);
    }
    if (c.modes.empty()) c.modes.push_back(PoolingMode::Mean);
  }
  if (j.contains("include_prompt")) {
    MG_CHECK(j["include_prompt"].is_boolean(), ValueError, "{}: '{}': include_prompt should be true or false", op,
             path);
    c.include_prompt = j["include_prompt"].get<bool>();
  }
  return c;
}

Variable pool(const Variable& hidden, const Tensor& attention_mask, const PoolingConfig& config,
              int64_t prompt_length) {
  MG_CHECK(hidden.dim() == 3, ShapeError, "pool: hidden must be (B, T, D), got {}", shape_str(hidden.shape()));
  const int64_t B = hidden.size(0), T = hidden.size(1), D = hidden.size(2);
  MG_CHECK(attention_mask.dim() == 2 && attention_mask.size(0) == B && attention_mask.size(1) == T, ShapeError,
           "pool: attention_mask must be (B, T) = ({}, {}) like hidden {}, got {}", B, T, shape_str(hidden.shape()),
           shape_str(attention_mask.shape()));
  MG_CHECK(attention_mask.dtype() == DType::Int64 || attention_mask.dtype() == DType::Bool, DTypeError,
           "pool: attention_mask must be int64 or Bool, got {}", dtype_name(attention_mask.dtype()));
  MG_CHECK(D == config.embedding_dimension, ShapeError,
           "pool: the token vectors have {} features, the pooling config's embedding_dimension is {}", D,
           config.embedding_dimension);
  MG_CHECK(!config.modes.empty(), ValueError, "pool: the pooling config has no mode");
  MG_CHECK(prompt_length >= 0, ValueError, "pool: prompt_length must be >= 0, got {}", prompt_length);

  // The mask as 0/1 per (row, position); each row's left padding (where its first real token is).
  const Tensor mask64 = attention_mask.to(DType::Int64).contiguous();
  std::vector<int64_t> m = mask64.to_vector<int64_t>();
  for (int64_t v : m) MG_CHECK(v == 0 || v == 1, ValueError, "pool: attention_mask must hold 0 and 1, got {}", v);
  // each row's first real token: 0, or the length of its left padding (0 for a row of padding)
  auto first_one = [&](int64_t b) {
    const auto row = m.begin() + b * T;
    const auto it = std::find(row, row + T, 1);
    return it == row + T ? int64_t{0} : static_cast<int64_t>(it - row);
  };
  std::vector<int64_t> first_real(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) first_real[static_cast<size_t>(b)] = first_one(b);
  // Without the prompt: the prompt's tokens (after any left padding) count as padding.
  if (!config.include_prompt && prompt_length > 0)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < std::min(T, first_real[static_cast<size_t>(b)] + prompt_length); ++t) m[b * T + t] = 0;

  const DType dt = hidden.dtype();
  const Tensor mask = from_vector(m, {B, T}).to(dt).unsqueeze(2);  // (B, T, 1)
  // the position of one token per row, gathered: (B, 1, D) -> (B, D)
  auto row_at = [&](const Variable& x, const std::vector<int64_t>& pos) {
    const Tensor index = from_vector(pos, {B, 1, 1}).expand({B, 1, D}).contiguous();
    return squeeze(gather(x, 1, index), 1);
  };
  std::vector<Variable> parts;
  for (PoolingMode mode : config.modes) {
    switch (mode) {
      case PoolingMode::CLS: {  // the first real token (argmax of the mask: 0 for a row of padding)
        std::vector<int64_t> pos(static_cast<size_t>(B));
        for (int64_t b = 0; b < B; ++b) pos[static_cast<size_t>(b)] = first_one(b);  // (after the prompt's removal)
        parts.push_back(row_at(hidden, pos));
        break;
      }
      case PoolingMode::Max:  // padding is -inf, so never the largest
        parts.push_back(max(masked_fill(hidden, eq(mask, zeros({}, dt)).expand({B, T, D}), -INFINITY), 1).first);
        break;
      case PoolingMode::Mean:
      case PoolingMode::MeanSqrtLen: {
        const Variable total = sum(hidden * Variable(mask), {1});  // (B, D)
        Tensor count = clamp(sum(mask, {1}), 1e-9, std::nullopt);  // (B, 1), at least 1e-9 as sentence-transformers
        if (mode == PoolingMode::MeanSqrtLen) count = sqrt(count);
        parts.push_back(total / Variable(count));
        break;
      }
      case PoolingMode::WeightedMean: {  // token t weighs t (from 1 at the first real token of the row)
        std::vector<double> w(static_cast<size_t>(B * T));
        for (int64_t b = 0; b < B; ++b)
          for (int64_t t = 0; t < T; ++t)
            w[b * T + t] = static_cast<double>(m[b * T + t]) * static_cast<double>(t + 1 - first_real[b]);
        const Tensor weights = from_vector(w, {B, T}).to(dt).unsqueeze(2);
        const Variable total = sum(hidden * Variable(weights), {1});
        parts.push_back(total / Variable(clamp(sum(weights, {1}), 1e-9, std::nullopt)));
        break;
      }
      case PoolingMode::LastToken: {  // the last real token (position 0, zeroed, for a row of padding)
        std::vector<int64_t> pos(static_cast<size_t>(B), 0);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t t = T - 1; t >= 0; --t)
            if (m[b * T + t]) {
              pos[static_cast<size_t>(b)] = t;
              break;
            }
        parts.push_back(row_at(hidden * Variable(mask), pos));
        break;
      }
    }
  }
  return parts.size() == 1 ? parts.front() : concat(parts, 1);
}

// ---------------------------------------------------------------- the folder

SentenceTransformer SentenceTransformer::from_pretrained(const std::string& folder_name) {
  const char* op = "SentenceTransformer::from_pretrained";
  const fs::path folder(folder_name);
  std::error_code ec;
  MG_CHECK(fs::exists(folder, ec), FileError, "{}: '{}' does not exist (expected a sentence-transformers folder)", op,
           folder_name);
  MG_CHECK(fs::is_directory(folder, ec), FileError,
           "{}: '{}' is a file; pass the sentence-transformers folder that holds modules.json ('{}')", op, folder_name,
           folder.parent_path().string());

  // modules.json: the pipeline. Without it, a plain Hugging Face model folder with mean pooling
  // (what sentence-transformers makes of one).
  fs::path transformer_dir = folder, pooling_dir;
  bool has_pooling = false, has_normalize = false;
  const fs::path modules_path = folder / "modules.json";
  if (fs::is_regular_file(modules_path, ec)) {
    const nlohmann::json modules = read_json(modules_path, op);
    MG_CHECK(modules.is_array() && !modules.empty(), ValueError, "{}: '{}' should hold a list of modules", op,
             modules_path.string());
    for (size_t i = 0; i < modules.size(); ++i) {
      const nlohmann::json& mod = modules[i];
      MG_CHECK(mod.is_object() && mod.contains("type") && mod["type"].is_string(), ValueError,
               "{}: '{}': module {} has no \"type\"", op, modules_path.string(), i);
      const std::string type = mod["type"].get<std::string>();
      const std::string kind = type.substr(type.rfind('.') == std::string::npos ? 0 : type.rfind('.') + 1);
      const std::string path = mod.value("path", std::string());
      const std::string expected = i == 0 ? "Transformer" : i == 1 ? "Pooling" : "Normalize";
      MG_CHECK(kind == expected, ValueError,
               "{}: '{}': module {} is {}; this reader runs Transformer, then Pooling, then an optional Normalize "
               "(other modules, such as Dense, are not supported)",
               op, modules_path.string(), i, type);
      MG_CHECK(i < 3, ValueError, "{}: '{}': module {} ({}) comes after Normalize; only three modules are supported",
               op, modules_path.string(), i, type);
      if (kind == "Transformer") transformer_dir = folder / path;
      if (kind == "Pooling") has_pooling = true, pooling_dir = folder / path;
      if (kind == "Normalize") has_normalize = true;
    }
  }

  auto model = std::shared_ptr<BertModel>(bert_from_pretrained(transformer_dir.string()));
  SentenceTransformer st(data::AutoTokenizer::from_pretrained(transformer_dir.string()), std::move(model));
  st.normalize = has_normalize;

  // sentence_bert_config.json: max_seq_length and do_lower_case; else the tokenizer's model_max_length.
  const int64_t max_positions = st.model->config.max_position_embeddings;
  st.max_seq_length = std::min(st.tokenizer.model_max_length(), max_positions);
  const fs::path sbert = transformer_dir / "sentence_bert_config.json";
  if (fs::is_regular_file(sbert, ec)) {
    const nlohmann::json j = read_json(sbert, op);
    MG_CHECK(j.is_object(), ValueError, "{}: '{}' should hold a JSON object", op, sbert.string());
    if (j.contains("max_seq_length") && !j["max_seq_length"].is_null()) {
      MG_CHECK(j["max_seq_length"].is_number_integer() && j["max_seq_length"].get<int64_t>() >= 2, ValueError,
               "{}: '{}': max_seq_length should be a whole number of at least 2 ([CLS] and [SEP]), got {}", op,
               sbert.string(), j["max_seq_length"].dump());
      st.max_seq_length = std::min(j["max_seq_length"].get<int64_t>(), max_positions);
    }
    if (j.contains("do_lower_case")) {
      MG_CHECK(j["do_lower_case"].is_boolean(), ValueError, "{}: '{}': do_lower_case should be true or false", op,
               sbert.string());
      st.do_lower_case = j["do_lower_case"].get<bool>();
    }
  }
  if (st.do_lower_case) st.tokenizer = st.tokenizer.with_lower_case();

  if (has_pooling) {
    st.pooling = PoolingConfig::from_json_file((pooling_dir / "config.json").string());
  } else {
    st.pooling.embedding_dimension = st.model->config.hidden_size;
  }
  MG_CHECK(st.pooling.embedding_dimension == st.model->config.hidden_size, ValueError,
           "{}: '{}': the pooling's embedding_dimension {} is not the model's hidden_size {}", op,
           (pooling_dir / "config.json").string(), st.pooling.embedding_dimension, st.model->config.hidden_size);
  return st;
}

// ---------------------------------------------------------------- encode

data::BatchEncoding SentenceTransformer::tokenize(const std::vector<std::string>& texts) const {
  return tokenizer.encode_batch(texts, max_seq_length);
}

Variable SentenceTransformer::forward(const data::BatchEncoding& batch, int64_t prompt_length) const {
  const BertOutput out =
      (*model)(batch.input_ids, {.attention_mask = batch.attention_mask, .token_type_ids = batch.token_type_ids});
  Variable e = pool(out.last_hidden_state, batch.attention_mask, pooling, prompt_length);
  return normalize ? mg::normalize(e, 2.0, 1) : e;
}

Tensor SentenceTransformer::encode(const std::vector<std::string>& sentences, const EncodeOptions& o) const {
  MG_CHECK(o.batch_size >= 1, ValueError, "SentenceTransformer::encode: batch_size must be at least 1, got {}",
           o.batch_size);
  NoGradGuard no_grad;
  model->eval();
  const int64_t N = static_cast<int64_t>(sentences.size()), D = get_sentence_embedding_dimension();
  const DType dt = model->embeddings.word_embeddings.weight.dtype();
  Tensor out = zeros({N, D}, dt);
  if (N == 0) return out;

  // The prompt's length in tokens, without the [SEP] the tokenizer puts after it.
  int64_t prompt_length = 0;
  if (!o.prompt.empty()) prompt_length = static_cast<int64_t>(tokenizer.encode(o.prompt, max_seq_length).size()) - 1;

  // Longest text first (in characters, as sentence-transformers sorts), so each batch pads little.
  std::vector<int64_t> order(static_cast<size_t>(N)), length(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    std::vector<int32_t> cps;
    data::invalid_utf8_offset(sentences[i], &cps);
    length[i] = static_cast<int64_t>(cps.size());
  }
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return length[a] > length[b]; });

  const int64_t batches = (N + o.batch_size - 1) / o.batch_size;
  const bool progress = o.show_progress_bar.value_or(batches >= 4 && isatty(STDERR_FILENO));
  for (int64_t k = 0; k < batches; ++k) {
    const int64_t begin = k * o.batch_size, end = std::min(N, begin + o.batch_size);
    std::vector<std::string> texts;
    for (int64_t i = begin; i < end; ++i) texts.push_back(o.prompt + sentences[order[i]]);
    Variable e = forward(tokenize(texts), prompt_length);
    if (o.normalize_embeddings && !normalize) e = mg::normalize(e, 2.0, 1);
    const Tensor rows = e.data();
    for (int64_t i = begin; i < end; ++i) out.narrow(0, order[i], 1).copy_(rows.narrow(0, i - begin, 1));
    if (progress) fmt::print(stderr, "\rBatches: {}/{}{}", k + 1, batches, k + 1 == batches ? "\n" : "");
  }
  return out;
}

Tensor SentenceTransformer::encode(const std::string& sentence, const EncodeOptions& options) const {
  return encode(std::vector<std::string>{sentence}, options).squeeze(0);
}

}  // namespace mg::models
