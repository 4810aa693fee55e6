#pragma once
// Saving and loading a module's parameters and buffers in the safetensors format
// (tensor/safetensors.h), under their dotted names, so a file opens in PyTorch with
// safetensors.torch.load_file and model.load_state_dict. Loading checks every name, shape and
// dtype before the first parameter is touched, so a failed load leaves the model as it was.
//
// Tied weights (one parameter under two names, e.g. GPT's head.weight = tok.weight): safetensors
// cannot hold two names for one buffer, so save() writes the tensor once, under its first name,
// and records the other name in the metadata ("head.weight": "tok.weight"), as PyTorch's
// safetensors.torch.save_model does. load() reads either name through that record: into a tied
// model (one copy), or into an untied one (the same values into both).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "minigrad/nn/module.h"
#include "minigrad/tensor/safetensors.h"

namespace mg::nn {

/// Named tensors, in a module's order (PyTorch's state_dict).
using StateDict = std::vector<std::pair<std::string, Tensor>>;

/// How save() and state_dict() name things.
struct SaveOptions {
  /// Every MultiheadAttention in PyTorch's layout: W_Q, W_K, W_V stacked into in_proj_weight
  /// (3E, E) and their biases into in_proj_bias (3E), W_O as out_proj. Such a file loads into
  /// PyTorch's nn.MultiheadAttention and nn.Transformer*Layer without a renaming. A module with
  /// grouped key/value heads (num_kv_heads < num_heads) has no such layout: a ValueError.
  bool torch_layout = false;
};

/// Every parameter and buffer under its dotted name, like PyTorch's model.state_dict(): the
/// tensors themselves (no copies, except the stacked in_proj of options.torch_layout), and a
/// tied parameter under each of its names.
StateDict state_dict(const Module& module, const SaveOptions& options = {});

/// How load() matches names.
struct LoadOptions {
  /// Every name of the model must be in the file and every name of the file in the model. When
  /// false, missing and unexpected names are returned instead (shapes must still fit).
  bool strict = true;
  /// Take only the file's names that start with this prefix, with it removed: "encoder." loads
  /// a whole model's file into its encoder alone.
  std::string prefix;
  /// Skip the file's names that start with any of these (a training checkpoint keeps the
  /// optimizer's state beside the weights).
  std::vector<std::string> ignore_prefixes;
  /// The file holds every MultiheadAttention (also inside the Transformer layers) in PyTorch's own
  /// layout (in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias), as
  /// torch.nn.MultiheadAttention's state_dict does: they are split into w_q, w_k, w_v and w_o.
  bool torch_layout = false;
};

/// What a load did not match (empty after a strict load, which throws instead).
struct LoadResult {
  std::vector<std::string> missing_keys;     // in the model, not in the file: left as they were
  std::vector<std::string> unexpected_keys;  // in the file, not in the model: ignored
};

/// The tensors save() writes and its metadata: each tensor once, under its first name, and for
/// every other name of a tied tensor a metadata entry naming the first ("head.weight": "tok.weight").
StateDict saved_state(const Module& module, std::map<std::string, std::string>& metadata,
                      const SaveOptions& options = {});

/// Save a module's parameters and buffers under their dotted names (opens in PyTorch with
/// safetensors.torch.load_file, then model.load_state_dict). A tied parameter is written once.
void save(const Module& module, const std::string& path, const SaveOptions& options = {});

/// Load parameters and buffers saved by save() (or by PyTorch) into `module`. Shapes must be
/// equal and floating dtypes are converted; with options.strict (the default) every name must
/// match, and missing and unexpected names are listed in the FileError. Nothing is changed
/// unless everything checks out.
LoadResult load(Module& module, const std::string& path, const LoadOptions& options = {});

/// load() from a file already read: load_safetensors(path), or parse_safetensors(bytes, size)
/// for a file held in memory. `name` names it in errors.
LoadResult load_from(Module& module, const SafeTensors& file, const std::string& name, const LoadOptions& options = {});

/// load() from named tensors (a state_dict() of another model, or tensors made in code), with
/// the same checks. Like PyTorch's model.load_state_dict(state, strict).
LoadResult load_state_dict(Module& module, const StateDict& state, const LoadOptions& options = {});

}  // namespace mg::nn
