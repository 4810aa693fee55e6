#include "minigrad/data/dataloader.h"

#include <algorithm>
#include <numeric>

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

DataLoader::DataLoader(TensorDataset dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  MG_CHECK(options_.batch_size >= 1, ValueError, "DataLoader: batch_size must be >= 1, got {}", options_.batch_size);
}

int64_t DataLoader::size() const {
  const int64_t n = dataset_.size(), b = options_.batch_size;
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
  const int64_t n = dataset_.size();
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
  const int64_t b = options_.batch_size, start = i * b;
  const int64_t len = std::min<int64_t>(b, dataset_.size() - start);
  std::vector<int64_t> rows(order.begin() + start, order.begin() + start + len);
  return dataset_.gather(from_vector(rows, {len}));
}

Batch DataLoader::batch(int64_t e, int64_t i) const {
  MG_CHECK(i >= 0 && i < size(), IndexError, "DataLoader: batch {} is out of range for {} batches per epoch", i,
           size());
  return batch_of(order(e), i);
}

DataLoader::Iterator::Iterator(const DataLoader* loader, std::vector<int64_t> order, int64_t index)
    : loader_(loader), order_(std::move(order)), index_(index) {
  load();
}

void DataLoader::Iterator::load() {
  if (loader_ && index_ < loader_->size()) batch_ = loader_->batch_of(order_, index_);
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++index_;
  load();
  return *this;
}

DataLoader::Iterator DataLoader::begin() { return Iterator(this, order(epoch_++), 0); }

DataLoader::Iterator DataLoader::end() const { return Iterator(nullptr, {}, size()); }

}  // namespace mg::data
