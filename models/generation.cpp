// Logits processors and generation settings (models/generation.h), with transformers' arithmetic.
#include "minigrad/models/generation.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "minigrad/tensor/error.h"

namespace mg::models {
namespace {

void check_logits(const Tensor& logits, const char* op) {
  MG_CHECK(logits.defined(), StateError, "{}: the logits are undefined", op);
  MG_CHECK(logits.dtype() == DType::Float32 || logits.dtype() == DType::Float64, DTypeError,
           "{}: expected float32 or float64 logits, got {}", op, dtype_name(logits.dtype()));
  MG_CHECK(logits.dim() == 2 && logits.size(1) >= 1, ShapeError, "{}: expected logits (batch, vocab), got {}", op,
           shape_str(logits.shape()));
}

// Apply f(row pointer, V) to each row of a contiguous copy of logits, in its dtype T.
template <class F>
Tensor per_row(const Tensor& logits, F f) {
  Tensor out = logits.contiguous().clone();
  const int64_t B = out.size(0), V = out.size(1);
  if (out.dtype() == DType::Float32) {
    float* p = out.data<float>();
    for (int64_t b = 0; b < B; ++b) f(p + b * V, V);
  } else {
    double* p = out.data<double>();
    for (int64_t b = 0; b < B; ++b) f(p + b * V, V);
  }
  return out;
}

}  // namespace

Tensor repetition_penalty(const Tensor& logits, const Tensor& ids, double penalty) {
  const char* op = "repetition_penalty";
  check_logits(logits, op);
  MG_CHECK(std::isfinite(penalty) && penalty > 0, ValueError, "{}: penalty must be finite and > 0, got {}", op,
           penalty);
  MG_CHECK(ids.defined() && ids.dtype() == DType::Int64 && ids.dim() == 2 && ids.size(0) == logits.size(0), ShapeError,
           "{}: ids must be int64 (batch, seq) with the logits' batch {}, got {} {}", op, logits.size(0),
           ids.defined() ? dtype_name(ids.dtype()) : "undefined", ids.defined() ? shape_str(ids.shape()) : "");
  const std::vector<int64_t> tokens = ids.contiguous().to_vector<int64_t>();
  const int64_t T = ids.size(1), V = logits.size(1);
  for (int64_t t : tokens)
    MG_CHECK(t >= 0 && t < V, IndexError, "{}: token id {} is out of range for {} logits", op, t, V);
  int64_t row = 0;
  return per_row(logits, [&](auto* s, int64_t) {
    using T_ = std::remove_pointer_t<decltype(s)>;
    const T_ p = static_cast<T_>(penalty);  // transformers: a float32 tensor times a Python float
    std::vector<bool> seen(static_cast<size_t>(V), false);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t id = tokens[static_cast<size_t>(row * T + t)];
      if (seen[static_cast<size_t>(id)]) continue;  // once per token, however often it occurs
      seen[static_cast<size_t>(id)] = true;
      s[id] = s[id] < 0 ? s[id] * p : s[id] / p;
    }
    ++row;
  });
}

Tensor top_k_filter(const Tensor& logits, int64_t k) {
  check_logits(logits, "top_k_filter");
  MG_CHECK(k >= 1, ValueError, "top_k_filter: k must be >= 1, got {}", k);
  if (k >= logits.size(1)) return logits.contiguous().clone();
  return per_row(logits, [&](auto* s, int64_t V) {
    using T_ = std::remove_pointer_t<decltype(s)>;
    std::vector<T_> sorted(s, s + V);
    std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<T_>());
    const T_ kth = sorted[static_cast<size_t>(k - 1)];
    for (int64_t v = 0; v < V; ++v)
      if (s[v] < kth) s[v] = -std::numeric_limits<T_>::infinity();
  });
}

Tensor top_p_filter(const Tensor& logits, double top_p) {
  check_logits(logits, "top_p_filter");
  MG_CHECK(top_p >= 0 && top_p <= 1, ValueError, "top_p_filter: top_p must be in [0, 1], got {}", top_p);
  if (top_p == 1) return logits.contiguous().clone();
  return per_row(logits, [&](auto* s, int64_t V) {
    using T_ = std::remove_pointer_t<decltype(s)>;
    // ascending order of the logits (the most likely last); softmax in the logits' dtype
    std::vector<int64_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return s[a] < s[b]; });
    const T_ top = s[order.back()];
    std::vector<T_> e(static_cast<size_t>(V));
    T_ total = 0;
    for (int64_t i = 0; i < V; ++i) total += (e[i] = std::exp(s[order[i]] - top));
    // cumulative probability, summed in double and rounded per entry (PyTorch's CPU cumsum)
    const T_ threshold = static_cast<T_>(1 - top_p);
    double cum = 0;
    std::vector<bool> drop(static_cast<size_t>(V), false);
    for (int64_t i = 0; i + 1 < V; ++i) {  // the last (most likely) always stays
      cum += static_cast<double>(e[i] / total);
      drop[static_cast<size_t>(i)] = static_cast<T_>(cum) <= threshold;
    }
    for (int64_t i = 0; i < V; ++i)
      if (drop[static_cast<size_t>(i)]) s[order[i]] = -std::numeric_limits<T_>::infinity();
  });
}

void check_generation_config(const GenerationConfig& c, int64_t vocab_size, const char* op) {
  MG_CHECK(c.max_new_tokens >= 0, ValueError, "{}: max_new_tokens must be >= 0, got {}", op, c.max_new_tokens);
  MG_CHECK(std::isfinite(c.temperature) && c.temperature > 0, ValueError,
           "{}: temperature must be finite and > 0 (for the most likely token, set do_sample false), got {}", op,
           c.temperature);
  MG_CHECK(!c.top_k || *c.top_k >= 0, ValueError, "{}: top_k must be >= 0 (0: all tokens), got {}", op, *c.top_k);
  MG_CHECK(c.top_p >= 0 && c.top_p <= 1, ValueError,
           "{}: top_p must be in [0, 1] (0: the most likely token only), got {}", op, c.top_p);
  MG_CHECK(std::isfinite(c.repetition_penalty) && c.repetition_penalty > 0, ValueError,
           "{}: repetition_penalty must be finite and > 0 (1: off), got {}", op, c.repetition_penalty);
  for (auto [name, id] : {std::pair{"eos_token_id", c.eos_token_id}, std::pair{"pad_token_id", c.pad_token_id}})
    MG_CHECK(!id || (*id >= 0 && *id < vocab_size), IndexError, "{}: {} {} is not a token id of a vocabulary of {}", op,
             name, *id, vocab_size);
}

Tensor process_logits(const Tensor& logits, const Tensor& ids, const GenerationConfig& c) {
  check_generation_config(c, logits.size(1), "process_logits");
  Tensor s = c.repetition_penalty != 1.0 ? repetition_penalty(logits, ids, c.repetition_penalty) : logits;
  if (!c.do_sample) return s;
  if (c.temperature != 1.0)
    s = per_row(s, [&](auto* r, int64_t V) {
      using T_ = std::remove_pointer_t<decltype(r)>;
      const T_ t = static_cast<T_>(c.temperature);
      for (int64_t v = 0; v < V; ++v) r[v] = r[v] / t;
    });
  if (c.top_k && *c.top_k > 0) s = top_k_filter(s, *c.top_k);
  if (c.top_p < 1.0) s = top_p_filter(s, c.top_p);
  return s;
}

GenerationConfig GenerationConfig::from_json_file(const std::string& path) {
  const char* op = "GenerationConfig::from_json_file";
  std::ifstream in(path, std::ios::binary);
  MG_CHECK(in.is_open(), FileError, "{}: cannot open '{}'", op, path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("{}: '{}' is not valid JSON: {}", op, path, e.what()));
  }
  MG_CHECK(j.is_object(), ValueError, "{}: '{}' should hold a JSON object", op, path);
  GenerationConfig c;
  auto number = [&](const char* key, double& out) {
    if (!j.contains(key) || j[key].is_null()) return;
    MG_CHECK(j[key].is_number(), ValueError, "{}: '{}': {} should be a number, got {}", op, path, key, j[key].dump());
    out = j[key].get<double>();
  };
  auto token = [&](const char* key, std::optional<int64_t>& out) {
    if (!j.contains(key) || j[key].is_null()) return;
    nlohmann::json v = j[key];
    if (v.is_array() && v.size() == 1) v = v[0];  // [50256]
    MG_CHECK(v.is_number_integer(), ValueError,
             "{}: '{}': {} should be a token id (one; several end tokens are not supported), got {}", op, path, key,
             j[key].dump());
    out = v.get<int64_t>();
  };
  if (j.contains("max_new_tokens") && !j["max_new_tokens"].is_null()) {
    MG_CHECK(j["max_new_tokens"].is_number_integer(), ValueError, "{}: '{}': max_new_tokens should be a whole number",
             op, path);
    c.max_new_tokens = j["max_new_tokens"].get<int64_t>();
  }
  if (j.contains("do_sample")) {
    MG_CHECK(j["do_sample"].is_boolean(), ValueError, "{}: '{}': do_sample should be true or false", op, path);
    c.do_sample = j["do_sample"].get<bool>();
  }
  number("temperature", c.temperature);
  number("top_p", c.top_p);
  number("repetition_penalty", c.repetition_penalty);
  if (j.contains("top_k") && !j["top_k"].is_null()) {
    MG_CHECK(j["top_k"].is_number_integer(), ValueError, "{}: '{}': top_k should be a whole number", op, path);
    c.top_k = j["top_k"].get<int64_t>();
  }
  token("eos_token_id", c.eos_token_id);
  token("pad_token_id", c.pad_token_id);
  return c;
}

}  // namespace mg::models
