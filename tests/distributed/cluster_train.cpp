// A small data-parallel training run for the multi-host tests (tests/distributed/cluster_tests.sh):
// an MLP fitted to a synthetic regression set of 240 samples with AdamW in float64, a global batch
// of 12 per step shared out by data::DistributedSampler (20 steps an epoch), rank 0 writing a
// checkpoint after every step. Started without mpirun it is the one-process reference.
//
//   cluster_train --out DIR --steps S [--resume] [--zero] [--hidden H] [--step-ms T] [--late-rank R --late-ms T]
//   cluster_train --compare A B        exit 0 if two saved models agree to 1e-12, else 1
//   cluster_train --check CHECKPOINT   exit 0 if the checkpoint loads into the model, else 1
//   cluster_train --count DIR STEPS CHECKPOINT_STEP W1 W2
//                                      exit 0 if a run on W1 processes up to CHECKPOINT_STEP, then
//                                      resumed on W2 up to STEPS, trained on every sample exactly
//                                      once per epoch (read from the samples files), else 1
//
// What the tests read back (DIR is shared by the ranks: the "hosts" share one file system):
//   DIR/checkpoint.safetensors   rank 0's, after every step (written atomically)
//   DIR/final.safetensors        rank 0's model after the last step
//   DIR/samples.<world>.<rank>   one line per step: "<step> <index> <index> ...", the samples this
//                                rank (of a run on <world> processes) read, written before the
//                                step's all-reduce
//   DIR/error.<rank>             an error that ended the run on this rank: "<unix time> <message>"
//
// --resume continues from DIR/checkpoint.safetensors on however many processes run now: the step
// count gives the epoch and the position in it (step x 12), and the sampler shares out the rest of
// that epoch among the new ranks (an elastic restart: no sample skipped or read twice).
// --zero trains with distributed::ZeroRedundancyOptimizer (AdamW's state sharded over the ranks,
// checkpoints consolidated) instead of DistributedDataParallel and a whole AdamW on every rank.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "minigrad/data/sampler.h"
#include "minigrad/distributed/ddp.h"
#include "minigrad/distributed/zero.h"
#include "minigrad/minigrad.h"

using namespace mg;
namespace dist = mg::distributed;

namespace {
constexpr int64_t kSamples = 240, kGlobalBatch = 12, kStepsPerEpoch = kSamples / kGlobalBatch;

struct MLP : nn::Callable<MLP> {
  nn::Linear fc1, fc2, fc3;
  MLP(int64_t hidden, Generator& g) : fc1(6, hidden, {}, g), fc2(hidden, hidden, {}, g), fc3(hidden, 3, {}, g) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  Variable forward(const Variable& x) const { return fc3(tanh(fc2(tanh(fc1(x))))); }
  std::string type_name() const override { return "MLP"; }
};

struct Args {
  std::string out, compare_a, compare_b, check, count;
  int64_t steps = 20, hidden = 64, step_ms = 0, late_rank = -1, late_ms = 0, ckpt_step = 0, w1 = 0, w2 = 0;
  bool resume = false, zero = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      MG_CHECK(i + 1 < argc, ValueError, "cluster_train: {} needs a value", k);
      return argv[++i];
    };
    if (k == "--out")
      a.out = value();
    else if (k == "--steps")
      a.steps = std::stoll(value());
    else if (k == "--hidden")
      a.hidden = std::stoll(value());
    else if (k == "--step-ms")
      a.step_ms = std::stoll(value());
    else if (k == "--late-rank")
      a.late_rank = std::stoll(value());
    else if (k == "--late-ms")
      a.late_ms = std::stoll(value());
    else if (k == "--resume")
      a.resume = true;
    else if (k == "--zero")
      a.zero = true;
    else if (k == "--check")
      a.check = value();
    else if (k == "--count") {
      a.count = value();
      a.steps = std::stoll(value());
      a.ckpt_step = std::stoll(value());
      a.w1 = std::stoll(value());
      a.w2 = std::stoll(value());
    } else if (k == "--compare") {
      a.compare_a = value();
      a.compare_b = value();
    } else {
      throw ValueError("cluster_train: unknown argument " + k);
    }
  }
  return a;
}

// The two saved models' largest difference.
int compare(const std::string& a, const std::string& b) {
  const SafeTensors fa = load_safetensors(a), fb = load_safetensors(b);
  double worst = 0;
  for (auto& [name, t] : fa.tensors) {
    const Tensor u = fb.find(name);
    if (!u.defined() || u.shape() != t.shape()) return 1;
    worst = std::max(worst, max(abs(t.to(DType::Float64) - u.to(DType::Float64))).item());
  }
  std::printf("largest difference %.3g over %zu tensors\n", worst, fa.tensors.size());
  return fa.tensors.size() == fb.tensors.size() && worst <= 1e-12 ? 0 : 1;
}

// The samples each step trained on, over both runs: steps before the checkpoint from the first run's
// files (a step it finished after its last checkpoint was done again by the second), the rest from
// the second's. Every step must have its 12, and each epoch's steps every sample once.
int count(const Args& a) {
  std::map<int64_t, std::vector<int64_t>> steps;
  auto read = [&](int64_t world, int64_t from, int64_t to) {
    for (int64_t r = 0; r < world; ++r) {
      std::ifstream in(a.count + "/samples." + std::to_string(world) + "." + std::to_string(r));
      for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        int64_t step = 0, i = 0;
        words >> step;
        if (step < from || step >= to) continue;
        while (words >> i) steps[step].push_back(i);
      }
    }
  };
  read(a.w1, 0, a.ckpt_step);
  read(a.w2, a.ckpt_step, a.steps);
  for (int64_t s = 0; s < a.steps; ++s)
    if (static_cast<int64_t>(steps[s].size()) != kGlobalBatch) {
      std::printf("step %lld trained on %zu samples, not %lld\n", static_cast<long long>(s), steps[s].size(),
                  static_cast<long long>(kGlobalBatch));
      return 1;
    }
  for (int64_t e = 0; e * kStepsPerEpoch < a.steps; ++e) {
    std::vector<int64_t> times(kSamples, 0);
    for (int64_t s = e * kStepsPerEpoch; s < std::min(a.steps, (e + 1) * kStepsPerEpoch); ++s)
      for (int64_t i : steps[s]) ++times.at(i);
    for (int64_t i = 0; i < kSamples && (e + 1) * kStepsPerEpoch <= a.steps; ++i)
      if (times[i] != 1) {
        std::printf("epoch %lld: sample %lld trained on %lld times\n", static_cast<long long>(e),
                    static_cast<long long>(i), static_cast<long long>(times[i]));
        return 1;
      }
  }
  std::printf(
      "%lld steps: every one of %lld samples trained on once per epoch (steps 0-%lld on %lld processes, "
      "%lld-%lld on %lld)\n",
      static_cast<long long>(a.steps), static_cast<long long>(kSamples), static_cast<long long>(a.ckpt_step - 1),
      static_cast<long long>(a.w1), static_cast<long long>(a.ckpt_step), static_cast<long long>(a.steps - 1),
      static_cast<long long>(a.w2));
  return 0;
}

int train(const Args& a) {
  const int rank = dist::rank(), world = dist::world_size();
  MG_CHECK(kGlobalBatch % world == 0, ValueError, "cluster_train: {} processes do not divide the global batch {}",
           world, kGlobalBatch);
  if (rank == a.late_rank) std::this_thread::sleep_for(std::chrono::milliseconds(a.late_ms));
  Generator g(1), gd(2);
  MLP model(a.hidden, g);
  model.to(DType::Float64);
  const Tensor x = randn({kSamples, 6}, gd).to(DType::Float64);
  const Tensor y = sin(x.narrow(1, 0, 3) * 2.0) + x.narrow(1, 3, 3) * 0.5;
  auto adamw = [](const std::vector<Variable>& params) {
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 3e-3});
  };
  // Plain data parallelism (every rank a whole AdamW), or ZeRO-1 (each rank its shard's)
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<dist::ZeroRedundancyOptimizer> zero;
  if (a.zero) {
    zero = std::make_unique<dist::ZeroRedundancyOptimizer>(model, adamw);
  } else {
    ddp = std::make_unique<dist::DistributedDataParallel>(model);
    opt = adamw(model.parameters());
  }
  const std::string ckpt = a.out + "/checkpoint.safetensors";
  int64_t step = 0;
  if (a.resume) step = zero ? zero->load_checkpoint(ckpt) : optim::load_checkpoint(ckpt, model, *opt);
  data::DistributedSampler sampler(kSamples, world, rank, true, 7);
  std::ofstream log(a.out + "/samples." + std::to_string(world) + "." + std::to_string(rank), std::ios::app);
  const int64_t per_rank = kGlobalBatch / world;
  for (; step < a.steps; ++step) {
    // This step's global batch is positions (step mod 20) x 12 ... + 11 of the epoch's order,
    // whatever the number of ranks: rank r reads every world-th of them from position r.
    sampler.set_epoch(step / kStepsPerEpoch, (step % kStepsPerEpoch) * kGlobalBatch);
    std::vector<int64_t> mine = sampler.indices();
    mine.resize(per_rank);
    // Logged before the step's all-reduce: a step rank 0 finished (and checkpointed) had every
    // rank's samples, and every rank has written them by then.
    log << step;
    for (int64_t i : mine) log << ' ' << i;
    log << std::endl;
    const Tensor idx = from_vector(mine, {per_rank});
    const Variable d = model(Variable(x.index_select(0, idx))) - Variable(y.index_select(0, idx));
    Variable loss = mean(d * d);
    if (zero) {
      zero->zero_grad();
      loss.backward();
      zero->step();
    } else {
      opt->zero_grad();
      loss.backward();
      ddp->wait();
      opt->step();
    }
    if (zero)
      zero->save_checkpoint(ckpt, step + 1);  // every rank: the shards' state is gathered to rank 0
    else if (rank == 0)
      optim::save_checkpoint(ckpt, model, *opt, step + 1);
    if (a.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.step_ms));
  }
  if (rank == 0) nn::save(model, a.out + "/final.safetensors");
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    a = parse(argc, argv);
    if (!a.compare_a.empty()) return compare(a.compare_a, a.compare_b);
    if (!a.count.empty()) return count(a);
    if (!a.check.empty()) {
      Generator g(1);
      MLP model(std::stoll(std::getenv("MG_HIDDEN") ? std::getenv("MG_HIDDEN") : "64"), g);
      model.to(DType::Float64);
      optim::AdamW opt(model.parameters(), {.lr = 3e-3});
      std::printf("checkpoint at step %lld\n", static_cast<long long>(optim::load_checkpoint(a.check, model, opt)));
      return 0;
    }
    MG_CHECK(!a.out.empty(), ValueError, "cluster_train: --out DIR is required");
    std::filesystem::create_directories(a.out);
    dist::init(&argc, &argv);
    return train(a);
  } catch (const Error& e) {
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::fprintf(stderr, "cluster_train rank %d: %s\n", dist::rank(), e.what());
    if (!a.out.empty()) {
      std::ofstream(a.out + "/error." + std::to_string(dist::rank())) << std::fixed << now << ' ' << e.what() << '\n';
    }
    return 2;  // finalize(), at exit, ends the other processes when a collective failed
  }
}
