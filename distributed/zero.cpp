// ZeroRedundancyOptimizer (distributed/zero.h): optimizer state sharded over the processes.
#include "minigrad/distributed/zero.h"

#include <map>

#include <fmt/ranges.h>

#include "minigrad/autograd/grad_mode.h"
#include "minigrad/distributed/ddp.h"
#include "minigrad/optim/checkpoint.h"
#include "minigrad/tensor/safetensors.h"
#include "minigrad/tensor/ops.h"

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
  grads_ = empty({total}, dtype);
  values_ = empty({total}, dtype);
  pack(params_, values_, false);
  shard_ = Variable(values_.narrow(0, start_, counts_[me]).clone(), true);
  local_ = make_({shard_});
  MG_CHECK(local_ != nullptr, ValueError, "ZeroRedundancyOptimizer: the optimizer factory returned null");
}

void ZeroRedundancyOptimizer::zero_grad() {
  for (const Variable& p : params_) p.zero_grad();
}

void ZeroRedundancyOptimizer::step() {
  std::vector<std::string> missing;
  for (int64_t i = 0; i < num_params(); ++i)
    if (!params_[i].grad().defined()) missing.push_back(names_[i]);
  MG_CHECK(missing.empty(), StateError,
           "ZeroRedundancyOptimizer::step: {} of {} parameters have no gradient (missing: {}); every parameter must "
           "take part in every step",
           missing.size(), num_params(), fmt::join(missing, ", "));
  NoGradGuard no_grad;
  const int me = rank();
  // 1. every gradient / N side by side; summed over the processes, shard r's part reaches rank r
  pack(params_, grads_, true, 1.0 / world_size());
  const Tensor averaged = empty({counts_[me]}, grads_.dtype());
  reduce_scatter_sum(grads_, averaged, counts_);
  // 2. the shard's values as the parameters hold them now (a load or set_data since the last step
  // counts), its averaged gradient, and its step
  pack(params_, values_, false);
  shard_.data().copy_(values_.narrow(0, start_, counts_[me]));
  shard_.set_grad(averaged);
  local_->step();
  // 3. every shard's new values to every process, and into the parameters
  all_gather_into(shard_.data(), values_, counts_);
  int64_t off = 0;
  for (const Variable& p : params_) {
    const int64_t n = p.numel();
    p.data().copy_(values_.narrow(0, off, n).view(p.shape()));
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
void ZeroRedundancyOptimizer::save_checkpoint(const std::string& path, int64_t step) {
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
      const Tensor all = empty({values_.numel()}, t.dtype());
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
      optim::save_checkpoint(path, model_, *whole, step);
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

int64_t ZeroRedundancyOptimizer::load_checkpoint(const std::string& path) {
  // The whole state into an optimizer over every parameter (optim::load_checkpoint validates the
  // file before anything changes), then this process's slice of it into a fresh shard optimizer.
  const SafeTensors file = load_safetensors(path);
  // Shards step all parameters together: the file must have state for all of them or for none,
  // and one step count (each one-number state the same for every parameter). Checked first.
  std::map<std::string, double> numbers;  // name -> the value every parameter must share
  size_t with_state = 0;
  for (const std::string& pname : names_) {
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
               path, k, v, pname, numbers[k], names_.front());
      numbers[k] = v;
    }
    with_state += any ? 1 : 0;
  }
  MG_CHECK(with_state == 0 || with_state == names_.size(), FileError,
           "ZeroRedundancyOptimizer::load_checkpoint: {} has optimizer state for {} of the {} trainable parameters; "
           "the shards step all parameters together",
           path, with_state, names_.size());
  std::unique_ptr<optim::Optimizer> whole = make_(params_);
  const int64_t step = optim::load_checkpoint_from(file, path, model_, *whole);
  const int me = rank();
  NoGradGuard no_grad;
  pack(params_, values_, false);
  Variable shard(values_.narrow(0, start_, counts_[me]).clone(), true);
  std::unique_ptr<optim::Optimizer> local = make_({shard});
  if (whole->has_state(params_.front())) {
    optim::ParamState& st = local->state(shard);
    for (auto& [name, first] : whole->state(params_.front())) {
      if (first.dim() == 0) {
        st[name] = first.clone();
        continue;
      }
      const Tensor all = empty({values_.numel()}, first.dtype());
      int64_t off = 0;
      for (int64_t i = 0; i < num_params(); ++i) {
        all.narrow(0, off, params_[i].numel()).copy_(whole->state(params_[i]).at(name).reshape({params_[i].numel()}));
        off += params_[i].numel();
      }
      st[name] = all.narrow(0, start_, counts_[me]).clone();
    }
  }
  local->groups()[0].lr = whole->groups()[0].lr;
  local->groups()[0].initial_lr = whole->groups()[0].initial_lr;
  local->groups()[0].momentum = whole->groups()[0].momentum;
  shard_ = shard;
  local_ = std::move(local);
  return step;
}

}  // namespace mg::distributed
