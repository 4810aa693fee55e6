#pragma once
// Threading: one oneTBB pool runs everything. OpenBLAS is kept single-threaded and called from
// inside that pool on blocks of rows or on batch entries (tensor/ops/matmul.cpp), so there is
// never a second pool competing for the cores.
//
// Each chunk runs at the CPU level picked at start-up (tensor/cpu.h): parallel_for is where
// the kernels' loops get their AVX2 or AVX-512 copy.
//
// Every kernel computes each output element from a fixed sequence of inputs, whichever thread
// does it, so results do not depend on how TBB splits the work: same inputs, same bits.
#include <algorithm>
#include <cstdint>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "minigrad/tensor/cpu.h"

namespace mg {

/// Use at most `n` threads for all of minigrad's work, matmul included (n >= 1).
void set_num_threads(int n);
/// The thread count in effect (the hardware's by default).
int get_num_threads();

/// Below this many elements of work a loop runs on the calling thread: starting threads costs
/// more than it saves.
inline constexpr int64_t kGrain = 32768;

/// The grain for a loop whose every index does `work` elements of work: about kGrain elements per
/// chunk, and never less than one index (work may be 0, for a zero-size dim).
constexpr int64_t grain_for(int64_t work) { return work > 0 && work < kGrain ? kGrain / work : 1; }

/// The chunk width for a loop over the `cols` columns of a (rows, cols) row-major matrix in which
/// each chunk walks down all the rows of its columns (a column sum, a bias gradient): a thread's
/// share of the columns, as wide as it can be, since each row's piece is a separate run of memory
/// and short runs starve the hardware prefetcher (chunks of 256 columns took 1.3-1.5x the time on
/// the large GPT's hidden layer); all columns in one chunk when the work is small.
inline int64_t column_chunk(int64_t rows, int64_t cols) {
  if (rows * cols < kGrain) return std::max<int64_t>(cols, 1);
  return std::max<int64_t>(16, (cols + get_num_threads() - 1) / get_num_threads());
}
/// Run f(begin, end) over [begin, end) in chunks of at least `grain` indices, in parallel when
/// there is more than one chunk, each chunk compiled for and run at cpu_level().
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& f) {
  if (end <= begin) return;
  if (grain < 1) grain = 1;
  const CpuLevel level = cpu_level();
  if (end - begin <= grain || get_num_threads() == 1) {
    detail::run_at_level(level, [&] { f(begin, end); });
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(begin, end, grain), [&](const tbb::blocked_range<int64_t>& r) {
    detail::run_at_level(level, [&] { f(r.begin(), r.end()); });
  });
}

}  // namespace mg
