#pragma once
// Shared by the pretrained-model tests (test_pretrained_models.cpp, test_pretrained_io.cpp): the
// golden numbers of transformers (tests/golden/pretrained_golden.safetensors), a float64 max |a - b|,
// copies of the committed fixtures with their tensors or config.json edited, and an error's text.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "file_helpers.h"

namespace mgtest::pretrained {
using mg::nn::StateDict;

inline const std::string kGolden = MG_GOLDEN_DIR;

inline const SafeTensors& golden() {
  static const SafeTensors g = load_safetensors(kGolden + "/pretrained_golden.safetensors");
  return g;
}
inline Tensor gold(const std::string& name) {
  const Tensor t = golden().find(name);
  if (!t.defined()) throw std::runtime_error("no golden tensor " + name);
  return t;
}

inline double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return INFINITY;
  return max(abs(a.to(DType::Float64) - b.to(DType::Float64))).item();
}

// Copy a fixture folder, rewriting its tensors (edit) or its config (a JSON edit).
inline std::string edited_copy(const std::string& fixture, const std::function<void(StateDict&)>& edit_tensors,
                               const std::function<void(nlohmann::json&)>& edit_config = nullptr) {
  const std::string dir = temp_path(fixture);
  fs::create_directories(dir);
  SafeTensors f = load_safetensors(kGolden + "/" + fixture + "/model.safetensors");
  edit_tensors(f.tensors);
  save_safetensors(dir + "/model.safetensors", f.tensors, f.metadata);
  nlohmann::json config;
  std::ifstream(kGolden + "/" + fixture + "/config.json") >> config;
  if (edit_config) edit_config(config);
  std::ofstream(dir + "/config.json") << config.dump();
  return dir;
}

// The text of the mg::Error fn throws ("(no error)" if none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace mgtest::pretrained
