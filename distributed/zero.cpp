// ZeroRedundancyOptimizer (distributed/zero.h): optimizer state sharded over the processes.
#include "minigrad/distributed/zero.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <fmt/ranges.h>

#include "minigrad/autograd/grad_mode.h"
#include "minigrad/distributed/ddp.h"
#include "minigrad/optim/checkpoint.h"
#include "minigrad/tensor/ops.h"
#include "minigrad/tensor/safetensors.h"

namespace mg::distributed {
namespace {
// Every parameter's values (or gradients, through `part`) side by side in `flat`, scaled by `scale`.
void pack(const std::vector<Variable>& params, const Tensor& flat, bool grads, double scale = 1.0) {
  int64_t off = 0;
  for (const Variable& p : params) {
    const int64_t n = p.numel();
    const Tensor& t = grads ? p.grad() : p.data();
    if (scale == 1.0)
      flat.narrow(0, off, n).copy_(t.reshape({n}));
    else
      flat.narrow(0, off, n).copy_(t.reshape({n}) * scale);
    off += n;
  }
}
}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(nn::Module& model, OptimizerFactory make_optimizer)
    : model_(model), make_(std::move(make_optimizer)) {
  MG_CHECK(make_ != nullptr, ValueError, "ZeroRedundancyOptimizer: the optimizer factory is empty");
  for (auto& [name, p] : model.named_parameters())
    if (p.requires_grad()) params_.push_back(p), names_.push_back(name);
  MG_CHECK(!params_.empty(), ValueError, "ZeroRedundancyOptimizer: the {} has no trainable parameters",
           model.type_name());
  const DType dtype = params_.front().dtype();
  int64_t total = 0;
  for (int64_t i = 0; i < num_params(); ++i) {
    MG_CHECK(is_floating(params_[i].dtype()) && params_[i].dtype() == dtype, DTypeError,
             "ZeroRedundancyOptimizer: parameter {} is {} and {} is {}; the trainable parameters must share one "
             "floating dtype (they travel in one flat vector)",
             names_[i], dtype_name(params_[i].dtype()), names_[0], dtype_name(dtype));
    total = checked_add(total, params_[i].numel(), "ZeroRedundancyOptimizer");
  }
  const int n = world_size(), me = rank();
  MG_CHECK(total >= n, ValueError,
           "ZeroRedundancyOptimizer: {} trainable elements cannot be shared out over {} processes (one each at least)",
           total, n);
  sync_model(model, true, "ZeroRedundancyOptimizer");
  // N shards of total / N elements (the first total % N one more), in the parameters' order
  for (int r = 0; r < n; ++r) counts_.push_back(total / n + (r < total % n ? 1 : 0));
  for (int r = 0; r < me; ++r) start_ += counts_[r];
  flat_ = empty({total}, dtype);
  pack(params_, flat_, false);
  shard_ = Variable(flat_.narrow(0, start_, counts_[me]).clone(), true);
  local_ = make_({shard_});
  MG_CHECK(local_ != nullptr, ValueError, "ZeroRedundancyOptimizer: the optimizer factory returned null");
}

void ZeroRedundancyOptimizer::zero_grad() {
  for (const Variable& p : params_) p.zero_grad();
  shard_.zero_grad();
  reduced_ = false;
}

// Step 1: every gradient / N side by side; summed over the processes, shard r's part reaches rank r.
void ZeroRedundancyOptimizer::reduce_gradients() {
  std::vector<std::string> missing;
  for (int64_t i = 0; i < num_params(); ++i)
    if (!params_[i].grad().defined()) missing.push_back(names_[i]);
  MG_CHECK(missing.empty(), StateError,
           "ZeroRedundancyOptimizer: {} of {} parameters have no gradient (missing: {}); every parameter must "
           "take part in every step",
           missing.size(), num_params(), fmt::join(missing, ", "));
  NoGradGuard no_grad;
  pack(params_, flat_, true, 1.0 / world_size());
  const Tensor averaged = empty({counts_[rank()]}, flat_.dtype());
  reduce_scatter_sum(flat_, averaged, counts_);
  shard_.set_grad(averaged);
  reduced_ = true;
}

double ZeroRedundancyOptimizer::clip_grad_norm_(double max_norm) {
  MG_CHECK(max_norm >= 0, ValueError, "ZeroRedundancyOptimizer::clip_grad_norm_: max_norm must be >= 0, got {}",
           max_norm);
  if (!reduced_) reduce_gradients();
  NoGradGuard no_grad;
  const Tensor g = shard_.grad().to(DType::Float64);
  const Tensor squares = full({1}, sum(g * g).item(), DType::Float64);
  all_reduce_sum(squares);  // the whole averaged gradient's sum of squares
  const double total = std::sqrt(squares.item());
  const double coef = max_norm / (total + 1e-6);
  if (!(coef >= 1)) shard_.set_grad(shard_.grad() * coef);  // below 1, or NaN: as optim::clip_grad_norm_
  return total;
}

void ZeroRedundancyOptimizer::step() {
  if (!reduced_) reduce_gradients();
  reduced_ = false;
  NoGradGuard no_grad;
  const int me = rank();
  // 2. the shard's values as the parameters hold them now (a load or set_data since the last step
  // counts), and its step
  const Tensor shard = shard_.data();
  int64_t at = 0;  // where parameter p begins in the flat vector: copy its overlap with the shard only
  for (const Variable& p : params_) {
    const int64_t n = p.numel(), from = std::max(at, start_), to = std::min(at + n, start_ + counts_[me]);
    if (from < to)
      shard.narrow(0, from - start_, to - from).copy_(p.data().reshape({n}).narrow(0, from - at, to - from));
    at += n;
  }
  local_->step();
  // 3. every shard's new values to every process, and into the parameters
  all_gather_into(shard_.data(), flat_, counts_);
  int64_t off = 0;
  for (const Variable& p : params_) {
    const int64_t n = p.numel();
    p.data().copy_(flat_.narrow(0, off, n).view(p.shape()));
    off += n;
  }
}

int64_t ZeroRedundancyOptimizer::state_bytes() const {
  int64_t bytes = 0;
  if (local_->has_state(shard_))
    for (auto& [name, t] : local_->state(shard_)) bytes += t.numel() * itemsize(t.dtype());
  return bytes;
}

// A shard's state is per element (a 1-d tensor as long as the shard: AdamW's exp_avg) or one number
// for the whole shard (0-d: its step count, the same on every rank). In the consolidated file each
// parameter has its own: its slice of the per-element state, and a copy of the number.
void ZeroRedundancyOptimizer::save_checkpoint(const std::string& path, int64_t step,
                                              const optim::LRScheduler* scheduler) {
  const int me = rank();
  std::unique_ptr<optim::Optimizer> whole = me == 0 ? make_(params_) : nullptr;
  if (local_->has_state(shard_)) {  // every rank or none: they step together
    for (auto& [name, t] : local_->state(shard_)) {
      if (t.dim() == 0) {
        if (whole)
          for (const Variable& p : params_) whole->state(p)[name] = t.clone();
        continue;
      }
      MG_CHECK(t.numel() == counts_[me], StateError,
               "ZeroRedundancyOptimizer::save_checkpoint: the optimizer's state \"{}\" has {} elements for a shard of "
               "{}; only state per element or one number per shard can be gathered",
               name, t.numel(), counts_[me]);
      const Tensor all = empty({flat_.numel()}, t.dtype());
      all_gather_into(t.contiguous(), all, counts_);
      int64_t off = 0;
      for (const Variable& p : params_) {
        if (whole) whole->state(p)[name] = all.narrow(0, off, p.numel()).view(p.shape()).clone();
        off += p.numel();
      }
    }
  }
  // Rank 0 writes; every rank learns whether it could (so that none goes on to read a file that
  // is not there, and a full disk is an error everywhere, not a wait until the timeout).
  std::string error;
  if (whole) {
    // the schedule's rate and cycled momentum, as this process's optimizer has them now
    whole->groups()[0].lr = local_->groups()[0].lr;
    whole->groups()[0].initial_lr = local_->groups()[0].initial_lr;
    whole->groups()[0].momentum = local_->groups()[0].momentum;
    try {
      optim::save_checkpoint(path, model_, *whole, step, scheduler);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  const Tensor written = full({1}, error.empty() ? 1 : 0, DType::Int64);
  broadcast(written, 0);
  if (!error.empty()) throw FileError(error);
  MG_CHECK(written.item<int64_t>() == 1, FileError,
           "ZeroRedundancyOptimizer::save_checkpoint: rank 0 could not write {} (its error says why)", path);
}

namespace {
// Shards step all parameters together: a checkpoint to cut into shards has optimizer state for all
// the trainable parameters or for none, and each one-number state (the step count) the same for all.
void check_shardable(const SafeTensors& file, const std::string& path, const std::vector<std::string>& names) {
  std::map<std::string, double> numbers;  // state name -> the value every parameter must share
  size_t with_state = 0;
  for (const std::string& pname : names) {
    const std::string prefix = "optimizer." + pname + ".";
    bool any = false;
    for (auto& [key, t] : file.tensors) {
      if (key.rfind(prefix, 0) != 0 || key.find('.', prefix.size()) != std::string::npos) continue;
      any = true;
      if (t.dim() != 0) continue;
      const std::string k = key.substr(prefix.size());
      const double v = t.item();
      MG_CHECK(!numbers.count(k) || numbers[k] == v, FileError,
               "ZeroRedundancyOptimizer::load_checkpoint: {} has {} = {} for {} but {} for {}; the shards step all "
               "parameters together",
               path, k, v, pname, numbers[k], names.front());
      numbers[k] = v;
    }
    with_state += any ? 1 : 0;
  }
  MG_CHECK(with_state == 0 || with_state == names.size(), FileError,
           "ZeroRedundancyOptimizer::load_checkpoint: {} has optimizer state for {} of the {} trainable parameters; "
           "the shards step all parameters together",
           path, with_state, names.size());
}
}  // namespace

int64_t ZeroRedundancyOptimizer::load_checkpoint(const std::string& path, optim::LRScheduler* scheduler) {
  // Every process reads the file and checks that its state can be cut into shards; they agree
  // whether all could before anything changes. Then the whole state goes into an optimizer over
  // every parameter (optim::load_checkpoint_from validates the rest first), and this process's
  // slice of it into its own optimizer, which stays the same object (a scheduler holds it).
  std::optional<SafeTensors> file;
  std::string error;
  try {
    file = load_safetensors(path);
    check_shardable(*file, path, names_);
  } catch (const Error& e) {
    error = e.what();
  }
  const std::vector<int64_t> ok = all_gather({error.empty() ? 1 : 0});
  if (!error.empty()) throw FileError(error);
  for (size_t r = 0; r < ok.size(); ++r)
    MG_CHECK(ok[r] == 1, FileError,
             "ZeroRedundancyOptimizer::load_checkpoint: rank {} could not read {} (its error says why); nothing was "
             "loaded",
             r, path);
  std::unique_ptr<optim::Optimizer> whole = make_(params_);
  const int64_t step = optim::load_checkpoint_from(*file, path, model_, *whole, scheduler);
  const int me = rank();
  NoGradGuard no_grad;
  pack(params_, flat_, false);
  shard_.data().copy_(flat_.narrow(0, start_, counts_[me]));
  optim::ParamState st;
  if (whole->has_state(params_.front()))
    for (auto& [name, first] : whole->state(params_.front())) {
      if (first.dim() == 0) {
        st[name] = first.clone();
        continue;
      }
      const Tensor all = empty({flat_.numel()}, first.dtype());
      int64_t off = 0;
      for (int64_t i = 0; i < num_params(); ++i) {
        all.narrow(0, off, params_[i].numel()).copy_(whole->state(params_[i]).at(name).reshape({params_[i].numel()}));
        off += params_[i].numel();
      }
      st[name] = all.narrow(0, start_, counts_[me]).clone();
    }
  local_->state(shard_) = std::move(st);
  local_->groups()[0].lr = whole->groups()[0].lr;
  local_->groups()[0].initial_lr = whole->groups()[0].initial_lr;
  local_->groups()[0].momentum = whole->groups()[0].momentum;
  reduced_ = false;
  return step;
}

}  // namespace mg::distributed
