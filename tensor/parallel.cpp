#include "minigrad/tensor/parallel.h"

#include <memory>
#include <thread>

#include <tbb/global_control.h>

#include "minigrad/tensor/blas.h"
#include "minigrad/tensor/error.h"

namespace mg {
namespace {
std::unique_ptr<tbb::global_control>& control() {
  static std::unique_ptr<tbb::global_control> c;
  return c;
}
int& thread_count() {
  // OpenBLAS runs single-threaded: minigrad hands it blocks of work from the one TBB pool
  // (tensor/ops/matmul.cpp), so its own threads would only spin against ours.
  static int n = (blas::use_one_thread(),
                  static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism)));
  return n;
}
// Settle the thread configuration at start-up, before the first kernel runs.
const int kInit = thread_count();
}  // namespace

void set_num_threads(int n) {
  MG_CHECK(n >= 1, ValueError, "set_num_threads: expected n >= 1, got {}", n);
  control() =
      std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(n));
  thread_count() = n;
}

int get_num_threads() { return thread_count(); }

}  // namespace mg
