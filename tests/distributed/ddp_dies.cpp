// A run in which rank 1 dies (exits without finishing MPI) while rank 0 waits in an all-reduce:
// the run must end with an error, not hang. ctest runs it under mpirun -np 2 and expects a
// non-zero exit within its timeout; MG_DIST_TIMEOUT bounds rank 0's wait even if mpirun did not
// notice the death. With the argument "stuck", rank 1 stays alive but never joins (a hung
// process): then rank 0's wait must end with a DistributedError after MG_DIST_TIMEOUT seconds.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "minigrad/distributed/process_group.h"
#include "minigrad/minigrad.h"

int main(int argc, char** argv) {
  namespace dist = mg::distributed;
  dist::init(&argc, &argv);
  const bool stuck = argc > 1 && std::strcmp(argv[1], "stuck") == 0;
  if (dist::rank() == 1) {
    if (stuck) std::this_thread::sleep_for(std::chrono::seconds(600));  // alive, never arriving
    std::_Exit(3);                                                      // gone, without MPI_Finalize
  }
  mg::Tensor t = mg::ones({4});
  try {
    dist::all_reduce_sum(t);
  } catch (const dist::DistributedError& e) {
    std::fprintf(stderr, "rank %d: %s\n", dist::rank(), e.what());
    return 2;
  }
  std::puts("finished (rank 1's death went unnoticed)");
  return 0;
}
