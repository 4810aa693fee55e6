// data::TensorDataset and data::DataLoader: batch sizes, the last batch, seeded shuffles that
// cover every example once per epoch, resuming at an epoch, bad settings; data::DistributedSampler's
// shards for 1, 2 and 3 ranks.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <set>
#include <thread>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using testing::HasSubstr;

namespace {
// Ten examples: x row i = (i, 10 i), label i.
data::TensorDataset ten() {
  std::vector<float> x;
  for (int i = 0; i < 10; ++i) x.push_back(static_cast<float>(i)), x.push_back(static_cast<float>(10 * i));
  return data::TensorDataset({from_vector(x, {10, 2}), arange(10, DType::Int64)});
}
std::vector<int64_t> labels(const data::Batch& b) { return b[1].to_vector<int64_t>(); }
}  // namespace

TEST(DataLoader, BatchesInOrderWithAShortLastBatch) {
  data::DataLoader loader(ten(), {.batch_size = 4});
  EXPECT_EQ(loader.size(), 3);
  std::vector<std::vector<int64_t>> seen;
  for (const data::Batch& b : loader) {
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[0].size(0), b[1].size(0));
    // The rows of a batch belong together: x = (label, 10 label).
    const auto l = labels(b);
    for (size_t r = 0; r < l.size(); ++r) {
      EXPECT_EQ(b[0].narrow(0, static_cast<int64_t>(r), 1).to_vector<float>(),
                (std::vector<float>{static_cast<float>(l[r]), static_cast<float>(10 * l[r])}));
    }
    seen.push_back(l);
  }
  EXPECT_EQ(seen, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  data::DataLoader dropping(ten(), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(dropping.size(), 2);
  int n = 0;
  for (const data::Batch& b : dropping) {
    EXPECT_EQ(b[0].size(0), 4);
    ++n;
  }
  EXPECT_EQ(n, 2);
  data::DataLoader exact(ten(), {.batch_size = 5, .drop_last = true});
  EXPECT_EQ(exact.size(), 2);
}

TEST(DataLoader, ShuffledEpochsCoverEveryExampleOnceInTheirOwnSeededOrder) {
  data::DataLoader a(ten(), {.batch_size = 3, .shuffle = true, .seed = 42});
  data::DataLoader b(ten(), {.batch_size = 3, .shuffle = true, .seed = 42});
  data::DataLoader c(ten(), {.batch_size = 3, .shuffle = true, .seed = 43});
  std::vector<std::vector<int64_t>> epochs_a, epochs_b, epochs_c;
  for (int e = 0; e < 3; ++e) {
    for (auto [loader, out] : {std::pair{&a, &epochs_a}, std::pair{&b, &epochs_b}, std::pair{&c, &epochs_c}}) {
      std::vector<int64_t> order;
      for (const data::Batch& batch : *loader)
        for (int64_t l : labels(batch)) order.push_back(l);
      out->push_back(order);
    }
    EXPECT_EQ(std::set<int64_t>(epochs_a[e].begin(), epochs_a[e].end()).size(), 10u);  // each example once
    EXPECT_EQ(epochs_a[e].size(), 10u);
  }
  EXPECT_EQ(epochs_a, epochs_b);        // same seed, same run
  EXPECT_NE(epochs_a, epochs_c);        // another seed, another run
  EXPECT_NE(epochs_a[0], epochs_a[1]);  // every epoch its own order
  std::vector<int64_t> identity(10);
  for (int i = 0; i < 10; ++i) identity[i] = i;
  EXPECT_NE(epochs_a[0], identity);
  // Resuming at epoch 2 gives epoch 2's order without running epochs 0 and 1.
  data::DataLoader resumed(ten(), {.batch_size = 3, .shuffle = true, .seed = 42});
  resumed.set_epoch(2);
  EXPECT_EQ(resumed.order(2), epochs_a[2]);
  std::vector<int64_t> order;
  for (const data::Batch& batch : resumed)
    for (int64_t l : labels(batch)) order.push_back(l);
  EXPECT_EQ(order, epochs_a[2]);
  EXPECT_EQ(resumed.epoch(), 3);
  EXPECT_EQ(labels(resumed.batch(2, 1)), std::vector<int64_t>(epochs_a[2].begin() + 3, epochs_a[2].begin() + 6));
}

TEST(DataLoader, BadDatasetsAndSettingsAreNamed) {
  auto error = [](auto&& make, const std::string& text) {
    try {
      make();
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
  };
  error([] { data::TensorDataset({}); }, "TensorDataset: needs at least one tensor");
  error(
      [] {
        data::TensorDataset({zeros({3, 2}), zeros({4})});
      },
      "TensorDataset: every tensor needs the same number of examples (dim 0); tensor 0 is (3, 2), tensor 1 is (4,)");
  error([] { data::TensorDataset({scalar_tensor(1.0)}); },
        "TensorDataset: tensor 0 must have a first dimension of examples");
  error([] { data::DataLoader(ten(), {.batch_size = 0}); }, "DataLoader: batch_size must be >= 1, got 0");
  error([] { ten().get(10); }, "TensorDataset: example 10 is out of range for 10 examples");
  error([] { data::DataLoader(ten(), {.batch_size = 4}).batch(0, 3); },
        "DataLoader: batch 3 is out of range for 3 batches");
  error([] { data::DataLoader(ten()).set_epoch(-1); }, "DataLoader: epoch must be >= 0, got -1");
  // An empty dataset is allowed: no batches.
  data::DataLoader empty(data::TensorDataset({zeros({0, 3})}), {.batch_size = 2});
  EXPECT_EQ(empty.size(), 0);
  int n = 0;
  for (const data::Batch& b : empty) (void)b, ++n;
  EXPECT_EQ(n, 0);
}

namespace {
// A user's dataset: example i is (a float64 pair (i, i^2), the label i % 3), made on demand; it
// counts the calls to get (from any thread), and fails at example `bad` if asked to.
class Squares : public data::Dataset {
 public:
  explicit Squares(int64_t n, int64_t bad = -1) : n_(n), bad_(bad) {}
  int64_t size() const override { return n_; }
  data::Batch get(int64_t i) const override {
    ++calls;
    MG_CHECK(i != bad_, ValueError, "Squares: example {} is unreadable", i);
    const double x = static_cast<double>(i);
    return {from_vector<double>({x, x * x}, {2}), full({}, static_cast<double>(i % 3), DType::Int64)};
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t n_, bad_;
};
}  // namespace

TEST(DataLoader, AUsersDatasetIsBatchedLikeATensorDataset) {
  auto squares = std::make_shared<Squares>(10);
  data::DataLoader loader(squares, {.batch_size = 4, .shuffle = true, .seed = 3});
  data::DataLoader same_order(ten(), {.batch_size = 4, .shuffle = true, .seed = 3});
  EXPECT_EQ(loader.size(), 3);
  std::vector<data::Batch> a, b;
  for (const data::Batch& x : loader) a.push_back(x);
  for (const data::Batch& x : same_order) b.push_back(x);
  ASSERT_EQ(a.size(), 3u);
  for (size_t k = 0; k < a.size(); ++k) {
    // the same seeded order as a TensorDataset of the same size; fields stacked along dim 0
    const std::vector<int64_t> ids = labels(b[k]);
    ASSERT_EQ(a[k][0].shape(), Shape({static_cast<int64_t>(ids.size()), 2}));
    const std::vector<double> xs = a[k][0].to_vector<double>();
    for (size_t j = 0; j < ids.size(); ++j) {
      EXPECT_EQ(xs[2 * j], static_cast<double>(ids[j]));
      EXPECT_EQ(xs[2 * j + 1], static_cast<double>(ids[j] * ids[j]));
      EXPECT_EQ(a[k][1].to_vector<int64_t>()[j], ids[j] % 3);
    }
  }
  EXPECT_EQ(squares->calls.load(), 10);
}

TEST(DataLoader, WorkersGiveTheSameBatchesInTheSameOrder) {
  auto squares = std::make_shared<Squares>(23);
  auto all = [&](int64_t workers, int64_t prefetch) {
    data::DataLoader loader(
        squares, {.batch_size = 3, .shuffle = true, .seed = 5, .num_workers = workers, .prefetch_factor = prefetch});
    std::vector<double> out;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (const data::Batch& b : loader)
        for (const Tensor& t : b)
          for (double v : t.to(DType::Float64).to_vector<double>()) out.push_back(v);
    return out;
  };
  const std::vector<double> serial = all(0, 2);
  EXPECT_EQ(serial.size(), 2u * 23 * 3);
  for (auto [w, p] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 2}, {3, 1}, {8, 4}}) {
    SCOPED_TRACE(w);
    EXPECT_EQ(all(w, p), serial);
  }
}

TEST(DataLoader, WorkersPrepareTheNextBatchWhileTheStepRuns) {
  auto squares = std::make_shared<Squares>(12);
  data::DataLoader loader(squares, {.batch_size = 2, .num_workers = 1, .prefetch_factor = 2});
  auto it = loader.begin();  // batch 0 is here
  // without the loop asking, the worker goes on to batches 1 and 2 (prefetch_factor 2), and no further
  for (int wait = 0; wait < 5000 && squares->calls.load() < 6; ++wait)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(squares->calls.load(), 6);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(squares->calls.load(), 6);  // room for two batches ahead, not more
  ++it;
  EXPECT_EQ(labels(*it), std::vector<int64_t>({2 % 3, 3 % 3}));
}

TEST(DataLoader, AWorkersErrorReachesTheLoopAtItsBatch) {
  auto squares = std::make_shared<Squares>(10, 5);  // example 5 is in batch 2
  data::DataLoader loader(squares, {.batch_size = 2, .num_workers = 2});
  int seen = 0;
  try {
    for (const data::Batch& b : loader) (void)b, ++seen;
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    // named as the loader's, with the dataset's own words and name kept (as PyTorch's "Caught ... in
    // DataLoader worker process")
    EXPECT_THAT(e.what(), HasSubstr("DataLoader: example 5 is unreadable (raised by its Squares)"));
  }
  EXPECT_EQ(seen, 2);  // batches 0 and 1 arrived first
  // leaving a pass early stops its workers (the loader's destructor does not hang)
  data::DataLoader early(std::make_shared<Squares>(100), {.batch_size = 1, .num_workers = 3});
  for (const data::Batch& b : early)
    if (labels(b)[0] == 1) break;
}

TEST(DataLoader, DatasetsThatCannotBeBatchedAreNamed) {
  struct Ragged : data::Dataset {
    int64_t size() const override { return 3; }
    data::Batch get(int64_t i) const override { return {zeros({i + 1})}; }
  };
  try {
    data::DataLoader(std::make_shared<Ragged>(), {.batch_size = 3}).batch(0, 0);
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("field 0 of example 1 is float32 (2,), but example 0 has float32 (1,)"));
  }
  EXPECT_THROW(data::DataLoader(nullptr), ValueError);
  EXPECT_THROW(data::DataLoader(ten(), {.num_workers = -1}), ValueError);
  EXPECT_THROW(data::DataLoader(ten(), {.num_workers = 2, .prefetch_factor = 0}), ValueError);
  // num_workers * prefetch_factor past int64 (it overflowed in the prefetcher before)
  try {
    data::DataLoader(ten(), {.num_workers = int64_t{1} << 40, .prefetch_factor = int64_t{1} << 40});
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("DataLoader: num_workers 1099511627776 times prefetch_factor 1099511627776"));
  }
  // a dataset whose size() is negative: a ValueError saying so (it was a MemoryError about the order)
  struct Negative : data::Dataset {
    int64_t size() const override { return -5; }
    data::Batch get(int64_t) const override { return {zeros({1})}; }
  };
  try {
    data::DataLoader(std::make_shared<Negative>());
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("DataLoader: the dataset's size() returned -5; expected a count >= 0"));
  }
}

TEST(DistributedSampler, ShardsAreDisjointAndCoverTheEpoch) {
  for (int N : {1, 2, 3})
    for (bool shuffle : {false, true})
      for (int64_t n : {10, 11, 0}) {
        std::multiset<int64_t> all;
        std::vector<int64_t> epoch0;
        for (int r = 0; r < N; ++r) {
          data::DistributedSampler s(n, N, r, shuffle, 9);
          const auto idx = s.indices();
          EXPECT_EQ(static_cast<int64_t>(idx.size()), s.num_samples());
          EXPECT_EQ(s.num_samples(), (n + N - 1) / N);
          all.insert(idx.begin(), idx.end());
          if (r == 0) epoch0 = idx;
          s.set_epoch(1);
          if (shuffle && n >= 10 && r == 0) EXPECT_NE(s.indices(), epoch0);  // another order next epoch
        }
        for (int64_t i = 0; i < n; ++i) EXPECT_GE(all.count(i), 1u) << i;                 // every example
        EXPECT_EQ(static_cast<int64_t>(all.size()), n == 0 ? 0 : ((n + N - 1) / N) * N);  // padded by repeats only
      }
  data::DistributedSampler drop(11, 3, 0, false, 0, true);
  EXPECT_EQ(drop.num_samples(), 11 / 3);
  EXPECT_THROW(data::DistributedSampler(5, 2, 2), ValueError);
  // sizes near 2^63: the padded epoch (n + N - 1 once overflowed) and an order too large to hold
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_THROW(data::DistributedSampler(kMax, 2, 0), ValueError);
  EXPECT_EQ(data::DistributedSampler(kMax, 2, 0, false, 0, true).num_samples(), kMax / 2);
  EXPECT_THROW(data::DistributedSampler(int64_t{1} << 62, 2, 0, false).indices(), MemoryError);
}

// An elastic restart: 3 ranks take 4 steps of a global batch of 12 (rank r reads b = 12/N indices
// per step), the run stops, and 2 ranks finish the epoch from position 4 x 12. Every sample of the
// epoch is read exactly once, and each step's global batch is the one one process would read.
TEST(DistributedSampler, AnEpochResumedOnFewerRanksReadsEverySampleOnce) {
  const int64_t n = 120, G = 12, done_steps = 4;
  data::DistributedSampler one(n, 1, 0, true, 5);
  one.set_epoch(2);
  const std::vector<int64_t> order = one.indices();  // one process: the global batches in order
  std::multiset<int64_t> seen;
  std::vector<std::vector<int64_t>> steps;  // each step's global batch, as the ranks read it
  auto run = [&](int N, int64_t start, int64_t num_steps) {
    std::vector<std::vector<int64_t>> mine;
    for (int r = 0; r < N; ++r) {
      data::DistributedSampler s(n, N, r, true, 5);
      s.set_epoch(2, start);
      EXPECT_EQ(s.num_samples(), (n - start) / N);
      mine.push_back(s.indices());
    }
    for (int64_t k = 0; k < num_steps; ++k) {
      std::vector<int64_t> batch;
      for (int r = 0; r < N; ++r)
        for (int64_t t = 0; t < G / N; ++t) batch.push_back(mine[r][k * (G / N) + t]);
      seen.insert(batch.begin(), batch.end());
      std::sort(batch.begin(), batch.end());
      steps.push_back(batch);
    }
  };
  run(3, 0, done_steps);
  run(2, done_steps * G, n / G - done_steps);
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
  for (size_t k = 0; k < steps.size(); ++k) {
    std::vector<int64_t> expected(order.begin() + static_cast<int64_t>(k) * G,
                                  order.begin() + static_cast<int64_t>(k + 1) * G);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(steps[k], expected) << "step " << k;
  }
  // the end of an epoch is a valid start (nothing left); past it is not
  data::DistributedSampler s(n, 2, 1);
  s.set_epoch(0, n);
  EXPECT_TRUE(s.indices().empty());
  EXPECT_THROW(s.set_epoch(0, n + 1), ValueError);
  EXPECT_THROW(s.set_epoch(0, -1), ValueError);
  // a remainder that does not divide is padded from the rest of the epoch, as a whole epoch is
  data::DistributedSampler pad(10, 3, 2, false);
  pad.set_epoch(0, 5);  // 5 left for 3 ranks: positions 5..9 then 5 again
  EXPECT_EQ(pad.indices(), (std::vector<int64_t>{7, 5}));
}
