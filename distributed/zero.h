#pragma once
// ZeRO stage 1 (Rajbhandari et al., 2020), under PyTorch's name ZeroRedundancyOptimizer: data
// parallelism in which each process keeps the optimizer state of only 1/N of the parameters.
//
// Plain data parallelism (distributed/ddp.h) gives every process the averaged gradient of every
// parameter, and every process then takes the same optimizer step on the whole model: AdamW's two
// moment tensors, twice the parameters' size, are held N times over. Here the trainable parameters
// are laid side by side in one flat vector, cut into N equal shards (a shard may begin or end
// inside a parameter), and a step is:
//
//   1. reduce-scatter: the processes sum their gradients (each divided by N) so that process r
//      receives only the averages of shard r (in a ring, half of an all-reduce's traffic);
//   2. process r's own optimizer, built over one flat Variable holding shard r's values, steps it;
//   3. all-gather: every process receives every shard's new values (the other half).
//
// The optimizer must update each element from that element's own numbers (SGD, Adam, AdamW,
// RMSprop, Adagrad do; L-BFGS does not), so that a slice of the flat vector is stepped exactly as
// the same elements of the parameters would be.
//
// The optimizer's state per process falls to 1/N, and the numbers are plain data parallelism's: the
// same averages and the same update rule, only computed where the shard lives
// (tests/distributed/test_ddp.cpp: ZeRO.* checks 1e-12 in float64). Besides the model, each process
// keeps one flat buffer of all the trainable values (what the collectives move), as DDP keeps its
// buckets. The averaged gradient exists only for the shard, so clip it with clip_grad_norm_ here,
// not with optim::clip_grad_norm_ on the model's .grad() (which hold this process's own gradients).
//
//   distributed::ZeroRedundancyOptimizer opt(model, [](const std::vector<Variable>& shard) {
//     return std::make_unique<optim::AdamW>(shard, optim::AdamWOptions{.lr = 3e-4});
//   });
//   for (...) {
//     opt.zero_grad();
//     loss_of_my_shard_of_the_batch.backward();   // no DistributedDataParallel: step() averages
//     opt.clip_grad_norm_(1.0);                     // optional: the averaged gradient's norm
//     opt.step();
//   }
//
// Checkpoints are consolidated: save_checkpoint gathers every shard's state (one state tensor at a
// time, to every process) and rank 0 writes an ordinary optimizer checkpoint (the one a single
// process training the whole model would write); load_checkpoint reads such a file on any number
// of processes, each keeping its own shard's state. So a run saved on 3 processes resumes on 2, or
// on one without ZeRO. The parameters form one group (one learning rate and weight decay).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "minigrad/distributed/process_group.h"
#include "minigrad/nn/module.h"
#include "minigrad/optim/optimizer.h"
#include "minigrad/optim/scheduler.h"

namespace mg::distributed {

/// Optimizer state sharded over the processes (see the file comment). The model must outlive it.
class ZeroRedundancyOptimizer {
 public:
  /// Makes an optimizer over the parameters it is given (one group): this process's shard, and, to
  /// write or read a consolidated checkpoint, for a moment all of them.
  using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(const std::vector<Variable>& params)>;
  /// Check that every process holds the same model and copy rank 0's parameters and buffers to all
  /// (as DistributedDataParallel does), cut the parameters that require grad into world_size()
  /// equal shards of their elements, and make this process's optimizer over its shard. The
  /// trainable parameters must share one floating dtype (a DTypeError otherwise), and have at least
  /// as many elements as there are processes (a ValueError).
  ZeroRedundancyOptimizer(nn::Module& model, OptimizerFactory make_optimizer);
  ZeroRedundancyOptimizer(const ZeroRedundancyOptimizer&) = delete;
  ZeroRedundancyOptimizer& operator=(const ZeroRedundancyOptimizer&) = delete;

  /// Clear every parameter's gradient.
  void zero_grad();
  /// torch.nn.utils.clip_grad_norm_ on the averaged gradient, after backward and before step():
  /// averages this process's shard (the reduce-scatter step() would do), computes the 2-norm of
  /// the whole averaged gradient (one more all-reduce, of one number) and scales the shard by
  /// max_norm / (norm + 1e-6) when that is below 1. Returns the norm. The same numbers as
  /// DistributedDataParallel followed by optim::clip_grad_norm_.
  double clip_grad_norm_(double max_norm);
  /// Reduce-scatter the gradients (averaged over the processes; done already after
  /// clip_grad_norm_), step this process's shard, and all-gather the new parameters. Every
  /// parameter that requires grad must have a gradient (a StateError naming those without, before
  /// any communication). The parameters' .grad() keep this process's own gradients.
  void step();
  /// This process's optimizer (over its shard): its learning rate is what a scheduler changes.
  optim::Optimizer& local_optimizer() { return *local_; }
  /// Number of trainable parameters (all shards).
  int64_t num_params() const { return static_cast<int64_t>(params_.size()); }
  /// Elements in each rank's shard.
  const std::vector<int64_t>& shard_sizes() const { return counts_; }
  /// Bytes of optimizer state this process holds (its shard's moment tensors and step counts).
  int64_t state_bytes() const;

  /// Write the model, the whole optimizer state (every shard's) and the schedule's (a scheduler
  /// built on local_optimizer()) to `path` as optim::save_checkpoint would for one process training
  /// the whole model; rank 0 writes it, atomically. Every process must call it (a collective); it
  /// returns once the file is complete, with a FileError on every rank if rank 0 could not write it.
  void save_checkpoint(const std::string& path, int64_t step, const optim::LRScheduler* scheduler = nullptr);
  /// Read such a checkpoint (from any number of processes, or from one process without ZeRO) on
  /// every process: the model's values, this process's shard of the optimizer state, the schedule's
  /// state. Returns the step. Every process reads the file and checks it before anything changes:
  /// if one cannot, every process gets a FileError and nothing is loaded anywhere.
  int64_t load_checkpoint(const std::string& path, optim::LRScheduler* scheduler = nullptr);

 private:
  nn::Module& model_;
  OptimizerFactory make_;
  std::vector<Variable> params_;    // the trainable parameters, in registration order
  std::vector<std::string> names_;  // their names
  std::vector<int64_t> counts_;     // elements in each rank's shard
  int64_t start_ = 0;               // where this rank's shard begins in the flat vector
  Variable shard_;                  // this rank's shard of the values: what local_ steps
  std::unique_ptr<optim::Optimizer> local_;
  Tensor flat_;           // all the gradients (/ N) for the reduce-scatter, then all the values
  bool reduced_ = false;  // this step's averaged shard gradient is in shard_.grad()
  void reduce_gradients();
};

}  // namespace mg::distributed
