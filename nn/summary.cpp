#include "minigrad/nn/summary.h"

#include <algorithm>
#include <map>
#include <set>

namespace mg::nn {

namespace {
// 1234567 -> "1,234,567"
std::string thousands(int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string s = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}
}  // namespace

std::string summary(Module& model, const std::function<void()>& forward) {
  MG_CHECK(forward != nullptr, ValueError, "summary: no forward function");
  const std::vector<std::pair<std::string, Module*>> modules = model.named_modules();
  std::map<const Module*, Shape> shapes;
  std::vector<HookHandle> hooks;
  for (auto& [name, m] : modules)
    if (m->runs_hooks())
      hooks.push_back(m->register_forward_hook(
          [&shapes](const Module& mod, const std::vector<Variable>&, std::vector<Variable>& out) {
            if (!shapes.count(&mod) && !out.empty() && out[0].defined()) shapes[&mod] = out[0].shape();
          }));
  struct Remove {
    std::vector<HookHandle>& h;
    ~Remove() {
      for (HookHandle& x : h) x.remove();
    }
  } remove{hooks};
  {
    NoGradGuard no_grad;
    forward();
  }
  std::string out =
      fmt::format("{:<44} {:<22} {:>12} {:>10}\n", "Layer (type)", "Output shape", "Param #", "Trainable");
  const std::string rule(91, '=');
  out = rule + "\n" + out + rule + "\n";
  std::set<const VariableImpl*> seen;
  int64_t total = 0, trainable = 0;
  for (auto& [name, m] : modules) {
    const int depth = name.empty() ? 0 : 1 + static_cast<int>(std::count(name.begin(), name.end(), '.'));
    const std::string leaf =
        name.empty() ? "" : name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
    const std::string label = std::string(static_cast<size_t>(2 * depth), ' ') +
                              (leaf.empty() ? m->type_name() : leaf + " (" + m->type_name() + ")");
    int64_t own = 0, own_trainable = 0;
    for (auto& [pn, p] : m->named_parameters(false))
      if (seen.insert(p.impl().get()).second) {
        own += p.numel();
        if (p.requires_grad()) own_trainable += p.numel();
      }
    total += own, trainable += own_trainable;
    auto it = shapes.find(m);
    out += fmt::format("{:<44} {:<22} {:>12} {:>10}\n", label, it == shapes.end() ? "--" : shape_str(it->second),
                       own == 0 ? "--" : thousands(own),
                       own == 0               ? ""
                       : own_trainable == own ? "True"
                       : own_trainable == 0   ? "False"
                                              : "Partial");
  }
  out += rule + "\n";
  out += fmt::format("Total params: {}\nTrainable params: {}\nNon-trainable params: {}\n", thousands(total),
                     thousands(trainable), thousands(total - trainable));
  return out + rule + "\n";
}

}  // namespace mg::nn
