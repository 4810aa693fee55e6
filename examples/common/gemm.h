#pragma once
// The examples multiply on minigrad's fixed-order kernel (tensor/portable_gemm.h) unless told
// otherwise, so that what they print is what the docs quote, to the last digit, on any x86-64 CPU
// and with any number of threads. OpenBLAS, the library's default, picks a kernel for the CPU it
// runs on, and each kernel rounds the sums its own way: a training run turns that into different
// last digits on another machine. `--gemm blas` runs the products on OpenBLAS instead, faster
// (docs/06-performance.md, "The same numbers on every CPU", measures both).
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "minigrad/tensor/blas.h"

namespace example {

/// Adds --gemm portable|blas to `app` and chooses portable now; the flag, or MG_GEMM in the
/// environment when no flag is given, chooses otherwise.
inline void add_gemm_option(CLI::App& app) {
  const char* env = std::getenv("MG_GEMM");
  if (env == nullptr || *env == '\0') mg::blas::set_portable(true);
  app.add_option_function<std::string>(
         "--gemm", [](const std::string& v) { mg::blas::set_portable(v == "portable"); },
         "matrix products: portable (the default: the numbers the docs quote, on any CPU) or blas (OpenBLAS: "
         "faster, the last digits this CPU's own)")
      ->check(CLI::IsMember({"portable", "blas"}));
}

}  // namespace example
