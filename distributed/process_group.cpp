// MPI underneath distributed/process_group.h. Every call is checked: MPI_COMM_WORLD is set to
// return errors instead of aborting, and a failing call becomes a DistributedError naming it.
// Waiting is a loop of MPI_Test with a deadline, so a rank that never arrives is an error after
// timeout_seconds() rather than a process blocked forever in MPI_Wait.
#include "minigrad/distributed/process_group.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include <mpi.h>

namespace mg::distributed {
namespace {

bool we_started = false;  // init() called MPI_Init (so finalize() may call MPI_Finalize)
bool broken = false;      // a collective failed or timed out: finalize() aborts the run instead

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  broken = true;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw DistributedError(fmt::format("distributed: {} failed on rank {}: {}", call, rank(), std::string(text, len)));
}

MPI_Datatype mpi_type(const Tensor& t, const char* op) {
  MG_CHECK(t.defined(), StateError, "distributed::{}: the tensor is undefined", op);
  MG_CHECK(t.is_contiguous(), ValueError, "distributed::{}: the tensor must be contiguous, got strides {}", op,
           shape_str(t.strides()));
  switch (t.dtype()) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::Int64:
      return MPI_INT64_T;
    default:
      throw DTypeError(
          fmt::format("distributed::{}: float32, float64 or int64 tensors only, got {}", op, dtype_name(t.dtype())));
  }
}

int count_of(const Tensor& t, const char* op) {
  MG_CHECK(t.numel() <= INT32_MAX, ValueError, "distributed::{}: {} elements are more than MPI's int count holds", op,
           t.numel());
  return static_cast<int>(t.numel());
}

// After a collective of the run failed or timed out, none can be trusted to finish: a new one is
// refused before it is started, and a wait for one already under way fails at once instead of
// waiting out another timeout (DistributedDataParallel's destructor waits for its buckets).
void check_not_broken(const std::string& what) {
  if (broken)
    throw DistributedError(fmt::format(
        "distributed: {} cannot finish on rank {} of {}: an earlier collective of this run failed or timed out", what,
        rank(), world_size()));
}

// What an operation that was given up on still points at: MPI may write into its buffers until the
// run ends (there is no cancelling a collective), so they are kept alive until then.
using KeepAlive = std::vector<std::shared_ptr<const void>>;
void abandon(KeepAlive keep) {
  static std::mutex mutex;
  static auto* abandoned = new KeepAlive;  // never freed: MPI may still be writing at exit
  std::lock_guard lock(mutex);
  abandoned->insert(abandoned->end(), keep.begin(), keep.end());
}

// Test `req` until it completes or the deadline passes; on giving up, `keep` (the buffers the
// operation uses) stays alive for good.
void wait_bounded(MPI_Request& req, const std::string& what, KeepAlive keep = {}) {
  if (broken) abandon(std::move(keep));
  check_not_broken(what);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds());
  for (int spins = 0;; ++spins) {
    int done = 0;
    const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) abandon(keep);
    check(rc, "MPI_Test");
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) {
      broken = true;
      abandon(std::move(keep));
      throw DistributedError(
          fmt::format("distributed: {} did not finish within {} s on rank {} of {}; another process may "
                      "have died or be stuck (MG_DIST_TIMEOUT sets the limit)",
                      what, timeout_seconds(), rank(), world_size()));
    }
    // Spin briefly (a sum in flight often lands within microseconds), then give the core away: with
    // more processes than cores, a spinning rank would take time from one still computing.
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

struct Work::Impl {
  Tensor buffer;  // what MPI writes into: alive until the request is done
  MPI_Request req = MPI_REQUEST_NULL;
  std::string what;
  bool done = false;
};

void init(int* argc, char*** argv) {
  int started = 0;
  MPI_Initialized(&started);
  if (started) return;
  // Open MPI's non-blocking all-reduce (DDP's buckets) is a binomial tree for fewer than 4
  // processes and for sums in place unless told otherwise: each round sends the whole buffer one
  // way, 2 ceil(log2 N) x S / B in all. The ring sends 2 (N - 1) / N x S / B, as docs/07's cost
  // model assumes: measured 2 to 3 times faster on the large GPT's gradient over TCP and 2 times on
  // one machine, and a few microseconds slower for one number. A choice already made in the
  // environment (or by mpirun -x) stands.
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
  int provided = 0;
  // Only the thread that called init makes MPI calls (the backward's hooks run on it).
  check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided < MPI_THREAD_FUNNELED) {
    broken = true;
    throw DistributedError(
        fmt::format("distributed::init: this MPI gives thread level {}, minigrad needs "
                    "MPI_THREAD_FUNNELED ({}): oneTBB's threads run beside the MPI calls",
                    provided, MPI_THREAD_FUNNELED));
  }
  we_started = true;
  std::atexit(finalize);
}

bool is_initialized() {
  int started = 0, finished = 0;
  MPI_Initialized(&started);
  MPI_Finalized(&finished);
  return started && !finished;
}

int rank() {
  if (!is_initialized()) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  if (!is_initialized()) return 1;
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

bool is_main_process() { return rank() == 0; }

void finalize() {
  if (!we_started || !is_initialized()) return;
  // After a failed collective MPI_Finalize could wait forever for the missing rank: end them all.
  if (broken) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Finalize();
}

void abort(int code) {
  if (is_initialized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

double timeout_seconds() {
  static const double seconds = [] {
    const char* env = std::getenv("MG_DIST_TIMEOUT");
    const double v = env ? std::atof(env) : 0;
    return v > 0 ? v : 300.0;
  }();
  return seconds;
}

void barrier() {
  if (world_size() == 1) return;
  check_not_broken("barrier");
  MPI_Request req;
  check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
  wait_bounded(req, "barrier");
}

void broadcast(const Tensor& t, int root) {
  const MPI_Datatype type = mpi_type(t, "broadcast");
  MG_CHECK(root >= 0 && root < world_size(), ValueError, "distributed::broadcast: root {} is not a rank of {}", root,
           world_size());
  if (world_size() == 1 || t.numel() == 0) return;
  check_not_broken("broadcast");
  t.storage()->bump_version();  // written in place: on every rank, so a refused backward is refused everywhere
  MPI_Request req;
  check(MPI_Ibcast(t.data_ptr(), count_of(t, "broadcast"), type, root, MPI_COMM_WORLD, &req), "MPI_Ibcast");
  wait_bounded(req, "broadcast", {t.storage()});
}

void all_reduce_sum(const Tensor& t) {
  Work w = all_reduce_sum_async(t, "all-reduce");
  w.wait();
}

std::vector<int64_t> all_gather(const std::vector<int64_t>& values) {
  const int n = world_size();
  if (n == 1) return values;
  check_not_broken("all-gather");
  // MPI reads and writes these until the gather is done: shared, to outlive a gather given up on
  const auto in = std::make_shared<std::vector<int64_t>>(values);
  const auto out = std::make_shared<std::vector<int64_t>>(values.size() * n);
  MPI_Request req;
  check(MPI_Iallgather(in->data(), static_cast<int>(values.size()), MPI_INT64_T, out->data(),
                       static_cast<int>(values.size()), MPI_INT64_T, MPI_COMM_WORLD, &req),
        "MPI_Iallgather");
  wait_bounded(req, "all-gather", {in, out});
  return *out;
}

namespace {
// MPI's int counts and displacements for parts of `counts` elements; `total` the sum.
using Ints = std::shared_ptr<std::vector<int>>;  // shared: MPI may read them until the operation ends
std::pair<Ints, Ints> parts(const std::vector<int64_t>& counts, int64_t total, const char* op) {
  MG_CHECK(static_cast<int>(counts.size()) == world_size(), ValueError,
           "distributed::{}: {} counts for {} processes (one per rank)", op, counts.size(), world_size());
  std::vector<int> n, at;
  int64_t sum = 0;
  for (int64_t c : counts) {
    MG_CHECK(c >= 0, ValueError, "distributed::{}: a count is negative ({})", op, c);
    MG_CHECK(sum <= INT32_MAX, ValueError, "distributed::{}: offset {} is more than MPI's int holds", op, sum);
    at.push_back(static_cast<int>(sum));
    sum = checked_add(sum, c, op);
    MG_CHECK(c <= INT32_MAX, ValueError, "distributed::{}: {} elements are more than MPI's int count holds", op, c);
    n.push_back(static_cast<int>(c));
  }
  MG_CHECK(sum == total, ShapeError, "distributed::{}: the counts add up to {}, the tensor has {} elements", op, sum,
           total);
  return {std::make_shared<std::vector<int>>(std::move(n)), std::make_shared<std::vector<int>>(std::move(at))};
}
}  // namespace

void reduce_scatter_sum(const Tensor& in, const Tensor& out, const std::vector<int64_t>& counts) {
  const MPI_Datatype type = mpi_type(in, "reduce_scatter_sum");
  mpi_type(out, "reduce_scatter_sum");
  MG_CHECK(in.dtype() == out.dtype(), DTypeError, "distributed::reduce_scatter_sum: in is {}, out is {}",
           dtype_name(in.dtype()), dtype_name(out.dtype()));
  const auto [n, at] = parts(counts, in.numel(), "reduce_scatter_sum");
  MG_CHECK(out.numel() == (*n)[rank()], ShapeError,
           "distributed::reduce_scatter_sum: rank {}'s part has {} elements, its out tensor {}", rank(), (*n)[rank()],
           out.numel());
  MG_CHECK(in.is_contiguous() && out.is_contiguous(), ValueError,
           "distributed::reduce_scatter_sum: in and out must be contiguous");
  if (world_size() == 1) {
    if (out.numel() > 0) out.copy_(in.view(out.shape()));
    return;
  }
  check_not_broken("reduce-scatter");
  out.storage()->bump_version();  // written in place (Storage::version)
  MPI_Request req;
  check(MPI_Ireduce_scatter(in.data_ptr(), out.data_ptr(), n->data(), type, MPI_SUM, MPI_COMM_WORLD, &req),
        "MPI_Ireduce_scatter");
  wait_bounded(req, "reduce-scatter", {in.storage(), out.storage(), n});
}

void all_gather_into(const Tensor& mine, const Tensor& all, const std::vector<int64_t>& counts) {
  const MPI_Datatype type = mpi_type(all, "all_gather_into");
  mpi_type(mine, "all_gather_into");
  MG_CHECK(mine.dtype() == all.dtype(), DTypeError, "distributed::all_gather_into: mine is {}, all is {}",
           dtype_name(mine.dtype()), dtype_name(all.dtype()));
  const auto [n, at] = parts(counts, all.numel(), "all_gather_into");
  MG_CHECK(mine.numel() == (*n)[rank()], ShapeError,
           "distributed::all_gather_into: rank {}'s part has {} elements, its tensor {}", rank(), (*n)[rank()],
           mine.numel());
  MG_CHECK(mine.is_contiguous() && all.is_contiguous(), ValueError,
           "distributed::all_gather_into: mine and all must be contiguous");
  if (world_size() == 1) {
    if (mine.numel() > 0) all.view(mine.shape()).copy_(mine);
    return;
  }
  check_not_broken("all-gather");
  all.storage()->bump_version();
  MPI_Request req;
  check(MPI_Iallgatherv(mine.data_ptr(), (*n)[rank()], type, all.data_ptr(), n->data(), at->data(), type,
                        MPI_COMM_WORLD, &req),
        "MPI_Iallgatherv");
  wait_bounded(req, "all-gather", {mine.storage(), all.storage(), n, at});
}

Work all_reduce_sum_async(const Tensor& t, const std::string& what) {
  const MPI_Datatype type = mpi_type(t, "all_reduce_sum");
  Work w;
  w.impl_ = std::make_shared<Work::Impl>();
  w.impl_->what = what;
  w.impl_->buffer = t;
  if (world_size() == 1 || t.numel() == 0) {
    w.impl_->done = true;
    return w;
  }
  check_not_broken(what);
  t.storage()->bump_version();  // summed in place (Storage::version)
  void* data = t.data_ptr();
  check(MPI_Iallreduce(MPI_IN_PLACE, data, count_of(t, "all_reduce_sum"), type, MPI_SUM, MPI_COMM_WORLD, &w.impl_->req),
        "MPI_Iallreduce");
  return w;
}

bool Work::test() {
  if (!impl_ || impl_->done) return true;
  int done = 0;
  const int rc = MPI_Test(&impl_->req, &done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) abandon({impl_->buffer.storage()});
  check(rc, "MPI_Test");
  impl_->done = done != 0;
  return impl_->done;
}

void Work::wait() {
  if (!impl_ || impl_->done) return;
  wait_bounded(impl_->req, impl_->what, {impl_->buffer.storage()});
  impl_->done = true;
}

}  // namespace mg::distributed
