// Data parallelism across processes, run by ctest under `mpirun --oversubscribe -np 2` and `-np 3`.
// Every process runs every test; a test fails if it fails on any rank (each prints its own). The
// single-process references are computed in each process, without MPI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include <unistd.h>

#include "helpers.h"
#include "minigrad/distributed/ddp.h"
#include "minigrad/distributed/zero.h"
#include "minigrad/minigrad.h"

using namespace mg;
namespace dist = mg::distributed;

namespace {

// A small MLP whose layers give several buckets with a small bucket_cap_mb.
struct Net : nn::Callable<Net> {
  nn::Linear fc1, fc2, fc3;
  Net(Generator& g, int64_t hidden = 16) : fc1(6, hidden, {}, g), fc2(hidden, hidden, {}, g), fc3(hidden, 3, {}, g) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  Variable forward(const Variable& x) const { return fc3(tanh(fc2(tanh(fc1(x))))); }
  std::string type_name() const override { return "Net"; }
};

// mean squared error of net on rows [r0, r1) of (x, y)
Variable loss_on(const Net& net, const Tensor& x, const Tensor& y, int64_t r0, int64_t r1) {
  const Variable d = net(Variable(x.narrow(0, r0, r1 - r0))) - Variable(y.narrow(0, r0, r1 - r0));
  return mean(d * d);
}

std::vector<Tensor> params_of(const Net& net) {
  std::vector<Tensor> out;
  for (const Variable& p : net.parameters()) out.push_back(p.data().clone());
  return out;
}

// 20 AdamW steps on the whole batch in one process, or on this rank's shard under DDP.
// 20 AdamW steps; with clip > 0, the (averaged) gradient clipped to that norm before each.
std::vector<Tensor> train(DType dt, bool ddp_run, double bucket_mb = 25, double clip = 0) {
  Generator g(42 + (ddp_run ? dist::rank() : 0));  // different starting weights per rank: DDP must broadcast rank 0's
  Generator g0(42);
  Net net(ddp_run ? g : g0);
  net.to(dt);
  const int64_t B = 12;  // divisible by 2 and 3
  Generator gd(7);
  const Tensor x = randn({B, 6}, gd).to(dt), y = randn({B, 3}, gd).to(dt);
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  if (ddp_run) ddp = std::make_unique<dist::DistributedDataParallel>(net, dist::DDPOptions{.bucket_cap_mb = bucket_mb});
  optim::AdamW opt(net.parameters(), {.lr = 1e-2});
  const int64_t n = ddp_run ? dist::world_size() : 1, r = ddp_run ? dist::rank() : 0, shard = B / n;
  for (int step = 0; step < 20; ++step) {
    Variable l = loss_on(net, x, y, r * shard, (r + 1) * shard);
    opt.zero_grad();
    l.backward();
    if (ddp) ddp->wait();
    if (clip > 0) optim::clip_grad_norm_(net.parameters(), clip);
    opt.step();
  }
  return params_of(net);
}

// A file name every rank of this run agrees on and no other run uses (ctest runs DDP.Processes2 and
// Cluster.hosts2 at once): rank 0's process id.
std::string shared_path(const std::string& name) {
  const int64_t id = dist::all_gather({static_cast<int64_t>(::getpid())})[0];
  return ::testing::TempDir() + name + "_" + std::to_string(id) + ".safetensors";
}

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) mgtest::expect_close(a[i], b[i], tol, tol);
}

}  // namespace

TEST(DDP, RunsUnderSeveralProcesses) {
  EXPECT_GE(dist::world_size(), 2) << "run this binary under mpirun -np 2 (or more)";
  EXPECT_GE(dist::rank(), 0);
  EXPECT_LT(dist::rank(), dist::world_size());
}

TEST(DDP, ShardsGiveTheSameParametersAsOneProcessOnTheWholeBatch) {
  expect_same(train(DType::Float64, true), train(DType::Float64, false), 1e-12);
  expect_same(train(DType::Float32, true), train(DType::Float32, false), 1e-6);
  // with one bucket per parameter (several all-reduces under way at once) too
  expect_same(train(DType::Float64, true, 1e-6), train(DType::Float64, false), 1e-12);
}

TEST(DDP, BucketsStartBeforeTheBackwardHasFinished) {
  Generator g(1);
  Net net(g, 64);
  dist::DistributedDataParallel ddp(net, {.bucket_cap_mb = 0.01});  // 10 KiB: fc3+fc2.bias, fc2.weight, ...
  ASSERT_GE(ddp.num_buckets(), 3);
  // bucket 0 holds the last layer's parameters: the first gradients the backward makes
  EXPECT_EQ(ddp.bucket(0).front(), ddp.num_params() - 1);
  Generator gd(3);
  Variable l = loss_on(net, randn({8, 6}, gd), randn({8, 3}, gd), 0, 8);
  l.backward();
  const auto& ev = ddp.events();
  int64_t first_start = -1;
  for (size_t i = 0; i < ev.size(); ++i)
    if (ev[i].kind == dist::DDPEvent::BucketStarted) {
      first_start = static_cast<int64_t>(i);
      break;
    }
  ASSERT_GE(first_start, 0);
  // when bucket 0 started, gradients of other parameters were still to come
  EXPECT_EQ(ev[first_start].bucket, 0);
  EXPECT_LT(ev[first_start].ready_params, ddp.num_params());
  bool grad_after_start = false;
  for (size_t i = first_start + 1; i < ev.size(); ++i) grad_after_start |= ev[i].kind == dist::DDPEvent::GradReady;
  EXPECT_TRUE(grad_after_start);
  // every bucket started in order, and finished
  int64_t started = 0, finished = 0;
  for (const auto& e : ev) {
    if (e.kind == dist::DDPEvent::BucketStarted) EXPECT_EQ(e.bucket, started++);
    if (e.kind == dist::DDPEvent::BucketFinished) ++finished;
  }
  EXPECT_EQ(started, ddp.num_buckets());
  EXPECT_EQ(finished, ddp.num_buckets());
}

TEST(DDP, NoSyncAccumulationEqualsOneStepOnTheConcatenatedBatch) {
  // k = 3 micro-batches of 2 rows per rank, accumulated under no_sync (loss / k each), then one
  // step; against one process taking one step on all k * 2 * N rows.
  const int64_t k = 3, m = 2, N = dist::world_size(), r = dist::rank();
  Generator gd(11);
  const Tensor x = randn({k * m * N, 6}, gd).to(DType::Float64), y = randn({k * m * N, 3}, gd).to(DType::Float64);
  auto one_step = [&](bool ddp_run) {
    Generator g(5);
    Net net(g);
    net.to(DType::Float64);
    std::unique_ptr<dist::DistributedDataParallel> ddp;
    if (ddp_run) ddp = std::make_unique<dist::DistributedDataParallel>(net);
    optim::AdamW opt(net.parameters(), {.lr = 1e-2});
    opt.zero_grad();
    if (ddp_run) {
      // this rank's rows: micro-batch j is rows [(j * N + r) * m, ... + m)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t r0 = (j * N + r) * m;
        Variable l = loss_on(net, x, y, r0, r0 + m) * (1.0 / k);
        if (j < k - 1) {
          auto guard = ddp->no_sync();
          l.backward();
        } else {
          l.backward();
        }
      }
      ddp->wait();
    } else {
      loss_on(net, x, y, 0, k * m * N).backward();
    }
    opt.step();
    return params_of(net);
  };
  expect_same(one_step(true), one_step(false), 1e-12);
}

TEST(DDP, ResumingFromRankZerosCheckpointContinuesTheSameRun) {
  // 4 steps, rank 0 saves a checkpoint, every rank loads it into a fresh model and optimizer and
  // takes 4 more: the same parameters as 8 steps straight (same world size).
  const std::string path = shared_path("ddp_resume");
  const int64_t N = dist::world_size(), r = dist::rank(), B = 12, shard = B / N;
  Generator gd(9);
  const Tensor x = randn({B, 6}, gd).to(DType::Float64), y = randn({B, 3}, gd).to(DType::Float64);
  auto run = [&](int from, int to, bool load, bool save) {
    Generator g(4);
    Net net(g);
    net.to(DType::Float64);
    optim::AdamW opt(net.parameters(), {.lr = 1e-2});
    if (load) optim::load_checkpoint(path, net, opt);
    dist::DistributedDataParallel ddp(net);
    for (int step = from; step < to; ++step) {
      Variable l = loss_on(net, x, y, r * shard, (r + 1) * shard);
      opt.zero_grad();
      l.backward();
      ddp.wait();
      opt.step();
    }
    if (save && dist::is_main_process()) optim::save_checkpoint(path, net, opt, to);
    dist::barrier();  // the file is complete before anyone reads it
    return params_of(net);
  };
  const auto straight = run(0, 8, false, false);
  run(0, 4, false, true);
  expect_same(run(4, 8, true, false), straight, 1e-12);
  dist::barrier();
  if (dist::is_main_process()) std::remove(path.c_str());
}

TEST(DDP, ItsInPlaceWritesCountAsVersions) {
  // DDP writes into tensors the rest of the program holds: the parameters when it broadcasts rank
  // 0's values, the gradients when it writes their averages back. Both move the version counters
  // (Storage::version), so a graph that read the weights before the broadcast refuses its backward,
  // on every rank alike (a rank that went on alone would wait for the others' all-reduce).
  Generator g(5);
  Net net(g);
  Generator gd(6);
  const Tensor x = randn({4, 6}, gd), y = randn({4, 3}, gd);
  Variable early = loss_on(net, x, y, 0, 4);
  const uint64_t before = net.fc3.weight.data().version();
  dist::DistributedDataParallel ddp(net);
  EXPECT_GT(net.fc3.weight.data().version(), before);
  try {
    early.backward();
    ADD_FAILURE() << "a graph built before DDP set the weights ran its backward";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("'linear'"), std::string::npos) << e.what();
  }
  // the ordinary step: the averaged gradients are written in place, after the backward that made them
  Variable l = loss_on(net, x, y, 0, 4);
  l.backward();
  ddp.wait();
  // a gradient starts at version 0 when backward makes it; the average was copied into it
  if (dist::world_size() > 1) EXPECT_GT(net.fc1.weight.grad().version(), 0u);
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  EXPECT_NO_THROW(opt.step());
  Variable again = loss_on(net, x, y, 0, 4);  // a new graph after the step: nothing to refuse
  opt.zero_grad();
  EXPECT_NO_THROW(again.backward());
  ddp.wait();
}

TEST(DDP, DifferentModelsAreATypedErrorOnEveryRank) {
  Generator g(0);
  nn::Linear lin(4, dist::rank() == 1 ? 5 : 6, {}, g);  // rank 1 differs
  try {
    dist::DistributedDataParallel ddp(lin);
    ADD_FAILURE() << "no error on rank " << dist::rank();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("different models"), std::string::npos) << e.what();
  }
  // the same layers in another dtype on rank 1 are another model too
  nn::Linear same(4, 6, {}, g);
  if (dist::rank() == 1) same.to(DType::Float64);
  EXPECT_THROW(dist::DistributedDataParallel ddp(same), ShapeError);
  // and the processes can go on afterwards: a collective still works
  Tensor t = full({3}, 1.0, DType::Float64);
  dist::all_reduce_sum(t);
  EXPECT_EQ(t.at({0}), dist::world_size());
}

TEST(DDP, ParametersStartFromRankZeros) {
  Generator g(100 + dist::rank());
  Net net(g);
  dist::DistributedDataParallel ddp(net);
  Generator g0(100);
  Net ref(g0);
  expect_same(params_of(net), params_of(ref), 0);
}

TEST(DDP, AParameterWithoutAGradientIsNamedInWaitAndTheNextStepStartsClean) {
  Generator g(2);
  Net net(g);
  dist::DistributedDataParallel ddp(net, {.bucket_cap_mb = 1e-6});  // one bucket per parameter: fc3's start
  Generator gd(3);
  // fc3 only: fc1 and fc2 get no gradient
  Variable l = mean(net.fc3(Variable(randn({4, 16}, gd))));
  l.backward();
  EXPECT_GT(ddp.events().size(), 0u);
  try {
    ddp.wait();
    ADD_FAILURE() << "no error";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("fc1.weight"), std::string::npos) << e.what();
  }
  // The buckets that had started were finished; a whole step now works, and every rank holds the
  // same averaged gradient.
  net.zero_grad();
  const Tensor x = randn({4, 6}, gd).narrow(0, 0, 4);
  mean(net(Variable(x * (1.0 + dist::rank())))).backward();  // different data per rank
  EXPECT_NO_THROW(ddp.wait());
  const Tensor mine = net.fc1.weight.grad().clone(), total = mine.clone();
  dist::all_reduce_sum(total);
  mgtest::expect_close(total * (1.0 / dist::world_size()), mine, 1e-6, 1e-6);
}

TEST(DDP, FrozenParametersAreCheckedAndBroadcastToo) {
  Generator g(50 + dist::rank());  // different weights per rank
  Net net(g);
  net.fc1.weight.set_requires_grad(false);
  dist::DistributedDataParallel ddp(net);
  EXPECT_EQ(ddp.num_params(), 5);  // fc1.weight is not averaged
  Generator g0(50);
  Net ref(g0);
  mgtest::expect_close(net.fc1.weight.data(), ref.fc1.weight.data(), 0, 0);  // but it is rank 0's
}

// ---- ZeRO stage 1 (distributed/zero.h): the optimizer state sharded over the processes

namespace {
dist::ZeroRedundancyOptimizer::OptimizerFactory adamw(double lr = 1e-2) {
  return [lr](const std::vector<Variable>& params) {
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = lr});
  };
}

// Steps [from, to) of the same problem as train(): ZeRO on this rank's shard of the batch; with
// clip > 0 the averaged gradient clipped first; with a schedule, the rate halved every 3 steps.
std::vector<Tensor> train_zero(DType dt, int from = 0, int to = 20, const std::string& load = "",
                               const std::string& save = "", double clip = 0, bool schedule = false) {
  Generator g(42 + dist::rank());  // different starting weights per rank: ZeRO must broadcast rank 0's
  Net net(g);
  net.to(dt);
  const int64_t B = 12, n = dist::world_size(), r = dist::rank(), shard = B / n;
  Generator gd(7);
  const Tensor x = randn({B, 6}, gd).to(dt), y = randn({B, 3}, gd).to(dt);
  dist::ZeroRedundancyOptimizer opt(net, adamw());
  std::unique_ptr<optim::StepLR> sched;
  if (schedule) sched = std::make_unique<optim::StepLR>(opt.local_optimizer(), 3, 0.5);
  if (!load.empty()) EXPECT_EQ(opt.load_checkpoint(load, sched.get()), from);
  for (int step = from; step < to; ++step) {
    Variable l = loss_on(net, x, y, r * shard, (r + 1) * shard);
    opt.zero_grad();
    l.backward();
    if (clip > 0) opt.clip_grad_norm_(clip);
    opt.step();
    if (sched) sched->step();
  }
  if (!save.empty()) opt.save_checkpoint(save, to, sched.get());
  return params_of(net);
}
}  // namespace

TEST(ZeRO, SameParametersAsDDPAndAsOneProcess) {
  const auto zero = train_zero(DType::Float64);
  expect_same(zero, train(DType::Float64, true), 1e-12);
  expect_same(zero, train(DType::Float64, false), 1e-12);
  expect_same(train_zero(DType::Float32), train(DType::Float32, false), 1e-6);
  // clipped to a norm the gradients exceed: ZeRO's clip_grad_norm_ is DDP's followed by clipping
  const auto clipped = train_zero(DType::Float64, 0, 20, "", "", 0.05);
  expect_same(clipped, train(DType::Float64, true, 25, 0.05), 1e-12);
  EXPECT_GT(max(abs(clipped[0] - zero[0])).item(), 1e-6);  // and the clipping acted
}

TEST(ZeRO, EachProcessHoldsAboutOneNthOfTheOptimizerState) {
  Generator g(3);
  Net net(g, 64);
  net.to(DType::Float64);
  dist::ZeroRedundancyOptimizer opt(net, adamw());
  Generator gd(4);
  opt.zero_grad();
  loss_on(net, randn({6, 6}, gd).to(DType::Float64), randn({6, 3}, gd).to(DType::Float64), 0, 6).backward();
  opt.step();
  // AdamW keeps exp_avg and exp_avg_sq (8 bytes each per element) and a step count: a whole
  // model's worth in one process, a shard's in each here
  int64_t elements = 0;
  for (const Variable& p : net.parameters()) elements += p.numel();
  const int64_t whole = elements * 16 + 6 * 8, N = dist::world_size();
  const std::vector<int64_t>& counts = opt.shard_sizes();
  ASSERT_EQ(static_cast<int64_t>(counts.size()), N);
  int64_t sum = 0;
  for (int64_t c : counts) {
    EXPECT_LE(std::abs(c - elements / N), 1);  // equal shards, whatever the parameters' sizes
    sum += c;
  }
  EXPECT_EQ(sum, elements);
  EXPECT_EQ(opt.state_bytes(), counts[dist::rank()] * 16 + 8);
  const std::vector<int64_t> bytes = dist::all_gather({opt.state_bytes()});
  if (dist::is_main_process()) {
    std::printf("AdamW state: %lld bytes in one process; per rank of %lld:", static_cast<long long>(whole),
                static_cast<long long>(N));
    for (int64_t b : bytes) std::printf(" %lld (%.3f)", static_cast<long long>(b), double(b) / whole);
    std::printf("\n");
  }
}

TEST(ZeRO, ACheckpointIsOneProcessesAndResumesWithOrWithoutZeRO) {
  const std::string path = shared_path("zero_resume");
  const auto straight = train_zero(DType::Float64, 0, 20);
  train_zero(DType::Float64, 0, 10, "", path);  // consolidated by rank 0; complete when save returns
  expect_same(train_zero(DType::Float64, 10, 20, path), straight, 1e-12);
  // with a schedule on the shard's optimizer: saved, loaded, and the rate where it was
  const auto scheduled = train_zero(DType::Float64, 0, 20, "", "", 0, true);
  train_zero(DType::Float64, 0, 10, "", path, 0, true);
  expect_same(train_zero(DType::Float64, 10, 20, path, "", 0, true), scheduled, 1e-12);
  train_zero(DType::Float64, 0, 10, "", path);  // the file again without a schedule, for the rest
  // The same file is an ordinary checkpoint: one process with a plain AdamW, on the whole batch,
  // continues the same run.
  Generator g(0);
  Net net(g);
  net.to(DType::Float64);
  optim::AdamW opt(net.parameters(), {.lr = 1e-2});
  EXPECT_EQ(optim::load_checkpoint(path, net, opt), 10);
  Generator gd(7);
  const Tensor x = randn({12, 6}, gd).to(DType::Float64), y = randn({12, 3}, gd).to(DType::Float64);
  for (int step = 10; step < 20; ++step) {
    Variable l = loss_on(net, x, y, 0, 12);
    opt.zero_grad();
    l.backward();
    opt.step();
  }
  expect_same(params_of(net), straight, 1e-12);
  dist::barrier();
  if (dist::is_main_process()) std::remove(path.c_str());
}

TEST(ZeRO, AFileOneRankCannotReadIsAnErrorOnEveryRankAndLoadsNothing) {
  const std::string path = shared_path("zero_partial");
  train_zero(DType::Float64, 0, 3, "", path);
  Generator g(9);
  Net net(g);
  net.to(DType::Float64);
  dist::ZeroRedundancyOptimizer opt(net, adamw());
  const auto before = params_of(net);
  // rank 1 is given a file that is not there (as if it were on another machine's disk)
  try {
    opt.load_checkpoint(dist::rank() == 1 ? path + ".missing" : path);
    ADD_FAILURE() << "no error on rank " << dist::rank();
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(dist::rank() == 1 ? "missing" : "rank 1 could not read"), std::string::npos)
        << e.what();
  }
  expect_same(params_of(net), before, 0);  // nothing loaded anywhere
  dist::barrier();
  if (dist::is_main_process()) std::remove(path.c_str());
}

TEST(Collectives, EmptyViewsPassThroughReduceScatterAndAllGather) {
  // Tensors with no elements, at an offset into storage that holds nothing: the collectives once
  // passed MPI null plus the offset (undefined; clang's UBSan in make test's sanitizer build reports it).
  const std::vector<int64_t> none(static_cast<size_t>(dist::world_size()), 0);
  const Tensor in = zeros({0, 16}).narrow(1, 8, 4), out = zeros({0, 16}).narrow(1, 4, 4);
  ASSERT_EQ(in.offset(), 8);
  dist::reduce_scatter_sum(in, out, none);
  dist::all_gather_into(out, in, none);
  EXPECT_EQ(in.shape(), (Shape{0, 4}));
  EXPECT_EQ(out.shape(), (Shape{0, 4}));
}

TEST(ZeRO, BadUseIsATypedErrorOnEveryRank) {
  Generator g(5);
  Net net(g);
  dist::ZeroRedundancyOptimizer opt(net, adamw());
  opt.zero_grad();
  mean(net.fc3(Variable(randn({2, 16}, g)))).backward();  // fc1 and fc2 get no gradient
  try {
    opt.step();
    ADD_FAILURE() << "no error";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("fc1.weight"), std::string::npos) << e.what();
  }
  nn::Linear tiny(1, 1, {.bias = false}, g);  // one element for 2 or 3 processes
  EXPECT_THROW(dist::ZeroRedundancyOptimizer(tiny, adamw()), ValueError);
  Net mixed(g);
  mixed.fc2.to(DType::Float64);  // the same on every rank: the check is before any communication
  EXPECT_THROW(dist::ZeroRedundancyOptimizer(mixed, adamw()), DTypeError);
  // the processes can go on afterwards: a collective still works
  Tensor t = full({1}, 1.0, DType::Float64);
  dist::all_reduce_sum(t);
  EXPECT_EQ(t.at({0}), dist::world_size());
}

// Prints a failing assertion with the rank it happened on (for the ranks other than 0).
struct FailurePrinter : ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", dist::rank(), r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.message());
  }
};

int main(int argc, char** argv) {
  dist::init(&argc, &argv);
  set_num_threads(1);  // several processes share the cores
  ::testing::InitGoogleTest(&argc, argv);
  // only rank 0 prints the passing tests; every rank prints its failures
  if (dist::rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  const int rc = RUN_ALL_TESTS();
  // a failure on any rank fails the run everywhere
  Tensor failed = full({1}, rc != 0 ? 1 : 0, DType::Int64);
  dist::all_reduce_sum(failed);
  if (failed.at({0}) > 0 && dist::rank() == 0 && rc == 0) std::fprintf(stderr, "a test failed on another rank\n");
  return failed.at({0}) > 0 ? 1 : 0;
}
