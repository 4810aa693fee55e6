#pragma once
// Saving and loading tensors in the safetensors format, so weights move between minigrad,
// PyTorch and NumPy:
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header][raw little-endian tensor bytes]
//   header: {"fc1.weight": {"dtype": "F32", "shape": [64, 2], "data_offsets": [0, 512]}, ...,
//            "__metadata__": {"key": "value"}}
//
// Writes are atomic: a temporary file in the same folder, fsync, then rename over the target,
// so a crash mid-write leaves the old file intact. Reads validate the whole file (header size,
// JSON, dtypes, shapes, offsets) before returning anything; loading into a module also checks
// every name, shape and dtype before the first parameter is touched, so a failed load leaves the
// model as it was.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace mg {

/// The contents of a safetensors file.
struct SafeTensors {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order
  std::map<std::string, std::string> metadata;
  /// The tensor called `name`, or an undefined Tensor.
  Tensor find(const std::string& name) const;
};

/// Write tensors (any layout; stored contiguous) and string metadata to `path`, atomically.
/// Names must be unique and non-empty. A FileError if the file cannot be written.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Read and validate a safetensors file. A FileError names the problem: missing file, truncated
/// header, bad JSON, unknown dtype, offsets outside the data, sizes that do not match the shape.
SafeTensors load_safetensors(const std::string& path);

namespace nn {

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

}  // namespace nn
}  // namespace mg
