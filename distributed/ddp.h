#pragma once
// Data-parallel training, as PyTorch's DistributedDataParallel: N processes each hold the whole
// model, each runs forward and backward on its own 1/N of the batch, and before the optimizer step
// every gradient is replaced by its average over the processes. Every process then takes the same
// step from the same weights, so they stay identical, and the step is the one a single process
// would take on the whole batch (the average of N shard means is the mean over the batch).
//
//   distributed::init(&argc, &argv);
//   models::GPT model(...);                                  // same seed everywhere (rank 0's weights win anyway)
//   distributed::DistributedDataParallel ddp(model);     // broadcasts rank 0's parameters
//   optim::AdamW opt(model.parameters(), {...});
//   for (...) {
//     Variable loss = cross_entropy(model(my_shard_x), my_shard_y);
//     opt.zero_grad();
//     loss.backward();                                    // all-reduces start during this
//     ddp.wait();                                         // gradients are averaged once this returns
//     opt.step();
//   }
//
// Why average gradients and not losses: a loss is one number per process, and the backward of
// an all-reduced loss would still only reach this process's activations. The gradient is what every
// process needs, and it is linear in the loss: the mean over processes of per-shard gradients is the
// gradient of the mean loss.
//
// Overlap: the parameters are grouped into buckets (about bucket_cap_mb each) in reverse order of
// registration, which is roughly the order the backward produces their gradients (the last layer's
// first). A hook on each parameter fires once its gradient has been accumulated; when a bucket's
// last gradient arrives, the bucket is copied into one flat buffer and its all-reduce is started
// without waiting, while the backward goes on with the layers below. Buckets start in index order
// on every process (an MPI requirement: collectives in the same order everywhere). wait() finishes
// them and writes the averages back into each parameter's .grad().
//
// no_sync(): inside it gradients only accumulate locally (micro-batches); the first backward after
// it all-reduces the accumulated sums.
#include <cstdint>
#include <string>
#include <vector>

#include "minigrad/autograd/variable.h"
#include "minigrad/distributed/process_group.h"
#include "minigrad/nn/module.h"

namespace mg::distributed {

/// DistributedDataParallel's settings (PyTorch's names).
struct DDPOptions {
  /// Bytes of gradient per bucket, in MiB (PyTorch's default)
  double bucket_cap_mb = 25;
  /// Also copy rank 0's buffers at construction.
  bool broadcast_buffers = true;
};

/// What happened when, for tests and profiles: a parameter's gradient became ready, a bucket's
/// all-reduce started, or finished (in wait()).
struct DDPEvent {
  /// What happened.
  enum Kind {
    GradReady,       ///< a parameter's gradient was accumulated
    BucketStarted,   ///< a bucket's all-reduce was started
    BucketFinished,  ///< a bucket's all-reduce finished and its averages were written back
  } kind;
  int64_t bucket;        ///< the bucket
  int64_t ready_params;  ///< gradients ready so far this backward (of num_params())
};

/// What DistributedDataParallel's and ZeroRedundancyOptimizer's constructors do first: check that
/// every process holds the same model (the parameters' count, shapes and dtypes, and which require
/// grad: one fixed-size exchange, so a mismatch is a ShapeError naming `who` on every rank, not a
/// collective that some never join), then copy rank 0's parameters (and, with `buffers`, its
/// float and int64 buffers) to every process.
void sync_model(nn::Module& module, bool buffers, const char* who);

/// Wraps a model for data-parallel training (see the file comment). The model must outlive it, and
/// every process must build the same model: the constructor checks every parameter's shape and dtype
/// across processes, frozen ones included (a ShapeError on every rank if they differ), and copies rank
/// 0's values of all of them (and of the buffers) to every process. Only the parameters that require
/// grad are bucketed and averaged.
class DistributedDataParallel {
 public:
  /// Check, broadcast, build the buckets and hook every parameter that requires grad.
  explicit DistributedDataParallel(nn::Module& module, DDPOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// The wrapped model.
  nn::Module& module() const { return module_; }
  /// Finish every bucket's all-reduce and put the averaged gradients into .grad(). Call before the
  /// optimizer step. A StateError if some parameter got no gradient in this backward (every
  /// parameter must take part in every step, or the processes' buckets would not match).
  void wait();

  /// RAII: while alive, backward accumulates gradients locally without communicating.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.sync_) { ddp_.sync_ = false; }
    ~NoSync() { ddp_.sync_ = prev_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  /// Gradient accumulation: `{ auto guard = ddp.no_sync(); loss.backward(); }` for all but the last
  /// micro-batch (PyTorch's `with ddp.no_sync():`).
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  /// Number of buckets.
  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  /// The parameters of bucket b, as indices into module().parameters().
  const std::vector<int64_t>& bucket(int64_t b) const { return buckets_.at(b).params; }
  /// Number of parameters that require grad (those synchronised).
  int64_t num_params() const { return static_cast<int64_t>(params_.size()); }
  /// The events of the last backward (cleared when a new one starts).
  const std::vector<DDPEvent>& events() const { return events_; }
  /// Seconds spent blocked in wait() (communication that the backward did not hide), summed since
  /// construction.
  double wait_seconds() const { return wait_seconds_; }

 private:
  struct Bucket {
    std::vector<int64_t> params;  // indices into params_
    Tensor flat;                  // the gradients side by side, all-reduced in place
    int64_t ready = 0;
    bool started = false;
    Work work;
  };
  void on_grad_ready(int64_t param);
  void start_ready_buckets();
  // Wait (bounded) for the buckets already started and forget this backward's progress: after an
  // error, so that no all-reduce is left writing into a buffer, and the next step starts clean.
  void drain() noexcept;

  nn::Module& module_;
  std::vector<Variable> params_;
  std::vector<std::string> names_;  // params_' names
  std::vector<int64_t> bucket_of_;
  std::vector<bool> got_;  // which parameters have a gradient in this backward
  std::vector<Bucket> buckets_;
  std::vector<GradHookHandle> hooks_;
  std::vector<DDPEvent> events_;
  int64_t next_bucket_ = 0;  // buckets start in this order
  int64_t ready_total_ = 0;  // gradients ready in this backward
  bool sync_ = true;
  bool pending_ = false;  // a backward has started buckets that wait() has not finished
  double wait_seconds_ = 0;
};

}  // namespace mg::distributed
