#pragma once
// Learning-rate schedules. Like torch.optim.lr_scheduler: constructing a scheduler sets each
// group's lr for step 0; every scheduler.step() (once per optimizer step) moves to the next.
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

/// lr = base * gamma^floor(t / step_size)   (torch.optim.lr_scheduler.StepLR)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);

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

 protected:
  double lr_at(double base, int64_t t) const override;

 private:
  int64_t warmup_, total_;
  double min_ratio_;
};

}  // namespace mg::optim
