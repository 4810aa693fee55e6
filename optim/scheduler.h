#pragma once
// Learning-rate schedules. Like torch.optim.lr_scheduler: constructing a scheduler sets each
// group's lr for step 0; every scheduler.step() (once per optimizer step) moves to the next. Every
// schedule here is a formula of the step (closed form), computed from each group's initial rate:
// the rate the group had when the first scheduler on the optimizer was built (PyTorch's
// "initial_lr"), so several schedulers on one optimizer (SequentialLR) share it.
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "minigrad/optim/optimizer.h"

namespace mg::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  /// Advance one step and set the groups' learning rates.
  virtual void step();
  /// How many times step() was called (restored when resuming a run).
  int64_t last_step() const { return step_; }
  /// Jump to step `s` (for resuming) and set the learning rates for it.
  void set_step(int64_t s);
  /// The learning rate of group 0 now.
  double get_lr() const { return opt_.groups().front().lr; }
  /// The optimizer whose groups this schedule sets.
  Optimizer& optimizer() const { return opt_; }
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
  /// The schedule's own state besides the step and the base rates (ReduceLROnPlateau's best value
  /// and counters), saved in checkpoints; empty for the schedules that are formulas of the step.
  virtual std::map<std::string, double> state() const { return {}; }
  /// Check a saved state() before a load changes anything: a FileError saying what is wrong.
  virtual void check_state(const std::map<std::string, double>&) const {}
  /// Restore a state() that check_state accepted.
  virtual void load_state(const std::map<std::string, double>&) {}

 protected:
  explicit LRScheduler(Optimizer& opt);
  /// The learning rate of a group whose initial rate is base_lr, at step t.
  virtual double lr_at(double base_lr, int64_t t) const = 0;
  /// Set the groups for the current step: every group's lr from lr_at (derived constructors call
  /// this once; OneCycleLR sets the momentum too).
  virtual void apply();
  /// Start the schedule from these rates instead of the groups' (OneCycleLR: max_lr / div_factor),
  /// which become the groups' initial_lr.
  void set_base_lrs(std::vector<double> lrs);

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

/// How OneCycleLR moves between its rates (PyTorch's anneal_strategy="cos" or "linear").
enum class AnnealStrategy { Cos, Linear };

/// OneCycleLR's settings (torch.optim.lr_scheduler.OneCycleLR's, with its defaults).
struct OneCycleOptions {
  /// The share of the steps spent raising the rate.
  double pct_start = 0.3;
  /// Along half a cosine, or a straight line.
  AnnealStrategy anneal_strategy = AnnealStrategy::Cos;
  /// Move momentum (beta1 for Adam) opposite to the rate.
  bool cycle_momentum = true;
  /// The momentum at the peak rate.
  double base_momentum = 0.85;
  /// The momentum at the start and the end.
  double max_momentum = 0.95;
  /// Initial rate = max_lr / div_factor.
  double div_factor = 25;
  /// Final rate = initial rate / final_div_factor.
  double final_div_factor = 1e4;
  /// Down to the initial rate, then to the final one.
  bool three_phase = false;
};

/// The 1cycle policy (Smith & Topin, 2017; torch.optim.lr_scheduler.OneCycleLR): the rate rises
/// from max_lr / div_factor to max_lr over pct_start of total_steps, then anneals to the initial
/// rate / final_div_factor, each phase a cosine (or a line) from its start to its end value:
///   phase k from step s0 to s1 (s1 = pct_start * total_steps - 1, then total_steps - 1):
///   pct = (t - s0) / (s1 - s0),  cos: lr = end + (start - end) (1 + cos(pi pct)) / 2
/// The momentum (SGD's, RMSprop's, or Adam's beta1, per group) moves the other way, max_momentum ->
/// base_momentum -> max_momentum. Stepping past total_steps is a ValueError, as in PyTorch.
class OneCycleLR : public LRScheduler {
 public:
  /// The same max_lr for every group.
  OneCycleLR(Optimizer& opt, double max_lr, int64_t total_steps, OneCycleOptions options = {});
  /// One max_lr per group.
  OneCycleLR(Optimizer& opt, std::vector<double> max_lrs, int64_t total_steps, OneCycleOptions options = {});
  std::string name() const override { return "OneCycleLR"; }
  std::map<std::string, double> settings() const override;
  /// The momentum the schedule gives every group at step t.
  double momentum_at(int64_t t) const;

 protected:
  double lr_at(double base, int64_t t) const override;
  void apply() override;

 private:
  struct Phase {
    double end_step, lr_start, lr_end, momentum_start, momentum_end;  // rates as multiples of the initial one
  };
  double anneal(double start, double end, double pct) const;
  // the phase holding step t, and how far into it t is
  std::pair<const Phase*, double> phase_at(int64_t t) const;
  int64_t total_;
  OneCycleOptions o_;
  std::vector<Phase> phases_;
};

/// Whether ReduceLROnPlateau's metric should fall (a loss) or rise (an accuracy): PyTorch's mode.
enum class PlateauMode { Min, Max };
/// How ReduceLROnPlateau measures "better": relative to the best, or by an absolute margin.
enum class ThresholdMode { Rel, Abs };

/// ReduceLROnPlateau's settings (torch.optim.lr_scheduler.ReduceLROnPlateau's, with its defaults).
struct PlateauOptions {
  /// Min: the metric should fall (a loss); Max: rise.
  PlateauMode mode = PlateauMode::Min;
  /// New lr = lr * factor.
  double factor = 0.1;
  /// Steps without improvement tolerated before a reduction.
  int64_t patience = 10;
  /// How much better counts as better.
  double threshold = 1e-4;
  /// Rel: best * (1 -+ threshold); Abs: best -+ threshold.
  ThresholdMode threshold_mode = ThresholdMode::Rel;
  /// Steps after a reduction before counting again.
  int64_t cooldown = 0;
  /// The floor: one value for every group, or one per group.
  std::vector<double> min_lr = {0.0};
  /// A reduction smaller than this is not made.
  double eps = 1e-8;
};

/// Lower the rate when a metric stops improving (torch.optim.lr_scheduler.ReduceLROnPlateau):
/// step(metric) once per evaluation; after more than `patience` steps without a better metric,
/// every group's lr becomes max(lr * factor, min_lr). Not a formula of the step: its best value
/// and counters are its state(), saved in checkpoints.
class ReduceLROnPlateau : public LRScheduler {
 public:
  explicit ReduceLROnPlateau(Optimizer& opt, PlateauOptions options = {});
  /// One evaluation's metric (a validation loss, say): counts it, and lowers the rates if due.
  void step(double metric);
  /// A StateError: this schedule needs the metric, step(metric).
  void step() override;
  std::string name() const override { return "ReduceLROnPlateau"; }
  std::map<std::string, double> settings() const override;
  std::map<std::string, double> state() const override;
  void check_state(const std::map<std::string, double>& s) const override;
  void load_state(const std::map<std::string, double>& s) override;
  /// The best metric so far (inf for "min" before any step).
  double best() const { return best_; }
  /// Steps since the last improvement.
  int64_t num_bad_epochs() const { return bad_; }

 protected:
  /// A StateError: its rates are not a formula of the step (so it cannot be part of a SequentialLR).
  double lr_at(double base, int64_t t) const override;
  void apply() override {}  // the rates live in the groups (and the checkpoint's lr.<group>)

 private:
  bool better(double a) const;
  PlateauOptions o_;
  std::vector<double> min_lrs_;
  double best_;
  int64_t bad_ = 0, cooldown_counter_ = 0;
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

/// Half a cosine from the initial rate down to eta_min over T_max steps
/// (torch.optim.lr_scheduler.CosineAnnealingLR, its closed form):
///   lr = eta_min + (base - eta_min) (1 + cos(pi t / T_max)) / 2
/// Past T_max the cosine goes on, back up towards base over the next T_max steps, as PyTorch's
/// does. Warm-up first, PyTorch's way: SequentialLR({&linear, &cosine}, {warmup}).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0.0);
  std::string name() const override { return "CosineAnnealingLR"; }
  std::map<std::string, double> settings() const override {
    return {{"T_max", static_cast<double>(t_max_)}, {"eta_min", eta_min_}};
  }

 protected:
  double lr_at(double base, int64_t t) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// Cosine annealing with warm restarts, SGDR (Loshchilov & Hutter, 2017;
/// torch.optim.lr_scheduler.CosineAnnealingWarmRestarts): the rate falls along half a cosine from
/// base to eta_min over a period of T_i steps, then jumps back to base; the first period is T_0
/// steps and each next one T_mult times longer:
///   lr = eta_min + (base - eta_min) (1 + cos(pi T_cur / T_i)) / 2,  T_cur = steps since the last restart
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0, int64_t T_mult = 1, double eta_min = 0.0);
  std::string name() const override { return "CosineAnnealingWarmRestarts"; }
  std::map<std::string, double> settings() const override {
    return {{"T_0", static_cast<double>(t0_)}, {"T_mult", static_cast<double>(t_mult_)}, {"eta_min", eta_min_}};
  }

 protected:
  double lr_at(double base, int64_t t) const override;

 private:
  int64_t t0_, t_mult_;
  double eta_min_;
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
