#pragma once
// Batches of examples, as torch.utils.data gives them:
//
//   data::TensorDataset train({images, labels});            // example i: (images[i], labels[i])
//   data::DataLoader loader(train, {.batch_size = 32, .shuffle = true, .seed = 1});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (const data::Batch& b : loader) { ... b[0] (32, ...), b[1] (32) ... }
//
// Each pass over the loader is one epoch. With shuffle, epoch e visits the examples in the order
// of a permutation drawn from a generator seeded by (seed, e): a run is the same for the same
// seed, every epoch has its own order, and set_epoch(e) resumes a run at epoch e. Plain tensors only: the data layer
// knows nothing of gradients (wrap a batch in Variable to train on it).
#include <cstdint>
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg::data {

/// One batch: the batched tensors of the dataset, in the dataset's order.
using Batch = std::vector<Tensor>;

/// Examples stored as tensors that share their first dimension (PyTorch's TensorDataset):
/// example i is row i of every tensor.
class TensorDataset {
 public:
  /// At least one tensor, each of at least one dimension, all of the same size along dim 0;
  /// a ShapeError otherwise.
  explicit TensorDataset(std::vector<Tensor> tensors);
  /// Number of examples.
  int64_t size() const { return size_; }
  /// Example i: row i of every tensor (views, no copy); an IndexError out of range.
  Batch get(int64_t i) const;
  /// The rows `index` (an int64 vector) of every tensor, gathered into new tensors.
  Batch gather(const Tensor& index) const;
  /// The tensors themselves.
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  int64_t size_ = 0;
};

/// DataLoader's settings (PyTorch's names and defaults; the generator's seed instead of a generator).
struct DataLoaderOptions {
  int64_t batch_size = 1;  // examples per batch (the last one may be smaller)
  bool shuffle = false;    // a new seeded order every epoch; false: 0, 1, 2, ...
  bool drop_last = false;  // drop a last batch smaller than batch_size
  uint64_t seed = 0;       // the shuffle's generator
};

/// Splits a dataset into batches, one epoch per pass (PyTorch's DataLoader).
class DataLoader {
 public:
  /// A ValueError for batch_size < 1.
  DataLoader(TensorDataset dataset, DataLoaderOptions options = {});

  /// Number of batches in an epoch (len(loader)).
  int64_t size() const;
  /// The epoch the next pass will be.
  int64_t epoch() const { return epoch_; }
  /// Make the next pass epoch `e` (>= 0): its order is the one an uninterrupted run has there.
  void set_epoch(int64_t e);
  /// The order in which epoch `e` visits the examples (0, 1, ... without shuffle).
  std::vector<int64_t> order(int64_t e) const;
  /// Batch i of epoch e (i < size()).
  Batch batch(int64_t e, int64_t i) const;
  /// The dataset.
  const TensorDataset& dataset() const { return dataset_; }
  /// The settings.
  const DataLoaderOptions& options() const { return options_; }

  /// Walks the batches of one epoch.
  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    /// The current batch.
    const Batch& operator*() const { return batch_; }
    /// The current batch's address.
    const Batch* operator->() const { return &batch_; }
    /// Next batch.
    Iterator& operator++();
    /// Whether two iterators are at the same batch.
    bool operator==(const Iterator& other) const { return index_ == other.index_; }

   private:
    friend class DataLoader;
    Iterator(const DataLoader* loader, std::vector<int64_t> order, int64_t index);
    void load();
    const DataLoader* loader_ = nullptr;
    std::vector<int64_t> order_;
    int64_t index_ = 0;
    Batch batch_;
  };
  /// Start a pass: the current epoch's order, after which epoch() moves on by one.
  Iterator begin();
  /// The end of a pass.
  Iterator end() const;

 private:
  Batch batch_of(const std::vector<int64_t>& order, int64_t i) const;
  TensorDataset dataset_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
};

}  // namespace mg::data
