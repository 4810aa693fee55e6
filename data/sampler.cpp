// DistributedSampler (data/sampler.h): the shards of an epoch's order.
#include "minigrad/data/sampler.h"

#include <fmt/format.h>

#include "minigrad/tensor/error.h"
#include "minigrad/tensor/generator.h"
#include "minigrad/tensor/ops.h"
#include "minigrad/tensor/shape.h"

namespace mg::data {

DistributedSampler::DistributedSampler(int64_t n, int num_replicas, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : n_(n), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), drop_last_(drop_last), seed_(seed) {
  MG_CHECK(n >= 0, ValueError, "DistributedSampler: the dataset size must be >= 0, got {}", n);
  MG_CHECK(num_replicas >= 1 && rank >= 0 && rank < num_replicas, ValueError,
           "DistributedSampler: rank {} is not in [0, {}) (num_replicas {})", rank, num_replicas, num_replicas);
  count_samples();
}

// Each rank's share of the n - start samples left in the epoch.
void DistributedSampler::count_samples() {
  const int64_t left = n_ - start_;
  num_samples_ = left / num_replicas_ + (!drop_last_ && left % num_replicas_ != 0 ? 1 : 0);  // no + R - 1: overflow
  checked_mul(num_samples_, num_replicas_, "DistributedSampler");  // the padded epoch's size must fit too
}

void DistributedSampler::set_epoch(int64_t e, int64_t start) {
  MG_CHECK(e >= 0, ValueError, "DistributedSampler::set_epoch: the epoch must be >= 0, got {}", e);
  MG_CHECK(start >= 0 && start <= n_, ValueError,
           "DistributedSampler::set_epoch: start {} is not a position in an epoch of {} samples (0 ... {})", start, n_,
           n_);
  epoch_ = e;
  start_ = start;
  count_samples();
}

std::vector<int64_t> DistributedSampler::indices() const {
  // the whole epoch's order is built on every rank (as PyTorch's sampler does): n_ int64 values
  std::vector<int64_t> order;
  try {
    order.resize(static_cast<size_t>(n_));
  } catch (const std::exception&) {  // std::bad_alloc, or std::length_error past the vector's max_size()
    throw MemoryError(fmt::format("DistributedSampler::indices: cannot hold the order of {} samples ({} bytes)", n_,
                                  static_cast<double>(n_) * 8));
  }
  for (int64_t i = 0; i < n_; ++i) order[i] = i;
  if (shuffle_ && n_ > 1) {
    Generator g(seed_ + static_cast<uint64_t>(epoch_));  // the same order on every rank
    order = randperm(n_, g).to_vector<int64_t>();
  }
  order.erase(order.begin(), order.begin() + start_);  // what the epoch's earlier steps took
  const int64_t left = n_ - start_, total = num_samples_ * num_replicas_;
  if (!drop_last_)
    for (int64_t i = 0; left > 0 && static_cast<int64_t>(order.size()) < total; ++i) order.push_back(order[i % left]);
  order.resize(total);
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(order[i]);
  return mine;
}

}  // namespace mg::data
