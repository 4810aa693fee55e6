#include "minigrad/nn/serialize.h"

#include <map>
#include <set>
#include <tuple>

#include "minigrad/tensor/ops.h"

namespace mg::nn {

namespace {
// Two names hold the same tensor (a tied parameter) when they view the same numbers the same way.
using Identity = std::tuple<const void*, int64_t, Shape, Strides>;
Identity identity(const Tensor& t) { return {t.storage().get(), t.offset(), t.shape(), t.strides()}; }

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// A training checkpoint (optim::save_checkpoint) keeps the optimizer's state under "optimizer.":
// loading one as plain weights says so, instead of only listing those names.
std::string checkpoint_hint(const std::vector<std::string>& unexpected, const LoadOptions& options) {
  if (!options.strict) return "";
  for (const std::string& n : unexpected)
    if (n.rfind("optimizer.", 0) == 0)
      return "\n  hint: the names under \"optimizer.\" are a training checkpoint's optimizer state: resume with "
             "optim::load_checkpoint(path, model, optimizer), or load only the weights with "
             "LoadOptions{.ignore_prefixes = {\"optimizer.\"}}";
  return "";
}

// The checks and the copy behind every load. `state` holds the file's tensors (already cut to
// options.prefix); `aliases` maps a name the file left out to the name it was saved under.
LoadResult load_checked(Module& module, const StateDict& state, const std::map<std::string, std::string>& aliases,
                        const LoadOptions& options, const std::string& source) {
  const StateDict expected = state_dict(module);
  std::set<std::string> want;
  for (auto& [n, t] : expected) want.insert(n);
  std::map<std::string, Tensor> found;
  LoadResult result;
  for (auto& [n, t] : state) {
    if (want.count(n))
      found[n] = t;
    else
      result.unexpected_keys.push_back(n);
  }
  auto source_of = [&](const std::string& n) -> Tensor {
    if (auto it = found.find(n); it != found.end()) return it->second;
    if (auto a = aliases.find(n); a != aliases.end())
      for (auto& [fn, ft] : state)
        if (fn == a->second) return ft;
    return Tensor();
  };
  // Names of one tensor (tied) form a group: it is filled once, from any of its names.
  std::vector<std::vector<size_t>> groups;
  std::map<Identity, size_t> group_of;
  for (size_t i = 0; i < expected.size(); ++i) {
    auto [it, fresh] = group_of.emplace(identity(expected[i].second), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  std::vector<std::string> problems;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (model tensor, file tensor)
  for (const auto& g : groups) {
    const Tensor& t = expected[g.front()].second;
    Tensor from;
    std::string from_name;
    bool in_file = false;  // under any of its names, fitting or not
    for (size_t i : g) {
      const std::string& n = expected[i].first;
      const Tensor f = source_of(n);
      if (!f.defined()) continue;
      in_file = true;
      if (f.shape() != t.shape()) {
        problems.push_back(
            fmt::format("{}: shape {} in the file, {} in the model", n, shape_str(f.shape()), shape_str(t.shape())));
      } else if (f.dtype() != t.dtype() &&
                 !(is_floating_point(f.dtype()) && is_floating(t.dtype()))) {  // BF16 files load widened
        problems.push_back(
            fmt::format("{}: dtype {} in the file, {} in the model", n, dtype_name(f.dtype()), dtype_name(t.dtype())));
      } else if (!from.defined()) {
        from = f, from_name = n;
      } else if (f.to(DType::Float64).to_vector<double>() != from.to(DType::Float64).to_vector<double>()) {
        problems.push_back(
            fmt::format("{} and {}: one tied tensor in the model, but different values in the file", from_name, n));
      }
    }
    if (!from.defined()) {  // missing when the file has none of its names; else it is listed as mismatched above
      if (!in_file)
        for (size_t i : g) result.missing_keys.push_back(expected[i].first);
      continue;
    }
    if (has_internal_overlap(t))
      problems.push_back(fmt::format("{}: the model's tensor is an expanded view that cannot be written", from_name));
    copies.emplace_back(t, from);
  }
  const bool names_fit = !options.strict || (result.missing_keys.empty() && result.unexpected_keys.empty());
  MG_CHECK(
      names_fit && problems.empty(), FileError, "load: {} does not fit {} (the model was left unchanged){}{}{}{}",
      source, module.type_name(),
      options.strict && !result.missing_keys.empty() ? "\n  missing from the file: " + join(result.missing_keys) : "",
      options.strict && !result.unexpected_keys.empty() ? "\n  not in the model: " + join(result.unexpected_keys) : "",
      problems.empty() ? "" : "\n  mismatched: " + join(problems), checkpoint_hint(result.unexpected_keys, options));
  // Everything checked: now copy, in place, so the members, the registry and the optimizers
  // holding these tensors all see the new values.
  for (auto& [t, f] : copies) t.copy_(f.to(t.dtype()));
  return result;
}
}  // namespace

StateDict state_dict(const Module& module) {
  StateDict out;
  for (auto& [n, p] : module.named_parameters(true, false)) out.emplace_back(n, p.data());
  for (auto& [n, b] : module.named_buffers()) out.emplace_back(n, b);
  return out;
}

StateDict saved_state(const Module& module, std::map<std::string, std::string>& meta) {
  meta["format"] = "pt";
  meta["producer"] = "minigrad";
  StateDict unique;
  std::map<Identity, std::string> first;
  for (auto& [n, t] : state_dict(module)) {
    auto [it, fresh] = first.emplace(identity(t), n);
    if (fresh)
      unique.emplace_back(n, t);
    else
      meta[n] = it->second;  // a tied name: saved under the first one
  }
  return unique;
}

void save(const Module& module, const std::string& path) {
  std::map<std::string, std::string> meta;
  const StateDict tensors = saved_state(module, meta);
  save_safetensors(path, tensors, meta);
}

LoadResult load_from(Module& module, const SafeTensors& file, const std::string& name, const LoadOptions& options) {
  auto skipped = [&](const std::string& n) {
    if (n.rfind(options.prefix, 0) != 0) return true;
    for (auto& p : options.ignore_prefixes)
      if (n.rfind(p, 0) == 0) return true;
    return false;
  };
  StateDict state;
  for (auto& [n, t] : file.tensors)
    if (!skipped(n)) state.emplace_back(n.substr(options.prefix.size()), t);
  // Metadata "a": "b", where b is a tensor and a is not: a was saved as b (tied weights).
  std::map<std::string, std::string> aliases;
  for (auto& [k, v] : file.metadata)
    if (!file.find(v).defined() || file.find(k).defined() || skipped(k) || skipped(v))
      continue;
    else
      aliases[k.substr(options.prefix.size())] = v.substr(options.prefix.size());
  return load_checked(module, state, aliases, options, name);
}

LoadResult load(Module& module, const std::string& path, const LoadOptions& options) {
  return load_from(module, load_safetensors(path), path, options);
}

LoadResult load_state_dict(Module& module, const StateDict& state, const LoadOptions& options) {
  StateDict cut;
  for (auto& [n, t] : state) {
    MG_CHECK(t.defined(), StateError, "load_state_dict: \"{}\" is an undefined tensor", n);
    if (n.rfind(options.prefix, 0) != 0) continue;
    bool ignored = false;
    for (auto& p : options.ignore_prefixes) ignored = ignored || n.rfind(p, 0) == 0;
    if (!ignored) cut.emplace_back(n.substr(options.prefix.size()), t);
  }
  return load_checked(module, cut, {}, options, "the state dict");
}

}  // namespace mg::nn
