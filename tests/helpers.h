#pragma once
// Shared test helpers: close-enough comparisons, gradient checks, and PyTorch golden cases
// (tests/golden/ops.txt, written by tests/golden/gen_golden.py).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "minigrad/minigrad.h"

namespace mgtest {

using mg::Tensor;
using mg::Variable;
using Fn = std::function<Variable(const std::vector<Variable>&)>;

/// Same shape, and every element within atol + rtol * |expected|.
void expect_close(const Tensor& actual, const Tensor& expected, double atol = 1e-6, double rtol = 1e-6);
/// Same shape as given, and the values (row-major) within atol.
void expect_values(const Tensor& actual, const mg::Shape& shape, const std::vector<double>& values, double atol = 1e-6);
/// gradcheck passes (float64 central differences vs backward).
void expect_gradcheck(const Fn& fn, const std::vector<Tensor>& inputs, mg::GradcheckOptions opt = {});
/// A random float64 tensor (deterministic per seed).
Tensor rnd(const mg::Shape& shape, uint64_t seed, double lo = -1, double hi = 1);
/// The largest |a - b| over the elements, computed in float64 (any floating dtype, bfloat16 included).
double max_abs_diff(const Tensor& a, const Tensor& b);

/// What the kernel lists in /proc/cpuinfo for the first CPU: a second opinion on what the CPU has,
/// independent of the library's own detection (tensor/cpu.h) and of oneDNN's. Empty where there is
/// no /proc/cpuinfo.
struct ProcCpuInfo {
  std::vector<std::string> flags;  // the "flags" line, word by word
  std::string vendor;              // "GenuineIntel", "AuthenticAMD", ...
  /// Whether the flags name `flag` (a whole word: "avx512f" is not "avx512").
  bool has(const std::string& flag) const;
  /// Whether /proc/cpuinfo was there to read.
  bool read() const { return !flags.empty(); }
};
/// /proc/cpuinfo's flags and vendor (read once per call).
ProcCpuInfo proc_cpu_info();

/// One case of the golden file: name -> tensor.
using GoldenCase = std::map<std::string, Tensor>;
/// The case `name` from tests/golden/ops.txt (a test failure if missing).
const GoldenCase& golden(const std::string& name);
/// Run fn on the case's inputs and compare the output and every input gradient with PyTorch's:
/// in float64 (to 1e-9) and again with float32 inputs (to float32 tolerance).
void expect_golden(const std::string& name, const Fn& fn);
/// Copy the case's "param:<name>" tensors into m's parameters (and check none is left over).
void load_golden_params(mg::nn::Module& m, const GoldenCase& c);
/// Compare each parameter's gradient with the case's "grad:<name>".
void expect_param_grads(const mg::nn::Module& m, const GoldenCase& c, double tol);
/// A module's golden case (tests/golden/nn.txt): set m's parameters from it in float64, run fn on
/// its inputs, and compare the output (and the attention weights fn returns second, if the case
/// has them), every input gradient and every parameter gradient, to 1e-9.
void check_module(mg::nn::Module& m, const std::string& name,
                  const std::function<std::pair<Variable, Variable>(const std::vector<Variable>&)>& fn);

}  // namespace mgtest
