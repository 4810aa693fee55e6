#include "minigrad/inspect/telemetry.h"

#include <algorithm>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "minigrad/autograd/grad_mode.h"
#include "minigrad/nn/attention.h"
#include "minigrad/tensor/atomic_file.h"
#include "minigrad/tensor/ops.h"

namespace mg::inspect {

using namespace mg::nn;  // the modules it looks into
namespace {

// x rounded to `decimals` places, as a JSON number; null for NaN and +-inf (masked scores).
nlohmann::ordered_json number(double x, int decimals) {
  if (!std::isfinite(x)) return nullptr;
  const double scale = std::pow(10.0, decimals);
  return std::round(x * scale) / scale;
}

// (H, P, P) -> [head][query][key]
nlohmann::ordered_json maps(const Tensor& t, int decimals) {
  const Tensor c = t.to(DType::Float64).contiguous();
  const double* p = c.data<double>();
  const int64_t H = c.size(0), R = c.size(1), C = c.size(2);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (int64_t h = 0; h < H; ++h) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (int64_t r = 0; r < R; ++r) {
      nlohmann::ordered_json row = nlohmann::ordered_json::array();
      for (int64_t k = 0; k < C; ++k) row.push_back(number(p[(h * R + r) * C + k], decimals));
      rows.push_back(std::move(row));
    }
    out.push_back(std::move(rows));
  }
  return out;
}

// How many labels `layer`'s queries (or keys) have: its own entry in `by_layer`, else the probe's.
int64_t label_count(const TelemetryOptions& o, const std::map<std::string, std::vector<std::string>>& by_layer,
                    const std::string& layer) {
  auto it = by_layer.find(layer);
  return it == by_layer.end() ? o.probe.size(1) : static_cast<int64_t>(it->second.size());
}

}  // namespace

Telemetry::Telemetry(Module& model, std::function<void(const Tensor& ids)> forward, TelemetryOptions options)
    : model_(model), forward_(std::move(forward)), options_(std::move(options)) {
  const TelemetryOptions& o = options_;
  MG_CHECK(forward_ != nullptr, ValueError, "Telemetry: no forward function");
  MG_CHECK(o.vocab >= 2, ValueError, "Telemetry: vocab must be >= 2, got {}", o.vocab);
  MG_CHECK(o.probe.defined(), StateError, "Telemetry: the probe is undefined; expected int64 ids (B, T)");
  MG_CHECK(o.probe.dtype() == DType::Int64, DTypeError, "Telemetry: the probe must be int64 token ids, got {} {}",
           dtype_name(o.probe.dtype()), shape_str(o.probe.shape()));
  MG_CHECK(o.probe.dim() == 2 && o.probe.size(0) >= 1 && o.probe.size(1) >= 4, ShapeError,
           "Telemetry: the probe must be ids (B, T) with B >= 1 and T >= 4, got shape {}", shape_str(o.probe.shape()));
  MG_CHECK(o.every >= 1, ValueError, "Telemetry: every must be >= 1, got {}", o.every);
  MG_CHECK(o.pattern_length >= 1, ValueError, "Telemetry: pattern_length must be >= 1, got {}", o.pattern_length);
  MG_CHECK(o.tokens.empty() || static_cast<int64_t>(o.tokens.size()) == o.probe.size(1), ShapeError,
           "Telemetry: {} token labels for a probe of length {}", o.tokens.size(), o.probe.size(1));
  for (auto& [name, m] : model_.named_modules())
    if (auto* mha = dynamic_cast<MultiheadAttention*>(m)) layers_.push_back(name), heads_.push_back(mha->num_heads);
  MG_CHECK(!layers_.empty(), ValueError, "Telemetry: this {} has no MultiheadAttention to watch", model_.type_name());
  for (auto [what, by_layer] : {std::pair{"query_tokens", &o.query_tokens}, {"key_tokens", &o.key_tokens}})
    for (auto& [name, labels] : *by_layer)
      MG_CHECK(std::find(layers_.begin(), layers_.end(), name) != layers_.end(), ValueError,
               "Telemetry: {} names \"{}\", which is no MultiheadAttention of this {} (those are: {})", what, name,
               model_.type_name(), fmt::join(layers_, ", "));
}

const TelemetryRecord& Telemetry::record(int64_t step, double loss) {
  const bool was_training = model_.is_training();
  model_.eval();
  struct Restore {
    Module& m;
    bool on;
    ~Restore() { m.train(on); }
  } restore{model_, was_training};
  NoGradGuard no_grad;
  TelemetryRecord r;
  r.step = step, r.loss = loss;
  const int64_t T = options_.probe.size(1);
  r.heads = score_heads(model_, forward_, options_.probe, options_.vocab, options_.scores);
  if (options_.scores.logits) {
    const int64_t n = options_.scores.induction_length > 0 ? options_.scores.induction_length : T / 2;
    r.icl = icl_score(options_.scores.logits, options_.vocab, n, options_.scores.induction_batch, options_.scores.seed);
  }
  {
    AttentionCapture cap(model_);
    forward_(options_.probe.narrow(0, 0, 1));
    for (const std::string& name : layers_) {
      const AttentionCapture::Record& c = cap.at(name);
      const int64_t q = std::min(options_.pattern_length, c.weights.size(2)),
                    k = std::min(options_.pattern_length, c.weights.size(3));
      // A layer whose queries or keys are not the probe's tokens (a decoder's) needs labels of its own.
      const int64_t nq = label_count(options_, options_.query_tokens, name),
                    nk = label_count(options_, options_.key_tokens, name);
      MG_CHECK(
          q <= nq && k <= nk, ShapeError,
          "Telemetry: {} attends from {} queries to {} keys (the recorded part), but has {} query and {} key labels; "
          "give it labels of its own in options.query_tokens / key_tokens[\"{}\"]",
          name, q, k, nq, nk, name);
      auto cut = [&](const Tensor& t) { return t.narrow(2, 0, q).narrow(3, 0, k).squeeze(0).contiguous(); };
      r.patterns.push_back({cut(c.scores), cut(c.weights), c.self_attention});
    }
  }
  records_.push_back(std::move(r));
  return records_.back();
}

std::string Telemetry::json(const std::map<std::string, std::string>& meta) const {
  nlohmann::ordered_json j;
  j["format"] = "minigrad-telemetry-1";
  j["meta"] = meta;
  j["every"] = options_.every;
  std::vector<std::string> tokens = options_.tokens;
  if (tokens.empty()) {
    const Tensor row = options_.probe.narrow(0, 0, 1).contiguous();
    for (int64_t i = 0; i < row.numel(); ++i) tokens.push_back(std::to_string(row.data<int64_t>()[i]));
  }
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (size_t l = 0; l < layers_.size(); ++l) {
    auto labels = [&](const std::map<std::string, std::vector<std::string>>& m) {
      auto it = m.find(layers_[l]);
      return it == m.end() ? tokens : it->second;
    };
    layers.push_back({{"name", layers_[l]},
                      {"heads", heads_[l]},
                      {"query_tokens", labels(options_.query_tokens)},
                      {"key_tokens", labels(options_.key_tokens)}});
  }
  j["layers"] = layers;
  nlohmann::ordered_json recs = nlohmann::ordered_json::array();
  for (const TelemetryRecord& r : records_) {
    nlohmann::ordered_json jr;
    jr["step"] = r.step;
    jr["loss"] = number(r.loss, 6);
    jr["icl"] = std::isnan(r.icl.score) ? nlohmann::ordered_json(nullptr)
                                        : nlohmann::ordered_json{{"early", number(r.icl.early, 4)},
                                                                 {"late", number(r.icl.late, 4)},
                                                                 {"score", number(r.icl.score, 4)}};
    nlohmann::ordered_json heads = nlohmann::ordered_json::array();
    for (const HeadScore& s : r.heads)
      heads.push_back({{"layer", s.layer},
                       {"head", s.head},
                       {"previous_token", number(s.previous_token, 4)},
                       {"first_token", number(s.first_token, 4)},
                       {"induction", number(s.induction, 4)},
                       {"copying", number(s.copying, 4)},
                       {"label", s.label}});
    jr["heads"] = heads;
    nlohmann::ordered_json w = nlohmann::ordered_json::array(), sc = nlohmann::ordered_json::array();
    for (const AttentionCapture::Record& p : r.patterns)
      w.push_back(maps(p.weights, 3)), sc.push_back(maps(p.scores, 2));
    jr["weights"] = w;
    jr["scores"] = sc;
    recs.push_back(std::move(jr));
  }
  j["records"] = recs;
  try {
    return j.dump();
  } catch (const nlohmann::json::exception&) {
    throw ValueError("Telemetry: a token label or meta text is not valid UTF-8");
  }
}

void Telemetry::save(const std::string& path, const std::map<std::string, std::string>& meta) const {
  write_text_file(path, json(meta), "Telemetry::save");
}

}  // namespace mg::inspect
