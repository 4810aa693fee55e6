#pragma once
// Look at the attention inside any model, without changing the model's code:
//
//   inspect::AttentionCapture capture(model);   // hooks every MultiheadAttention in the model
//   model(x);
//   Tensor w = capture.at("blocks.0.attn").weights;   // (B, H, Tq, Tk), post-softmax
//
// Every MultiheadAttention found under `model` gets a forward hook (Module::register_forward_hook)
// that copies its per-head scores and weights out of the graph; a module with a forward hook
// computes them, so the fused kernel is skipped while a capture is alive. The hooks are removed
// when the capture goes out of scope (if the model is still there). It is nothing but hooks:
// several captures, and hooks of your own, can watch the same model.
#include <map>
#include <string>
#include <vector>

#include "minigrad/nn/attention.h"

namespace mg::inspect {

class AttentionCapture {
 public:
  /// What one attention module produced in its last forward (detached copies).
  struct Record {
    Tensor scores;               // (B, H, Tq, Tk) pre-softmax, masked entries -inf
    Tensor weights;              // (B, H, Tq, Tk) post-softmax
    bool self_attention = true;  // query and key were the same Variable (false: cross-attention)
  };
  /// Hook every MultiheadAttention in `model` (found through named_modules()).
  explicit AttentionCapture(nn::Module& model);
  ~AttentionCapture();
  AttentionCapture(const AttentionCapture&) = delete;
  AttentionCapture& operator=(const AttentionCapture&) = delete;

  /// The dotted names of the hooked modules, in model order ("blocks.0.attn", ...).
  const std::vector<std::string>& names() const { return names_; }
  /// The last record of module `name`; a ValueError if it has not run yet or does not exist.
  const Record& at(const std::string& name) const;
  /// Forget what was captured.
  void clear() { records_.clear(); }

 private:
  std::vector<std::string> names_;
  std::vector<nn::HookHandle> hooks_;
  std::map<std::string, Record> records_;
};

}  // namespace mg::inspect
