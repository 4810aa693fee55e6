// bench/cluster/allreduce: how long an all-reduce takes across the processes of a run, for docs/07's
// cost model (bench/cluster_cost.sh runs it on network hosts with shaped links).
//
//   mpirun -np N bench_allreduce [--elements E] [--reps R]
//
// Times distributed::all_reduce_sum of E float32 elements (default: the large benchmark GPT's
// gradient, 10,795,841 parameters = 43.2 MB) R times, and 300 all-reduces of one float32 back to
// back (the latency term: what a message costs whatever its size; back to back, because after a
// barrier the ranks start up to one latency apart). Rank 0 prints one line:
//   processes=N bytes=S allreduce_ms=<median> small_allreduce_us=<median>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "minigrad/distributed/process_group.h"
#include "minigrad/minigrad.h"

using namespace mg;
namespace dist = mg::distributed;

namespace {
// The median of fn's times over reps runs (seconds), after one untimed run.
template <class F>
double median_seconds(int reps, F&& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    dist::barrier();  // every rank starts together: the time is the collective's, not a straggler's
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  int64_t elements = 10795841;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--elements")
      elements = std::stoll(argv[i + 1]);
    else if (k == "--reps")
      reps = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_allreduce: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  dist::init(&argc, &argv);
  const Tensor big = ones({elements}), small = ones({1});
  const double big_s = median_seconds(reps, [&] { dist::all_reduce_sum(big); });
  dist::all_reduce_sum(small);
  dist::barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 300; ++i) dist::all_reduce_sum(small);
  const double small_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 300;
  if (dist::is_main_process())
    std::printf("processes=%d bytes=%lld allreduce_ms=%.2f small_allreduce_us=%.1f\n", dist::world_size(),
                static_cast<long long>(elements * 4), big_s * 1e3, small_s * 1e6);
  return 0;
}
