#pragma once
// The processes of a data-parallel run, on MPI (Open MPI here: libopenmpi-dev, openmpi-bin).
//
//   mpirun -np 4 build/examples/char_gpt/char_gpt ...            four processes on this machine
//   mpirun -np 8 --hostfile hosts build/examples/char_gpt/...     eight over the machines listed
//
// mpirun starts N copies of the program; each calls distributed::init() and learns its rank
// (0 ... N-1) and the world size N from the environment mpirun set. A program started without
// mpirun is a world of one: rank 0 of 1, and every collective returns at once.
//
// Collectives here move float32 or float64 tensors between all processes: broadcast from rank 0
// (the starting weights) and the all-reduce (sum) of gradients, which can be started and waited
// for later, so that it runs while the backward goes on (distributed/ddp.h).
//
// A collective that does not finish within the timeout (MG_DIST_TIMEOUT seconds, default 300:
// another rank died or never arrived) is a DistributedError, not a hang. mpirun itself ends the
// run when a process exits without finishing MPI (a crash, an exception out of main).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "minigrad/tensor/error.h"
#include "minigrad/tensor/tensor.h"

namespace mg::distributed {

/// A collective that failed or timed out (the other ranks may be gone).
struct DistributedError : Error {
  using Error::Error;
};

/// Start MPI for this process (once; later calls do nothing). argc/argv may be null. Registers
/// finalize() to run at exit. Under Open MPI it makes the ring the non-blocking all-reduce's
/// algorithm (OMPI_MCA_coll_libnbc_iallreduce_algorithm=1) unless the environment chose one:
/// Open MPI's own choice for fewer than 4 processes is a tree, 2-3 times slower on large buffers
/// (docs/07, "The model, measured").
void init(int* argc = nullptr, char*** argv = nullptr);
/// Whether init() has run (and finalize() has not).
bool is_initialized();
/// This process's rank, 0 ... world_size() - 1 (0 before init()).
int rank();
/// Number of processes (1 before init(), or without mpirun).
int world_size();
/// Rank 0: the process that writes checkpoints and prints.
bool is_main_process();
/// Finish MPI (after the last collective). Called at exit if init() ran.
void finalize();
/// End every process of the run now with exit code `code` (MPI_Abort): what a process that failed
/// on its own (a full disk, a bad file) calls, so that the others do not wait for it until the timeout.
[[noreturn]] void abort(int code);
/// Wait until every process arrives here (bounded by the timeout).
void barrier();
/// Seconds a collective may take before it is a DistributedError (MG_DIST_TIMEOUT, default 300).
double timeout_seconds();

/// Copy rank `root`'s values of `t` (contiguous, float32/float64/int64) into every process's `t`.
void broadcast(const Tensor& t, int root = 0);
/// Sum `t` (contiguous float32/float64/int64) over all processes, in place, now.
void all_reduce_sum(const Tensor& t);
/// Every process's `values`, rank by rank (all must pass the same count).
std::vector<int64_t> all_gather(const std::vector<int64_t>& values);
/// Sum `in` (contiguous float32/float64, the same length everywhere: the sum of `counts`) over
/// all processes and give each rank its part: rank r's `out` (counts[r] elements, in's dtype)
/// receives elements counts[0] + ... + counts[r-1] onwards of the sum. MPI_Reduce_scatter: half
/// an all-reduce's traffic.
void reduce_scatter_sum(const Tensor& in, const Tensor& out, const std::vector<int64_t>& counts);
/// The reverse: rank r's `mine` (counts[r] elements) lands at offset counts[0] + ... + counts[r-1]
/// of every process's `all` (the sum of `counts` elements, contiguous, the same dtype).
/// MPI_Allgatherv: the other half.
void all_gather_into(const Tensor& mine, const Tensor& all, const std::vector<int64_t>& counts);

/// An all-reduce under way: started by all_reduce_sum_async, finished by wait().
class Work {
 public:
  Work() = default;
  /// Whether it has finished (also lets MPI move it on: call it now and then while waiting).
  bool test();
  /// Block until it has finished (a DistributedError after timeout_seconds()).
  void wait();
  /// Whether there is an operation (default-constructed Work has none).
  bool valid() const { return impl_ != nullptr; }

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  friend Work all_reduce_sum_async(const Tensor& t, const std::string& what);
};
/// Start summing `t` (contiguous float32/float64) over all processes, in place. The Work keeps `t`'s
/// storage alive until the sum is done; nothing may touch it before wait(). `what` names it in a
/// timeout error ("bucket 3").
Work all_reduce_sum_async(const Tensor& t, const std::string& what);

}  // namespace mg::distributed
