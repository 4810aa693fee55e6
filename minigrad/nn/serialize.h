#pragma once
// Saving and loading a module's parameters and buffers in the safetensors format
// (tensor/safetensors.h), under their dotted names, so a file opens in PyTorch with
// safetensors.torch.load_file and model.load_state_dict. Loading checks every name, shape and
// dtype before the first parameter is touched, so a failed load leaves the model as it was.
#include <string>
#include <vector>

#include "minigrad/nn/module.h"
#include "minigrad/tensor/safetensors.h"

namespace mg::nn {

/// Save a module's parameters and buffers under their dotted names (opens in PyTorch with
/// safetensors.torch.load_file, then model.load_state_dict).
void save(const Module& module, const std::string& path);

/// Load parameters and buffers saved by save() (or by PyTorch) into `module`. Every name must
/// match (missing and unexpected names are listed in the error), shapes must be equal, and
/// floating dtypes are converted. Nothing is changed unless everything checks out.
void load(Module& module, const std::string& path);

/// The checks of load() on an already-read file, then the copy. Names starting with one of
/// `ignore_prefixes` are skipped (a training checkpoint keeps optimizer state beside the weights).
void load_from(Module& module, const SafeTensors& file, const std::string& path,
               const std::vector<std::string>& ignore_prefixes = {});

}  // namespace mg::nn
