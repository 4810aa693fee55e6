#pragma once
// Which samples each of several processes reads in an epoch, so that data-parallel ranks split a
// data set without overlap (docs/07-data-parallel.md).
#include <cstdint>
#include <vector>

namespace mg::data {

/// The indices of a dataset that one rank reads (PyTorch's DistributedSampler): each epoch's order
/// (a shuffle seeded by seed + epoch, the same on every rank, or 0 ... n-1) padded by repeating its
/// start to a multiple of the world size (or cut down to one, with drop_last), then every
/// num_replicas-th index from position rank. The ranks' shards are disjoint and, together, the epoch.
/// Index arithmetic only: a data-parallel trainer passes its world size and rank
/// (DistributedSampler(n, distributed::world_size(), distributed::rank())).
class DistributedSampler {
 public:
  /// A ValueError for n < 0, num_replicas < 1 or rank outside [0, num_replicas).
  DistributedSampler(int64_t n, int num_replicas, int rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  /// Use epoch e's order from now on (call before each epoch, as in PyTorch).
  void set_epoch(int64_t e) { set_epoch(e, 0); }
  /// Use epoch e's order from position `start` on: only the samples at positions start ... n-1 of
  /// the epoch's order are shared out (padded or cut to a multiple of the world size as a whole
  /// epoch is). For a run resumed in the middle of an epoch, possibly on another number of
  /// processes (an elastic restart): `start` is the number of samples all the ranks before took
  /// together (steps x global batch), so no sample is skipped or read twice. A ValueError unless
  /// 0 <= start <= n.
  void set_epoch(int64_t e, int64_t start);
  /// This rank's indices for the current epoch (from its start).
  std::vector<int64_t> indices() const;
  /// How many indices each rank gets.
  int64_t num_samples() const { return num_samples_; }

 private:
  void count_samples();
  int64_t n_, num_samples_ = 0, epoch_ = 0, start_ = 0;
  int num_replicas_, rank_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
};

}  // namespace mg::data
