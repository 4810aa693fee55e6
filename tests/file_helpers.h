#pragma once
// Shared by the file tests (test_serialize.cpp: safetensors and nn::save/load; test_checkpoint.cpp:
// optimizer checkpoints): a small model, per-test temporary paths, and raw file bytes.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "helpers.h"

namespace mgtest {
namespace fs = std::filesystem;
using namespace mg;

// The architecture of tests/golden/safetensors_io.py's MLP.
struct TinyMLP : nn::Callable<TinyMLP> {
  nn::Linear fc1{3, 4}, fc2{4, 2};
  TinyMLP() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Variable forward(const Variable& x) const { return fc2(tanh(fc1(x))); }
  std::string type_name() const override { return "TinyMLP"; }
};

// A path in a folder of this test's own: ctest runs the tests of this file in parallel processes,
// and one test's temporary files must not show up in another's folder (WritesAreAtomic looks for
// leftovers, and two tests wrote "bad.safetensors" side by side). The process id is in it too: ctest
// also runs a whole test binary again (Portable.*, AtLevel.*) beside its tests run one by one.
inline std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::temp_directory_path() / "minigrad_test_files" / std::to_string(::getpid()) /
                       info->test_suite_name() / info->name();
  fs::create_directories(dir);
  return (dir / name).string();
}

inline std::vector<std::vector<float>> snapshot(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (auto& p : m.parameters()) out.push_back(p.data().to_vector<float>());
  return out;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file with an 8-byte length and a hand-written header, for the malformed cases.
inline std::string with_header(const std::string& json, const std::string& data) {
  std::string h = json;
  uint64_t n = h.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + h + data;
}

}  // namespace mgtest
