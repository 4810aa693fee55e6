#include "minigrad/nn/capture.h"

namespace mg::nn {

AttentionCapture::AttentionCapture(Module& model) {
  for (auto& entry : model.named_modules()) {
    auto* mha = dynamic_cast<MultiheadAttention*>(entry.second);
    if (!mha) continue;
    const std::string name = entry.first;
    if (mha->has_hook()) {
      for (auto& [m, life] : modules_) m->set_hook(nullptr);  // undo what this capture did so far
      throw StateError(fmt::format("AttentionCapture: {} already has a hook (another AttentionCapture of this model?)",
                                   name.empty() ? std::string("the model") : name));
    }
    names_.push_back(name);
    modules_.emplace_back(mha, mha->lifetime());
    mha->set_hook([this, name](const AttentionOutput& o) {
      records_[name] = Record{o.scores.data().clone(), o.weights.data().clone()};
    });
  }
}

AttentionCapture::~AttentionCapture() {
  for (auto& [m, life] : modules_)
    if (!life.expired()) m->set_hook(nullptr);  // a module destroyed before the capture has no hook to remove
}

const AttentionCapture::Record& AttentionCapture::at(const std::string& name) const {
  auto it = records_.find(name);
  if (it == records_.end()) {
    std::string known;
    for (auto& n : names_) known += (known.empty() ? "" : ", ") + (n.empty() ? std::string("(the model itself)") : n);
    throw ValueError(fmt::format("AttentionCapture: nothing captured for \"{}\" (attention modules: {}; did the model run "
                                 "a forward pass?)", name, known));
  }
  return it->second;
}

}  // namespace mg::nn
