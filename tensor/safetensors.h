#pragma once
// Reading and writing tensors in the safetensors format, so weights move between minigrad,
// PyTorch and NumPy (with the safetensors package):
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header][raw little-endian tensor bytes]
//   header: {"fc1.weight": {"dtype": "F32", "shape": [64, 2], "data_offsets": [0, 512]}, ...,
//            "__metadata__": {"key": "value"}}
//
// Writes are atomic (tensor/atomic_file.h: a temporary in the same folder, fsync, rename over the target),
// so a crash mid-write leaves the old file intact. Reads validate the whole file (header size,
// JSON, dtypes, shapes, offsets) before returning anything. Saving and loading whole modules is
// nn/serialize.h, on top of this.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "minigrad/tensor/tensor.h"

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

/// Parse and validate the bytes of a safetensors file held in memory; `name` names it in errors.
/// The checks and errors of load_safetensors.
SafeTensors parse_safetensors(const void* bytes, size_t size, const std::string& name = "(bytes in memory)");

/// Read and validate a safetensors file. A FileError names the problem: missing file, truncated
/// header, bad JSON, unknown dtype, offsets outside the data, sizes that do not match the shape.
SafeTensors load_safetensors(const std::string& path);

}  // namespace mg
