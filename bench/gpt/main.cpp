// bench/gpt: training-step time of the GPT in bench/torch_gpt_ref.py (PyTorch), built from
// minigrad's nn modules (models::GPT): token + position embeddings, pre-LN blocks (causal multi-head
// attention, GELU MLP 4x), final LayerNorm, untied head, AdamW(lr 3e-4), random tokens.
//
//   bench_gpt --vocab 65 --ctx 64 --d 128 --heads 4 --layers 4 --batch 32 --steps 20 --threads 2 [--bf16]
//
// Under `mpirun -np N` (minigrad built with MPI) it trains data-parallel: each process on batch / N
// rows, gradients averaged by distributed::DistributedDataParallel; rank 0 prints, with processes=N,
// comm_wait_fraction (the share of the step blocked in DDP's wait) and its own shard's loss.
//
// --bf16 runs the forward and the loss inside an mg::AutocastGuard (bfloat16 matrix products with
// float32 sums), as torch_gpt_ref.py --bf16 1 runs them under torch.autocast. --bf16-outputs adds
// torch.autocast's bfloat16 product outputs (AutocastOptions::bfloat16_outputs); bf16=2 in the line.
//
// Prints one line: median ms/step after warm-up, tokens/s, effective GFLOP/s, peak RSS (VmHWM).
// Effective FLOPs count the matrix products only, forward + backward (3x forward):
//   per step = 3 * tokens * (2 * linear_params + 4 * layers * ctx * d)
// (the second term is Q K^T and attention @ V, counted over the full T x T square as PyTorch's
// composed attention computes it).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fstream>
#include <memory>

#include "minigrad/minigrad.h"
#include "minigrad/tensor/blas.h"

using namespace mg;

int main(int argc, char** argv) {
  int64_t vocab = 65, ctx = 64, d = 128, heads = 4, layers = 4, batch = 32;
  int steps = 20, warmup = 3, threads = 2;
  bool bf16 = false;
  CLI::App app{"bench_gpt: GPT training-step time, same shapes as torch_gpt_ref.py"};
  app.add_option("--vocab", vocab);
  app.add_option("--ctx", ctx);
  app.add_option("--d", d);
  app.add_option("--heads", heads);
  app.add_option("--layers", layers);
  app.add_option("--batch", batch);
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--threads", threads, "threads for minigrad's loops and OpenBLAS");
  app.add_flag("--bf16", bf16, "bfloat16 matrix products (mg::AutocastGuard) in the forward and its backward");
  bool bf16_outputs = false;
  app.add_flag("--bf16-outputs", bf16_outputs, "--bf16, and bfloat16 product outputs (torch.autocast's policy)");
  CLI11_PARSE(app, argc, argv);
  bf16 = bf16 || bf16_outputs;

  int rank = 0, world = 1;
#ifdef MG_HAVE_MPI
  // Under mpirun -np N: data parallel, each process on batch / N rows (the same global batch).
  distributed::init(&argc, &argv);
  rank = distributed::rank(), world = distributed::world_size();
#endif
  if (batch % world != 0) {
    std::fprintf(stderr, "bench_gpt: --batch %lld does not split over %d processes\n", static_cast<long long>(batch),
                 world);
    return 1;
  }
  set_num_threads(threads);
  Generator g(0);
  models::GPT m(vocab, ctx, {.d_model = d, .nhead = heads, .num_layers = layers}, g);
  optim::AdamW opt(m.parameters(), {.lr = 3e-4});
  const Tensor x0 = randint(0, vocab, {batch, ctx}, g), y0 = randint(0, vocab, {batch, ctx}, g);
  const Tensor x = x0.narrow(0, rank * (batch / world), batch / world),
               y = y0.narrow(0, rank * (batch / world), batch / world);
  double wait_s = 0, total_s = 0;  // time blocked on communication, and in timed steps
#ifdef MG_HAVE_MPI
  std::unique_ptr<distributed::DistributedDataParallel> ddp;
  if (world > 1) ddp = std::make_unique<distributed::DistributedDataParallel>(m);
#endif
  std::vector<double> times;
  double loss = 0;
  for (int i = 0; i < warmup + steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    Variable l;
    {
      AutocastGuard guard(bf16, {.bfloat16_outputs = bf16_outputs});
      l = cross_entropy(reshape(m(x), {-1, vocab}), y.reshape({-1}));
    }
    opt.zero_grad();
#ifdef MG_HAVE_MPI
    const double waited = ddp ? ddp->wait_seconds() : 0;
#endif
    l.backward();
#ifdef MG_HAVE_MPI
    if (ddp) {
      ddp->wait();
      if (i >= warmup) wait_s += ddp->wait_seconds() - waited;
    }
#endif
    opt.step();
    loss = l.item();
    if (i >= warmup) {
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      total_s += times.back() / 1e3;
    }
  }
  std::sort(times.begin(), times.end());
  const double ms = times.empty() ? 0 : times[times.size() / 2];
  int64_t linear_params = 0;
  for (auto& [name, p] : m.named_parameters())
    if (p.dim() == 2 && name.rfind("tok.", 0) != 0 && name.rfind("pos.", 0) != 0)
      linear_params += p.numel();  // matrices
  const double tokens = static_cast<double>(batch * ctx);
  const double flops = 3 * tokens * (2.0 * linear_params + 4.0 * layers * ctx * d);
  // Peak resident memory of this process image: VmHWM (ru_maxrss would also count the parent's
  // peak from before exec when started by a big process, e.g. Python with torch imported).
  double peak_mb = 0;
  {
    std::ifstream status("/proc/self/status");
    std::string key;
    while (status >> key)
      if (key == "VmHWM:") {
        status >> peak_mb;
        peak_mb /= 1024;
        break;
      }
  }
  if (rank != 0) return 0;
  std::printf(
      "minigrad processes=%d comm_wait_fraction=%.3f threads=%d bf16=%d bf16_kernel=%s params=%lld ms/step=%.2f tokens/s=%.0f gflops=%.1f peak_rss_mb=%.1f loss=%.4f blas_core=%s sgemm=%s cpu=%s best_cpu=%s\n",
      world, total_s > 0 ? wait_s / total_s : 0.0, threads, int{bf16} + int{bf16_outputs},
      bf16 ? blas::bf16_kernel().c_str() : "-", static_cast<long long>(m.num_parameters()), ms,
      ms > 0 ? tokens / ms * 1e3 : 0, ms > 0 ? flops / ms / 1e6 : 0, peak_mb, loss, blas::core_name(),
      blas::float32_engine() == blas::Engine::OneDNN ? "onednn" : "openblas", std::string(cpu_capability()).c_str(),
      std::string(cpu_level_name(best_cpu_level())).c_str());
  return 0;
}
