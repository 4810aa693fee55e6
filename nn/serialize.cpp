#include "minigrad/nn/serialize.h"

#include <map>
#include <set>
#include <tuple>

#include "minigrad/nn/attention.h"
#include "minigrad/tensor/ops.h"

namespace mg::nn {

namespace {
// Two names hold the same tensor (a tied parameter) when they view the same numbers the same way.
using TensorIdentity = std::tuple<const void*, int64_t, Shape, Strides>;
TensorIdentity identity(const Tensor& t) { return {t.storage().get(), t.offset(), t.shape(), t.strides()}; }

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
  std::map<TensorIdentity, size_t> group_of;
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

namespace {
// Every MultiheadAttention in `module`, with the prefix its names have ("blocks.0.attn.", or "").
std::vector<std::pair<std::string, const MultiheadAttention*>> attention_modules(const Module& module) {
  std::vector<std::pair<std::string, const MultiheadAttention*>> out;
  for (auto& [path, m] : const_cast<Module&>(module).named_modules())
    if (const auto* a = dynamic_cast<const MultiheadAttention*>(m)) out.emplace_back(path.empty() ? "" : path + ".", a);
  return out;
}

// minigrad's w_q, w_k, w_v, w_o entries of each attention module -> PyTorch's in_proj_weight,
// in_proj_bias (the three stacked, rows q then k then v), out_proj.weight, out_proj.bias; at the
// place of the first, in PyTorch's order.
StateDict to_torch_layout(const Module& module, const StateDict& sd) {
  StateDict out = sd;
  for (auto& [prefix, a] : attention_modules(module)) {
    MG_CHECK(a->num_kv_heads == a->num_heads, ValueError,
             "save: {}MultiheadAttention has {} key/value heads for {} query heads; PyTorch's nn.MultiheadAttention "
             "has no layout for grouped heads (save it in minigrad's layout)",
             prefix, a->num_kv_heads, a->num_heads);
    std::map<std::string, Tensor> found;
    size_t at = out.size();
    StateDict kept;
    for (auto& [n, t] : out) {
      const bool mine = n.rfind(prefix, 0) == 0 && (n.substr(prefix.size()).rfind("w_", 0) == 0) &&
                        n.substr(prefix.size()).find('.') == 3;
      if (mine) {
        found[n.substr(prefix.size())] = t;
        at = std::min(at, kept.size());
      } else {
        kept.emplace_back(n, t);
      }
    }
    StateDict torch{{prefix + "in_proj_weight",
                     concat({found.at("w_q.weight"), found.at("w_k.weight"), found.at("w_v.weight")}, 0)}};
    if (found.count("w_q.bias"))
      torch.emplace_back(prefix + "in_proj_bias",
                         concat({found.at("w_q.bias"), found.at("w_k.bias"), found.at("w_v.bias")}, 0));
    torch.emplace_back(prefix + "out_proj.weight", found.at("w_o.weight"));
    if (found.count("w_o.bias")) torch.emplace_back(prefix + "out_proj.bias", found.at("w_o.bias"));
    kept.insert(kept.begin() + static_cast<std::ptrdiff_t>(at), torch.begin(), torch.end());
    out = std::move(kept);
  }
  return out;
}

// The inverse, for a file in PyTorch's layout: in_proj_weight (3E, E) and in_proj_bias (3E) cut
// into thirds, out_proj renamed. Entries that are not there are left to the load's own checks.
StateDict from_torch_layout(const Module& module, const StateDict& sd, const std::string& source) {
  std::map<std::string, Tensor> by_name(sd.begin(), sd.end());
  StateDict out;
  std::set<std::string> replaced;
  for (auto& [prefix, a] : attention_modules(module)) {
    for (const char* packed : {"in_proj_weight", "in_proj_bias"}) {
      auto it = by_name.find(prefix + packed);
      if (it == by_name.end()) continue;
      const Tensor& t = it->second;
      MG_CHECK(t.dim() >= 1 && t.size(0) % 3 == 0, FileError,
               "load: {} has {}{} of shape {}; PyTorch's layout stacks three equal parts (q, k, v) along dim 0", source,
               prefix, packed, shape_str(t.shape()));
      const int64_t third = t.size(0) / 3;
      const std::string suffix = std::string(packed) == "in_proj_weight" ? ".weight" : ".bias";
      const char* names[] = {"w_q", "w_k", "w_v"};
      for (int64_t i = 0; i < 3; ++i) out.emplace_back(prefix + names[i] + suffix, t.narrow(0, i * third, third));
      replaced.insert(prefix + packed);
    }
    for (const char* part : {"weight", "bias"}) {
      auto it = by_name.find(prefix + "out_proj." + part);
      if (it == by_name.end()) continue;
      out.emplace_back(prefix + "w_o." + part, it->second);
      replaced.insert(it->first);
    }
  }
  for (auto& [n, t] : sd)
    if (!replaced.count(n)) out.emplace_back(n, t);
  return out;
}
}  // namespace

StateDict state_dict(const Module& module, const SaveOptions& options) {
  StateDict out;
  for (auto& [n, p] : module.named_parameters(true, false)) out.emplace_back(n, p.data());
  for (auto& [n, b] : module.named_buffers()) out.emplace_back(n, b);
  return options.torch_layout ? to_torch_layout(module, out) : out;
}

StateDict saved_state(const Module& module, std::map<std::string, std::string>& meta, const SaveOptions& options) {
  meta["format"] = "pt";
  meta["producer"] = "minigrad";
  StateDict unique;
  std::map<TensorIdentity, std::string> first;
  for (auto& [n, t] : state_dict(module, options)) {
    auto [it, fresh] = first.emplace(identity(t), n);
    if (fresh)
      unique.emplace_back(n, t);
    else
      meta[n] = it->second;  // a tied name: saved under the first one
  }
  return unique;
}

void save(const Module& module, const std::string& path, const SaveOptions& options) {
  std::map<std::string, std::string> meta;
  const StateDict tensors = saved_state(module, meta, options);
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
  if (options.torch_layout) state = from_torch_layout(module, state, name);
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
  if (options.torch_layout) cut = from_torch_layout(module, cut, "the state dict");
  return load_checked(module, cut, {}, options, "the state dict");
}

}  // namespace mg::nn
