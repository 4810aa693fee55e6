// DistributedDataParallel (distributed/ddp.h).
#include "minigrad/distributed/ddp.h"

#include <algorithm>
#include <chrono>

#include <fmt/ranges.h>

#include "minigrad/autograd/grad_mode.h"
#include "minigrad/tensor/ops.h"

namespace mg::distributed {
namespace {

// A fingerprint of the parameter list (dtypes and shapes, in order), FNV-1a over their numbers.
int64_t fingerprint(const std::vector<Variable>& params) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((static_cast<uint64_t>(v) >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  for (const Variable& p : params) {
    mix(static_cast<int64_t>(p.dtype()));
    mix(p.dim());
    for (int64_t s : p.shape()) mix(s);
  }
  return static_cast<int64_t>(h);
}

// Rank 0's values into `t` everywhere (through a contiguous copy if `t` is not contiguous).
void broadcast_into(const Tensor& t) {
  if (t.is_contiguous()) return broadcast(t, 0);
  const Tensor c = t.contiguous();
  broadcast(c, 0);
  t.copy_(c);
}

}  // namespace

void sync_model(nn::Module& module, bool buffers, const char* who) {
  std::vector<Variable> all_params;  // frozen ones too: checked and broadcast
  for (auto& [name, p] : module.named_parameters()) all_params.push_back(p);
  // Same model everywhere? Compare (count, fingerprint) across ranks: one fixed-size exchange, so
  // a mismatch is an error on every rank instead of a collective that some ranks never join. Which
  // parameters are trainable is part of it (they decide the buckets and the shards).
  uint64_t print = static_cast<uint64_t>(fingerprint(all_params));  // unsigned: wraps, never overflows
  for (const Variable& p : all_params) print = print * 31 + (p.requires_grad() ? 1 : 2);
  const std::vector<int64_t> all = all_gather({static_cast<int64_t>(all_params.size()), static_cast<int64_t>(print)});
  for (int r = 1; r < world_size(); ++r)
    if (all[2 * r] != all[0] || all[2 * r + 1] != all[1]) {
      std::string counts;
      for (int q = 0; q < world_size(); ++q)
        counts += fmt::format("{}rank {}: {} parameters", q ? ", " : "", q, all[2 * q]);
      throw ShapeError(
          fmt::format("{}: the processes hold different models ({}; or the same count "
                      "with different shapes or dtypes); every process must build the same model "
                      "(this is rank {})",
                      who, counts, rank()));
    }
  NoGradGuard no_grad;
  for (const Variable& p : all_params) broadcast_into(p.data());
  if (buffers)
    for (auto& [name, b] : module.named_buffers())
      if (b.dtype() == DType::Float32 || b.dtype() == DType::Float64 || b.dtype() == DType::Int64) broadcast_into(b);
}

DistributedDataParallel::DistributedDataParallel(nn::Module& module, DDPOptions options) : module_(module) {
  MG_CHECK(options.bucket_cap_mb > 0, ValueError, "DistributedDataParallel: bucket_cap_mb must be positive, got {}",
           options.bucket_cap_mb);
  for (auto& [name, p] : module.named_parameters())
    if (p.requires_grad()) {
      MG_CHECK(is_floating(p.dtype()), DTypeError,
               "DistributedDataParallel: parameter {} is {}; float32 or float64 only", name, dtype_name(p.dtype()));
      params_.push_back(p), names_.push_back(name);
    }
  sync_model(module, options.broadcast_buffers, "DistributedDataParallel");
  // Buckets over the parameters in reverse order, one dtype each, about bucket_cap_mb each.
  const double cap = options.bucket_cap_mb * 1024 * 1024;
  bucket_of_.assign(params_.size(), -1);
  double bytes = 0;
  for (int64_t i = static_cast<int64_t>(params_.size()) - 1; i >= 0; --i) {
    const double b = static_cast<double>(params_[i].numel()) * itemsize(params_[i].dtype());
    if (buckets_.empty() || bytes + b > cap || params_[buckets_.back().params.front()].dtype() != params_[i].dtype())
      buckets_.emplace_back(), bytes = 0;
    buckets_.back().params.push_back(i);
    bucket_of_[i] = static_cast<int64_t>(buckets_.size()) - 1;
    bytes += b;
  }
  for (Bucket& bk : buckets_) {
    int64_t n = 0;
    for (int64_t i : bk.params) n += params_[i].numel();
    bk.flat = empty({n}, params_[bk.params.front()].dtype());
  }
  got_.assign(params_.size(), false);
  for (int64_t i = 0; i < static_cast<int64_t>(params_.size()); ++i)
    hooks_.push_back(params_[i].register_post_accumulate_grad_hook([this, i](const Variable&) { on_grad_ready(i); }));
}

DistributedDataParallel::~DistributedDataParallel() {
  for (GradHookHandle& h : hooks_) h.remove();
  drain();
}

void DistributedDataParallel::drain() noexcept {
  for (Bucket& bk : buckets_) {
    if (bk.started) {
      try {
        bk.work.wait();  // bounded by the timeout; the Work keeps the buffer alive meanwhile
      } catch (const Error&) {
        // the run is broken (finalize() will abort it); nothing more to do here
      }
    }
    bk.ready = 0, bk.started = false, bk.work = Work();
  }
  next_bucket_ = 0, ready_total_ = 0, pending_ = false;
  got_.assign(params_.size(), false);
}

void DistributedDataParallel::on_grad_ready(int64_t i) {
  if (!sync_) return;  // no_sync: gradients only accumulate
  if (ready_total_ == 0) events_.clear();
  if (got_[i]) {
    drain();
    throw StateError(
        fmt::format("DistributedDataParallel: parameter {} got a second gradient in one backward before wait(); "
                    "call backward once per step (or use no_sync() for accumulation)",
                    names_[i]));
  }
  got_[i] = true;
  Bucket& bk = buckets_[bucket_of_[i]];
  ++bk.ready, ++ready_total_;
  pending_ = true;
  events_.push_back({DDPEvent::GradReady, bucket_of_[i], ready_total_});
  start_ready_buckets();
  for (Bucket& b : buckets_)  // let MPI move the ones under way along
    if (b.started) b.work.test();
  if (ready_total_ == num_params()) wait();  // the end of the backward: finish here, as PyTorch does
}

void DistributedDataParallel::start_ready_buckets() {
  const double inv = 1.0 / world_size();
  while (next_bucket_ < num_buckets() &&
         buckets_[next_bucket_].ready == static_cast<int64_t>(buckets_[next_bucket_].params.size())) {
    Bucket& bk = buckets_[next_bucket_];
    // flat = grads / N side by side; summed over the N processes it is their average
    int64_t off = 0;
    for (int64_t i : bk.params) {
      const Tensor& g = params_[i].grad();
      const int64_t n = params_[i].numel();
      bk.flat.narrow(0, off, n).copy_(g.reshape({n}) * inv);
      off += n;
    }
    bk.work = all_reduce_sum_async(bk.flat, fmt::format("the all-reduce of gradient bucket {}", next_bucket_));
    bk.started = true;
    events_.push_back({DDPEvent::BucketStarted, next_bucket_, ready_total_});
    ++next_bucket_;
  }
}

void DistributedDataParallel::wait() {
  if (!pending_) return;
  if (ready_total_ < num_params()) {
    std::vector<std::string> missing;
    for (int64_t i = 0; i < num_params(); ++i)
      if (!got_[i]) missing.push_back(names_[i]);
    const int64_t ready = ready_total_;
    drain();  // the buckets already under way finish; the next step starts clean
    throw StateError(
        fmt::format("DistributedDataParallel::wait: {} of {} parameters got a gradient in this backward (missing: "
                    "{}); every parameter must take part in every step",
                    ready, num_params(), fmt::join(missing, ", ")));
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < num_buckets(); ++b) {
    Bucket& bk = buckets_[b];
    bk.work.wait();
    int64_t off = 0;
    for (int64_t i : bk.params) {
      const int64_t n = params_[i].numel();
      params_[i].grad().copy_(bk.flat.narrow(0, off, n).view(params_[i].shape()));
      off += n;
    }
    events_.push_back({DDPEvent::BucketFinished, b, ready_total_});
    bk.ready = 0, bk.started = false;
  }
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  next_bucket_ = 0, ready_total_ = 0, pending_ = false;
  got_.assign(params_.size(), false);
}

}  // namespace mg::distributed
