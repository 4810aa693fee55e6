// libFuzzer target: arbitrary bytes through the safetensors reader, nn::load_from and
// optim::load_checkpoint_from, the three doors a file comes into minigrad by.
//
// The invariants, checked on every input:
//   1. reading either succeeds or throws an mg::Error (anything else, a crash, a sanitizer report
//      or a hang, is a finding);
//   2. a load that fails leaves the model's parameters and the optimizer's state and learning
//      rates exactly as they were.
//
//   make fuzz FUZZ_SECONDS=3600     (clang, -fsanitize=fuzzer,address,undefined; the sanitizer
//                                     build of make test-asan; see Makefile)
// The seeds (fuzz/corpus) are files minigrad and PyTorch wrote; fuzz/safetensors.dict holds the
// header's words, so mutations speak the format.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "minigrad/minigrad.h"

namespace {
using namespace mg;

// The model of the seeds: tests/golden/safetensors_io.py's MLP (fc1 3 -> 4, fc2 4 -> 2).
struct Model : nn::Callable<Model> {
  nn::Linear fc1{3, 4}, fc2{4, 2};
  Model() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  std::string type_name() const override { return "Model"; }
};

// Everything a load may change, as bytes.
std::string snapshot(const Model& m, optim::AdamW& opt) {
  std::string s;
  auto add = [&](const Tensor& t) {
    const Tensor c = t.contiguous();
    if (c.numel() > 0) s.append(static_cast<const char*>(c.data_ptr()), c.numel() * itemsize(c.dtype()));
    s += '|';
  };
  for (const Variable& p : m.parameters()) {
    add(p.data());
    if (opt.has_state(p))
      for (auto& [name, t] : opt.state(p)) s += name, add(t);
  }
  for (const optim::Group& g : opt.groups()) s += std::to_string(g.lr) + "|";
  return s;
}

void check_unchanged(const std::string& before, const std::string& after, const char* what, const Error& e) {
  if (before == after) return;
  std::fprintf(stderr, "a failed %s changed the model or optimizer: %s\n", what, e.what());
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Model model;
  static optim::AdamW opt(model.parameters(), {.lr = 0.01});
  SafeTensors file;
  try {
    file = parse_safetensors(data, size, "the fuzz input");
  } catch (const Error&) {
    return 0;  // refused with a typed error: fine
  }
  std::string before = snapshot(model, opt);
  try {
    nn::load_from(model, file, "the fuzz input");
  } catch (const Error& e) {
    check_unchanged(before, snapshot(model, opt), "nn::load", e);
  }
  before = snapshot(model, opt);
  try {
    optim::load_checkpoint_from(file, "the fuzz input", model, opt);
  } catch (const Error& e) {
    check_unchanged(before, snapshot(model, opt), "optim::load_checkpoint", e);
  }
  return 0;
}
