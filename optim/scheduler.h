#pragma once
// Learning-rate schedules. Like torch.optim.lr_scheduler: constructing a scheduler sets each
// group's lr for step 0; every scheduler.step() (once per optimizer step) moves to the next. Every
// schedule here is a formula of the step (closed form), computed from each group's initial rate:
// the rate the group had when the first scheduler on the optimizer was built (PyTorch's
// "initial_lr"), so several schedulers on one optimizer (SequentialLR) share it.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "minigrad/optim/optimizer.h"

namespace mg::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  /// Advance one step and set the groups' learning rates.
  void step();
  /// How many times step() was called (restored when resuming a run).
  int64_t last_step() const { return step_; }
  /// Jump to step `s` (for resuming) and set the learning rates for it.
  void set_step(int64_t s);
  /// The learning rate of group 0 now.
  double get_lr() const { return opt_.groups().front().lr; }
  /// The class name ("WarmupCosineLR"), saved in checkpoints.
  virtual std::string name() const = 0;
  /// The schedule's settings ({"warmup_steps", 100}, ...), saved in checkpoints and checked on load.
  virtual std::map<std::string, double> settings() const = 0;
  /// Each group's initial learning rate, from which the schedule computes the rate of each step.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  /// Restore a saved schedule (load_checkpoint): the step and the base rates, one per group; the
  /// groups' current rates are not touched (the checkpoint restores them).
  void restore(int64_t step, std::vector<double> base_lrs);
  /// The rate this schedule gives a group whose initial rate is base_lr at step t (what step()
  /// sets; SequentialLR asks its schedules this).
  double lr_for(double base_lr, int64_t t) const { return lr_at(base_lr, t); }

 protected:
  explicit LRScheduler(Optimizer& opt);
  /// The learning rate of a group whose initial rate is base_lr, at step t.
  virtual double lr_at(double base_lr, int64_t t) const = 0;
  /// Set every group's lr for the current step (derived constructors call this once).
  void apply();

 private:
  Optimizer& opt_;
  std::vector<double> base_lrs_;
  int64_t step_ = 0;
};

/// lr = base * lr_lambda(t)   (torch.optim.lr_scheduler.LambdaLR). The function is not saved in
/// checkpoints (PyTorch's is not either): give the same one when resuming.
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& opt, std::function<double(int64_t)> lr_lambda);
  std::string name() const override { return "LambdaLR"; }
  std::map<std::string, double> settings() const override { return {}; }

 protected:
  double lr_at(double base, int64_t t) const override;

 private:
  std::function<double(int64_t)> lambda_;
};

/// lr = base * (start + (end - start) * min(t, total_iters) / total_iters)
/// (torch.optim.lr_scheduler.LinearLR; PyTorch's defaults: start 1/3, end 1, 5 steps)
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);
  std::string name() const override { return "LinearLR"; }
  std::map<std::string, double> settings() const override {
    return {{"start_factor", start_}, {"end_factor", end_}, {"total_iters", static_cast<double>(total_)}};
  }

 protected:
  double lr_at(double base, int64_t t) const override;

 private:
  double start_, end_;
  int64_t total_;
};

/// One schedule after another (torch.optim.lr_scheduler.SequentialLR): schedule i runs from
/// milestone i-1 (0 for the first) until milestone i, counting its own steps from 0. The schedules
/// must be built on the same optimizer, and outlive this one.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& opt, std::vector<LRScheduler*> schedulers, std::vector<int64_t> milestones);
  std::string name() const override { return "SequentialLR"; }
  /// The milestones and each schedule's settings, as "milestone.i" and "i.<setting>".
  std::map<std::string, double> settings() const override;

 protected:
  double lr_at(double base, int64_t t) const override;

 private:
  std::vector<LRScheduler*> schedulers_;
  std::vector<int64_t> milestones_;
};

/// lr = base * gamma^floor(t / step_size)   (torch.optim.lr_scheduler.StepLR)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  std::string name() const override { return "StepLR"; }
  std::map<std::string, double> settings() const override {
    return {{"step_size", static_cast<double>(step_size_)}, {"gamma", gamma_}};
  }

 protected:
  double lr_at(double base, int64_t t) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// Linear warm-up then cosine decay, the usual schedule for Transformers:
///   t < warmup:           lr = base * (t + 1) / warmup
///   warmup <= t < total:  lr = min + (base - min) * (1 + cos(pi * (t - warmup) / (total - warmup))) / 2
///   t >= total:           lr = min,   with min = base * min_lr_ratio
class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& opt, int64_t warmup_steps, int64_t total_steps, double min_lr_ratio = 0.0);
  std::string name() const override { return "WarmupCosineLR"; }
  std::map<std::string, double> settings() const override {
    return {{"warmup_steps", static_cast<double>(warmup_)},
            {"total_steps", static_cast<double>(total_)},
            {"min_lr_ratio", min_ratio_}};
  }

 protected:
  double lr_at(double base, int64_t t) const override;

 private:
  int64_t warmup_, total_;
  double min_ratio_;
};

}  // namespace mg::optim
