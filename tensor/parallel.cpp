#include "tensor/parallel.h"

#include <memory>
#include <thread>

#include <cblas.h>
#include <tbb/global_control.h>

#include "tensor/error.h"

namespace mg {
namespace {
std::unique_ptr<tbb::global_control>& control() {
  static std::unique_ptr<tbb::global_control> c;
  return c;
}
int& thread_count() {
  static int n = static_cast<int>(tbb::global_control::active_value(
      tbb::global_control::max_allowed_parallelism));
  return n;
}
}  // namespace

void set_num_threads(int n) {
  MG_CHECK(n >= 1, ValueError, "set_num_threads: expected n >= 1, got {}", n);
  control() = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                    static_cast<size_t>(n));
  openblas_set_num_threads(n);
  thread_count() = n;
}

int get_num_threads() { return thread_count(); }

}  // namespace mg
