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
//
// Your own data: subclass Dataset (size() and get(i)) and give the loader a shared_ptr to it.
// With num_workers > 0, worker threads assemble the next batches while the training step runs
// (PyTorch's workers are processes; here threads, which share the dataset): the batches, and
// their order, are the same as without workers.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg::data {

/// One batch: the batched tensors of the dataset, in the dataset's order.
using Batch = std::vector<Tensor>;

/// A source of examples (PyTorch's map-style Dataset): size() of them, example i from get(i).
/// Subclass it for your own data. With DataLoader workers, get and gather run on several threads
/// at once: they must not change shared state (a random augmentation should draw from a
/// generator seeded by the example's index, which also keeps a run reproducible).
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Number of examples.
  virtual int64_t size() const = 0;
  /// Example i: one tensor per field (an image, its label, ...); every example has the same fields
  /// with the same shapes.
  virtual Batch get(int64_t i) const = 0;
  /// Examples `rows` as a batch: each field's tensors stacked along a new first dim (PyTorch's
  /// default_collate); a ShapeError naming the examples whose fields do not match. Override it
  /// where a batch can be cut in one go (TensorDataset does).
  virtual Batch gather(const std::vector<int64_t>& rows) const;
};

/// Examples stored as tensors that share their first dimension (PyTorch's TensorDataset):
/// example i is row i of every tensor.
class TensorDataset : public Dataset {
 public:
  /// At least one tensor, each of at least one dimension, all of the same size along dim 0;
  /// a ShapeError otherwise.
  explicit TensorDataset(std::vector<Tensor> tensors);
  /// Number of examples.
  int64_t size() const override { return size_; }
  /// Example i: row i of every tensor (views, no copy); an IndexError out of range.
  Batch get(int64_t i) const override;
  /// The rows `index` (an int64 vector) of every tensor, gathered into new tensors.
  Batch gather(const Tensor& index) const;
  /// The same for rows given as numbers.
  Batch gather(const std::vector<int64_t>& rows) const override;
  /// The tensors themselves.
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  int64_t size_ = 0;
};

/// DataLoader's settings (PyTorch's names and defaults; the generator's seed instead of a generator).
struct DataLoaderOptions {
  /// Examples per batch (the last one may be smaller)
  int64_t batch_size = 1;
  /// A new seeded order every epoch; false: 0, 1, 2, ...
  bool shuffle = false;
  /// Drop a last batch smaller than batch_size.
  bool drop_last = false;
  /// The shuffle's generator.
  uint64_t seed = 0;
  /// Threads assembling batches ahead of the loop (0: the loop does it)
  int64_t num_workers = 0;
  /// Batches each worker may have ready ahead (with workers)
  int64_t prefetch_factor = 2;
};

class Prefetcher;

/// Splits a dataset into batches, one epoch per pass (PyTorch's DataLoader).
class DataLoader {
 public:
  /// A ValueError for batch_size < 1, num_workers < 0 or prefetch_factor < 1.
  DataLoader(TensorDataset dataset, DataLoaderOptions options = {});
  /// Over any dataset (shared: worker threads read it).
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});

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
  const Dataset& dataset() const { return *dataset_; }
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
    std::shared_ptr<Prefetcher> workers_;  // with num_workers > 0: the threads of this pass
  };
  /// Start a pass: the current epoch's order, after which epoch() moves on by one.
  Iterator begin();
  /// The end of a pass.
  Iterator end() const;

 private:
  friend class Prefetcher;
  Batch batch_of(const std::vector<int64_t>& order, int64_t i) const;
  // The dataset's size(), refused (ValueError) when negative.
  int64_t examples() const;
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
};

/// The worker threads of one pass (DataLoaderOptions::num_workers): worker w assembles batches
/// w, w + num_workers, ..., each at most num_workers * prefetch_factor batches ahead of the loop;
/// take(i) hands them over in order. A worker's error is thrown by take() at that batch.
/// Destroying it (the loop ended or was left) stops and joins the threads.
class Prefetcher {
 public:
  /// Start the workers on `order`'s batches.
  Prefetcher(const DataLoader& loader, std::vector<int64_t> order);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;
  /// Batch i (the next one in order), waiting for it if it is not ready yet.
  Batch take(int64_t i);

 private:
  void work(int64_t w);
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };
  const DataLoader& loader_;
  const std::vector<int64_t> order_;
  const int64_t batches_, workers_, depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int64_t, Slot> ready_;
  int64_t taken_ = 0;  // batches handed over so far
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace mg::data
