#include "optim/checkpoint.h"

#include <unordered_map>

#include "nn/serialize.h"

namespace mg::optim {
namespace {
const std::string kPrefix = "optimizer.";

// Which module parameter name each optimized parameter has.
std::unordered_map<VariableImpl*, std::string> names_of(const nn::Module& model, const Optimizer& opt) {
  std::unordered_map<VariableImpl*, std::string> name;
  for (auto& [n, p] : model.named_parameters()) name[p.impl().get()] = n;
  for (const Group& g : opt.groups())
    for (const Variable& p : g.params)
      MG_CHECK(name.count(p.impl().get()), ValueError,
               "checkpoint: the optimizer holds a parameter ({}) that is not part of the model", p.name());
  return name;
}
}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer& opt, int64_t step) {
  auto name = names_of(model, opt);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [n, p] : model.named_parameters()) tensors.emplace_back(n, p.data());
  for (auto& [n, b] : model.named_buffers()) tensors.emplace_back(n, b);
  std::map<std::string, std::string> meta{{"format", "pt"}, {"producer", "minigrad"},
                                          {"optimizer", opt.name()}, {"step", std::to_string(step)}};
  for (size_t g = 0; g < opt.groups().size(); ++g) {
    meta["lr." + std::to_string(g)] = fmt::format("{:.17g}", opt.groups()[g].lr);
    for (const Variable& p : opt.groups()[g].params)
      if (opt.has_state(p))
        for (auto& [k, t] : const_cast<Optimizer&>(opt).state(p)) tensors.emplace_back(kPrefix + name[p.impl().get()] + "." + k, t);
  }
  save_safetensors(path, tensors, meta);
}

int64_t load_checkpoint(const std::string& path, nn::Module& model, Optimizer& opt) {
  const SafeTensors file = load_safetensors(path);
  auto meta = [&](const std::string& key) -> std::string {
    auto it = file.metadata.find(key);
    MG_CHECK(it != file.metadata.end(), FileError, "load_checkpoint: {} has no \"{}\" in its metadata (not a minigrad training checkpoint?)", path, key);
    return it->second;
  };
  MG_CHECK(meta("optimizer") == opt.name(), FileError, "load_checkpoint: {} holds {} state but the optimizer is {}", path,
           meta("optimizer"), opt.name());
  int64_t step = 0;
  std::vector<double> lrs;
  try {
    step = std::stoll(meta("step"));
    for (size_t g = 0; g < opt.groups().size(); ++g) lrs.push_back(std::stod(meta("lr." + std::to_string(g))));
  } catch (const std::logic_error&) {
    throw FileError(fmt::format("load_checkpoint: {} has a malformed step or learning rate in its metadata", path));
  }

  // Optimizer state: every entry must name an optimized parameter and have a sensible shape.
  std::unordered_map<std::string, Variable> by_name;
  auto names = names_of(model, opt);
  for (const Group& g : opt.groups())
    for (const Variable& p : g.params) by_name[names[p.impl().get()]] = p;
  std::unordered_map<VariableImpl*, ParamState> new_state;
  for (auto& [key, t] : file.tensors) {
    if (key.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = key.substr(kPrefix.size());
    const size_t dot = rest.find_last_of('.');
    const std::string pname = dot == std::string::npos ? "" : rest.substr(0, dot), sname = dot == std::string::npos ? "" : rest.substr(dot + 1);
    auto it = by_name.find(pname);
    MG_CHECK(it != by_name.end(), FileError, "load_checkpoint: {} has optimizer state \"{}\" for a parameter the optimizer does not hold",
             path, key);
    const Variable& p = it->second;
    const bool ok = sname == "step" ? (t.dim() == 0 && t.dtype() == DType::Int64) : (t.shape() == p.shape() && is_floating(t.dtype()));
    MG_CHECK(ok, FileError, "load_checkpoint: optimizer state \"{}\" in {} has {} {}, which does not fit parameter {} {}", key, path,
             dtype_name(t.dtype()), shape_str(t.shape()), pname, shape_str(p.shape()));
    new_state[p.impl().get()][sname] = sname == "step" ? t.clone() : t.to(p.dtype()).clone();
  }
  // The weights are checked (and then copied) last: nothing above has changed anything yet.
  nn::load_from(model, file, path, {kPrefix});
  for (const Group& g : opt.groups())
    for (const Variable& p : g.params) {
      auto it = new_state.find(p.impl().get());
      opt.state(p) = it == new_state.end() ? ParamState{} : it->second;
    }
  for (size_t g = 0; g < lrs.size(); ++g) opt.groups()[g].lr = lrs[g];
  return step;
}

}  // namespace mg::optim
