#pragma once
// Watch heads form while a model trains. Every `every` steps, Telemetry records for each head of
// every MultiheadAttention in a model:
//   - its attention pattern on a fixed probe sequence (weights after softmax and scores before),
//   - its previous-token, first-token, induction and copying scores (inspect/head_scores.h),
// and for a language model the in-context-learning score (icl_score in inspect/head_scores.h).
// It writes them as one JSON file per run, which viz::explorer_html turns into a page where a
// learner moves a slider over the training steps.
//
//   inspect::Telemetry tel(model, [&](const Tensor& ids) { model(ids); }, {.vocab = V, .probe = probe});
//   for (int step = 1; step <= steps; ++step) {
//     ... train ...
//     if (tel.due(step)) tel.record(step, loss.item());
//   }
//   tel.save("runs/x/telemetry.json");
//
// Recording runs the model in eval mode without recording gradients and puts the mode back; it
// draws nothing from the training's random generators (its random spans come from its own seed),
// so a run with telemetry trains exactly as one without.
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "minigrad/inspect/head_scores.h"

namespace mg::inspect {

/// What Telemetry records, and how often.
struct TelemetryOptions {
  /// Token ids are in [0, vocab)
  int64_t vocab = 0;
  /// (B, T) Int64: typical input for patterns and the first two scores.
  Tensor probe;
  /// Labels of the probe's first row (default: the ids)
  std::vector<std::string> tokens;
  /// Record the first pattern_length queries and keys of row 0.
  int64_t pattern_length = 32;
  /// due() at step 1 and every `every` steps.
  int64_t every = 50;
  /// Induction length, threshold, seed; .logits adds copying and ICL.
  HeadScoreOptions scores;
  /// Per-layer labels where queries or keys are not the probe's tokens (cross-attention: the
  /// queries are the decoder's), by the layer's dotted name. A layer's labels must cover what is
  /// recorded of it (min(pattern_length, its length)); record() says which layer lacks them.
  std::map<std::string, std::vector<std::string>> query_tokens, key_tokens;
};

/// One recording.
struct TelemetryRecord {
  int64_t step = 0;
  double loss = NAN;                               // the training loss the caller passed (NaN: none)
  IclScore icl{NAN, NAN, NAN};                     // NaN when there is no logits function
  std::vector<HeadScore> heads;                    // every head of every layer, in model order
  std::vector<AttentionCapture::Record> patterns;  // per layer: (H, P, P) of probe row 0
};

/// Records head telemetry during training (see the file comment).
class Telemetry {
 public:
  /// `forward` runs `model` on ids (B, T). Checks the options (a ValueError or ShapeError naming
  /// what is wrong), that the model has at least one MultiheadAttention, and that query_tokens
  /// and key_tokens name only its attention layers.
  Telemetry(nn::Module& model, std::function<void(const Tensor& ids)> forward, TelemetryOptions options);

  /// Whether `step` is one to record: step 1 and every multiple of `every`.
  bool due(int64_t step) const { return step == 1 || (options_.every > 0 && step % options_.every == 0); }
  /// Measure now and keep the record; returns it.
  const TelemetryRecord& record(int64_t step, double loss = NAN);
  /// Everything recorded so far, in order.
  const std::vector<TelemetryRecord>& records() const { return records_; }
  /// The dotted names of the attention layers and their head counts.
  const std::vector<std::string>& layers() const { return layers_; }

  /// The run as JSON text (format "minigrad-telemetry-1", described in docs/05-attention.md);
  /// `meta` is copied into it (example name, settings).
  std::string json(const std::map<std::string, std::string>& meta = {}) const;
  /// Write json(meta) to `path` atomically (a temporary beside it, then rename).
  void save(const std::string& path, const std::map<std::string, std::string>& meta = {}) const;

 private:
  nn::Module& model_;
  std::function<void(const Tensor&)> forward_;
  TelemetryOptions options_;
  std::vector<std::string> layers_;
  std::vector<int64_t> heads_;
  std::vector<TelemetryRecord> records_;
};

}  // namespace mg::inspect
