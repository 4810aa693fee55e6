#pragma once
// The flags every example takes, declared once: --gemm (which products, common/gemm.h), --seed,
// --out and --threads. An example adds its own flags beside them.
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "gemm.h"
#include "minigrad/tensor/parallel.h"

namespace example {

/// Which of the common flags an example takes, and what its seed decides.
struct RunFlags {
  /// The help text of --seed: what the seed decides in this example.
  std::string seed_help = "random seed";
  /// Whether to add --threads (char_gpt has its own, per process).
  bool threads = true;
};

/// Adds --gemm portable|blas, --seed (into `seed`), --out (into `*out`; none when null, for an
/// example that writes no files) and --threads to `app`. --threads sets the threads of minigrad's
/// loops and products (default: every core).
inline void add_run_options(CLI::App& app, uint64_t& seed, std::string* out, const RunFlags& flags = {}) {
  add_gemm_option(app);
  app.add_option("--seed", seed, flags.seed_help);
  if (out != nullptr) app.add_option("--out", *out, "output folder");
  if (flags.threads)
    app.add_option_function<int>(
           "--threads", [](int n) { mg::set_num_threads(n); },
           "threads for minigrad's loops and products (default: every core)")
        ->check(CLI::Range(1, 1024));
}

}  // namespace example
