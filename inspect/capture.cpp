#include "minigrad/inspect/capture.h"

namespace mg::inspect {

using namespace mg::nn;  // the modules it looks into

AttentionCapture::AttentionCapture(Module& model) {
  for (auto& [name, module] : model.named_modules()) {
    auto* mha = dynamic_cast<MultiheadAttention*>(module);
    if (!mha) continue;
    names_.push_back(name);
    // Outputs 1 and 2 of an AttentionOutput: the weights and the scores.
    hooks_.push_back(mha->register_forward_hook(
        [this, key = name](const Module&, const std::vector<Variable>& in, std::vector<Variable>& out) {
          // in = {query, key, value}; out = {output, weights, scores}
          records_[key] = Record{out[2].data().clone(), out[1].data().clone(), in[0].impl() == in[1].impl()};
        }));
  }
}

AttentionCapture::~AttentionCapture() {
  for (HookHandle& h : hooks_) h.remove();  // a module destroyed before the capture has no hook to remove
}

const AttentionCapture::Record& AttentionCapture::at(const std::string& name) const {
  auto it = records_.find(name);
  if (it == records_.end()) {
    std::string known;
    for (auto& n : names_) known += (known.empty() ? "" : ", ") + (n.empty() ? std::string("(the model itself)") : n);
    throw ValueError(
        fmt::format("AttentionCapture: nothing captured for \"{}\" (attention modules: {}; did the model run "
                    "a forward pass?)",
                    name, known));
  }
  return it->second;
}

}  // namespace mg::inspect
