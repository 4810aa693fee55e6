#include "minigrad/nn/serialize.h"

#include <map>
#include <set>

namespace mg::nn {

namespace {
std::vector<std::pair<std::string, Tensor>> module_state(const Module& m) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, p] : m.named_parameters()) out.emplace_back(n, p.data());
  for (auto& [n, b] : m.named_buffers()) out.emplace_back(n, b);
  return out;
}
}  // namespace

void save(const Module& module, const std::string& path) {
  save_safetensors(path, module_state(module), {{"format", "pt"}, {"producer", "minigrad"}});
}

void load_from(Module& module, const SafeTensors& file, const std::string& path,
               const std::vector<std::string>& ignore_prefixes) {
  auto ignored = [&](const std::string& n) {
    for (auto& p : ignore_prefixes)
      if (n.rfind(p, 0) == 0) return true;
    return false;
  };
  const auto expected = module_state(module);
  std::set<std::string> want;
  for (auto& [n, t] : expected) want.insert(n);
  std::vector<std::string> missing, unexpected, problems;
  std::map<std::string, Tensor> found;
  for (auto& [n, t] : file.tensors)
    if (!ignored(n)) {
      if (want.count(n)) found[n] = t;
      else unexpected.push_back(n);
    }
  for (auto& [n, t] : expected) {
    auto it = found.find(n);
    if (it == found.end()) {
      missing.push_back(n);
      continue;
    }
    const Tensor& f = it->second;
    if (has_internal_overlap(t))
      problems.push_back(fmt::format("{}: the model's tensor is an expanded view that cannot be written", n));
    else if (f.shape() != t.shape())
      problems.push_back(fmt::format("{}: shape {} in the file, {} in the model", n, shape_str(f.shape()), shape_str(t.shape())));
    else if (f.dtype() != t.dtype() && !(is_floating(f.dtype()) && is_floating(t.dtype())))
      problems.push_back(fmt::format("{}: dtype {} in the file, {} in the model", n, dtype_name(f.dtype()), dtype_name(t.dtype())));
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s;
  };
  MG_CHECK(missing.empty() && unexpected.empty() && problems.empty(), FileError,
           "load: {} does not fit {} (the model was left unchanged){}{}{}", path, module.type_name(),
           missing.empty() ? "" : "\n  missing from the file: " + list(missing),
           unexpected.empty() ? "" : "\n  not in the model: " + list(unexpected),
           problems.empty() ? "" : "\n  mismatched: " + list(problems));
  // Everything checked: now copy, in place, so existing references (optimizers) stay valid.
  for (auto& [n, t] : expected) t.copy_(found[n].to(t.dtype()));
}

void load(Module& module, const std::string& path) { load_from(module, load_safetensors(path), path); }

}  // namespace mg::nn
