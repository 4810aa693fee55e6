#include "minigrad/data/dataloader.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <system_error>

#include "minigrad/tensor/generator.h"
#include "minigrad/tensor/ops.h"

namespace mg::data {

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
  MG_CHECK(!tensors_.empty(), ShapeError, "TensorDataset: needs at least one tensor");
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    MG_CHECK(t.defined() && t.dim() >= 1, ShapeError,
             "TensorDataset: tensor {} must have a first dimension of examples, got {}", i,
             t.defined() ? shape_str(t.shape()) : "an undefined tensor");
    MG_CHECK(t.size(0) == tensors_[0].size(0), ShapeError,
             "TensorDataset: every tensor needs the same number of examples (dim 0); tensor 0 is {}, tensor {} is {}",
             shape_str(tensors_[0].shape()), i, shape_str(t.shape()));
  }
  size_ = tensors_[0].size(0);
}

Batch TensorDataset::get(int64_t i) const {
  MG_CHECK(i >= 0 && i < size_, IndexError, "TensorDataset: example {} is out of range for {} examples", i, size_);
  Batch out;
  for (const Tensor& t : tensors_) out.push_back(t.narrow(0, i, 1).squeeze(0));
  return out;
}

Batch TensorDataset::gather(const Tensor& index) const {
  Batch out;
  for (const Tensor& t : tensors_) out.push_back(index_select(t, 0, index));
  return out;
}

Batch TensorDataset::gather(const std::vector<int64_t>& rows) const {
  return gather(from_vector(rows, {static_cast<int64_t>(rows.size())}));
}

// default_collate: field f of the batch is field f of every example, stacked along a new dim 0
Batch Dataset::gather(const std::vector<int64_t>& rows) const {
  MG_CHECK(!rows.empty(), ValueError, "Dataset::gather: no rows to batch");
  std::vector<Batch> examples;
  for (int64_t r : rows) {
    MG_CHECK(r >= 0 && r < size(), IndexError, "Dataset::gather: example {} is out of range for {} examples", r,
             size());
    examples.push_back(get(r));
    const Batch& first = examples.front();
    const Batch& e = examples.back();
    MG_CHECK(e.size() == first.size(), ShapeError,
             "Dataset::gather: example {} has {} fields but example {} has {}; every example needs the same fields", r,
             e.size(), rows.front(), first.size());
    for (size_t f = 0; f < e.size(); ++f)
      MG_CHECK(
          e[f].defined() && e[f].shape() == first[f].shape() && e[f].dtype() == first[f].dtype(), ShapeError,
          "Dataset::gather: field {} of example {} is {} {}, but example {} has {} {}; a batch stacks equal shapes", f,
          r, e[f].defined() ? dtype_name(e[f].dtype()) : "undefined", e[f].defined() ? shape_str(e[f].shape()) : "",
          rows.front(), dtype_name(first[f].dtype()), shape_str(first[f].shape()));
  }
  Batch out;
  for (size_t f = 0; f < examples.front().size(); ++f) {
    std::vector<Tensor> field;
    for (const Batch& e : examples) field.push_back(e[f]);
    out.push_back(stack(field, 0));
  }
  return out;
}

DataLoader::DataLoader(TensorDataset dataset, DataLoaderOptions options)
    : DataLoader(std::make_shared<const TensorDataset>(std::move(dataset)), options) {}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  MG_CHECK(dataset_ != nullptr, ValueError, "DataLoader: the dataset is null");
  MG_CHECK(options_.batch_size >= 1, ValueError, "DataLoader: batch_size must be >= 1, got {}", options_.batch_size);
  MG_CHECK(options_.num_workers >= 0, ValueError, "DataLoader: num_workers must be >= 0, got {}", options_.num_workers);
  MG_CHECK(options_.prefetch_factor >= 1, ValueError, "DataLoader: prefetch_factor must be >= 1, got {}",
           options_.prefetch_factor);
  MG_CHECK(options_.num_workers <= std::numeric_limits<int64_t>::max() / options_.prefetch_factor, ValueError,
           "DataLoader: num_workers {} times prefetch_factor {} batches ahead does not fit in int64",
           options_.num_workers, options_.prefetch_factor);
  examples();  // a dataset whose size() is negative is refused here
}

int64_t DataLoader::examples() const {
  const int64_t n = dataset_->size();
  MG_CHECK(n >= 0, ValueError, "DataLoader: the dataset's size() returned {}; expected a count >= 0", n);
  return n;
}

int64_t DataLoader::size() const {
  const int64_t n = examples(), b = options_.batch_size;
  return options_.drop_last ? n / b : n / b + (n % b != 0);
}

void DataLoader::set_epoch(int64_t e) {
  MG_CHECK(e >= 0, ValueError, "DataLoader: epoch must be >= 0, got {}", e);
  epoch_ = e;
}

// Epoch e's order: a permutation drawn from a generator seeded by (seed, e), so epochs differ from
// each other and any epoch can be recomputed on its own.
std::vector<int64_t> DataLoader::order(int64_t e) const {
  MG_CHECK(e >= 0, ValueError, "DataLoader: epoch must be >= 0, got {}", e);
  const int64_t n = examples();
  std::vector<int64_t> idx;
  try {
    idx.resize(static_cast<size_t>(n));
  } catch (const std::exception&) {  // std::bad_alloc, or std::length_error past max_size()
    throw MemoryError(fmt::format("DataLoader: cannot hold the order of {} examples", n));
  }
  std::iota(idx.begin(), idx.end(), int64_t{0});
  if (!options_.shuffle) return idx;
  Generator gen(options_.seed ^ (0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(e) + 1)));
  for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates: every order equally likely
    std::swap(idx[static_cast<size_t>(i)], idx[gen.next_below(static_cast<uint64_t>(i) + 1)]);
  return idx;
}

Batch DataLoader::batch_of(const std::vector<int64_t>& order, int64_t i) const {
  const OpScope scope("DataLoader");  // what the dataset's gather or get raises names the loader
  const int64_t b = options_.batch_size, start = i * b;
  const int64_t len = std::min<int64_t>(b, examples() - start);
  return dataset_->gather(std::vector<int64_t>(order.begin() + start, order.begin() + start + len));
}

Batch DataLoader::batch(int64_t e, int64_t i) const {
  MG_CHECK(i >= 0 && i < size(), IndexError, "DataLoader: batch {} is out of range for {} batches per epoch", i,
           size());
  return batch_of(order(e), i);
}

DataLoader::Iterator::Iterator(const DataLoader* loader, std::vector<int64_t> order, int64_t index)
    : loader_(loader), order_(std::move(order)), index_(index) {
  if (loader_ && loader_->options_.num_workers > 0 && loader_->size() > 0)
    workers_ = std::make_shared<Prefetcher>(*loader_, order_);
  load();
}

void DataLoader::Iterator::load() {
  if (!loader_ || index_ >= loader_->size()) {
    workers_.reset();  // the pass is over: stop the threads now
    return;
  }
  batch_ = workers_ ? workers_->take(index_) : loader_->batch_of(order_, index_);
}

Prefetcher::Prefetcher(const DataLoader& loader, std::vector<int64_t> order)
    : loader_(loader),
      order_(std::move(order)),
      batches_(loader.size()),
      workers_(loader.options().num_workers),
      depth_(loader.options().num_workers * loader.options().prefetch_factor) {
  try {
    for (int64_t w = 0; w < workers_; ++w) threads_.emplace_back([this, w] { work(w); });
  } catch (const std::system_error& e) {  // no more threads: stop the ones started, then say so
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (std::thread& t : threads_) t.join();
    throw StateError(
        fmt::format("DataLoader: could not start worker {} of {}: {}", threads_.size(), workers_, e.what()));
  }
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();
}

// Worker w: batches w, w + workers, ..., each once the loop is less than depth batches behind it.
void Prefetcher::work(int64_t w) {
  for (int64_t i = w; i < batches_; i += workers_) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || i - taken_ < depth_; });  // (taken_ + depth_ may pass int64)
      if (stop_) return;
    }
    Slot slot;
    try {
      slot.batch = loader_.batch_of(order_, i);  // outside the lock: the workers assemble at once
    } catch (...) {
      slot.error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      ready_[i] = std::move(slot);
    }
    changed_.notify_all();
  }
}

Batch Prefetcher::take(int64_t i) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return ready_.count(i) > 0; });
  Slot slot = std::move(ready_[i]);
  ready_.erase(i);
  taken_ = i + 1;
  lock.unlock();
  changed_.notify_all();  // a worker waiting for room may go on
  if (slot.error) std::rethrow_exception(slot.error);
  return std::move(slot.batch);
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++index_;
  load();
  return *this;
}

DataLoader::Iterator DataLoader::begin() {
  MG_CHECK(epoch_ < std::numeric_limits<int64_t>::max(), StateError, "DataLoader: the epoch count {} cannot go on",
           epoch_);
  return Iterator(this, order(epoch_++), 0);
}

DataLoader::Iterator DataLoader::end() const { return Iterator(nullptr, {}, size()); }

}  // namespace mg::data
