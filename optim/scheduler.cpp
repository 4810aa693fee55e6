#include "minigrad/optim/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include <fmt/ranges.h>

#include "minigrad/tensor/ops.h"

namespace mg::optim {

LRScheduler::LRScheduler(Optimizer& opt) : opt_(opt) {
  for (Group& g : opt.groups()) {
    if (!g.initial_lr) g.initial_lr = g.lr;
    base_lrs_.push_back(*g.initial_lr);
  }
}

// Every group's rate for the step, checked before any is set: a schedule must not give an inf or
// NaN rate (StepLR's gamma^k past the double range, a LambdaLR factor of 1e308). A negative one
// passes, as in PyTorch: OneCycleLR's linear anneal reaches one at its last step, and PyTorch's
// golden rates have it.
void LRScheduler::apply() {
  std::vector<double> lrs;
  for (size_t i = 0; i < base_lrs_.size(); ++i) {
    const double lr = lr_at(base_lrs_[i], step_);
    MG_CHECK(std::isfinite(lr), ValueError,
             "{}: at step {} the rate of group {} (initial rate {}) would be {}; a rate must be finite", name(), step_,
             i, base_lrs_[i], lr);
    lrs.push_back(lr);
  }
  for (size_t i = 0; i < lrs.size(); ++i) opt_.groups()[i].lr = lrs[i];
}

void LRScheduler::set_base_lrs(std::vector<double> lrs) {
  MG_CHECK(lrs.size() == base_lrs_.size(), ValueError, "{}: {} initial rates for an optimizer with {} groups", name(),
           lrs.size(), base_lrs_.size());
  for (size_t i = 0; i < lrs.size(); ++i) opt_.groups()[i].initial_lr = lrs[i];
  base_lrs_ = std::move(lrs);
}

void LRScheduler::step() {
  MG_CHECK(step_ < std::numeric_limits<int64_t>::max(), StateError, "{}: the step count {} cannot go on", name(),
           step_);
  set_step(step_ + 1);
}

void LRScheduler::set_step(int64_t s) {
  MG_CHECK(s >= 0, ValueError, "{}: step must be >= 0, got {}", name(), s);
  const int64_t before = step_;
  step_ = s;
  try {
    apply();
  } catch (...) {  // a refused rate leaves the schedule where it was
    step_ = before;
    throw;
  }
}

void LRScheduler::restore(int64_t s, std::vector<double> base_lrs) {
  MG_CHECK(s >= 0, ValueError, "{}: step must be >= 0, got {}", name(), s);
  MG_CHECK(base_lrs.size() == base_lrs_.size(), ValueError,
           "{}: {} base learning rates for an optimizer with {} groups", name(), base_lrs.size(), base_lrs_.size());
  for (double lr : base_lrs)
    MG_CHECK(lr >= 0 && std::isfinite(lr), ValueError, "{}: a base learning rate must be finite and >= 0, got {}",
             name(), lr);
  step_ = s;
  base_lrs_ = std::move(base_lrs);
}

LambdaLR::LambdaLR(Optimizer& opt, std::function<double(int64_t)> lr_lambda)
    : LRScheduler(opt), lambda_(std::move(lr_lambda)) {
  MG_CHECK(lambda_ != nullptr, ValueError, "LambdaLR: lr_lambda is empty");
  apply();
}

double LambdaLR::lr_at(double base, int64_t t) const {
  const double f = lambda_(t);
  MG_CHECK(std::isfinite(f), ValueError, "LambdaLR: lr_lambda({}) = {}, not a finite factor", t, f);
  return base * f;
}

LinearLR::LinearLR(Optimizer& opt, double start, double end, int64_t total)
    : LRScheduler(opt), start_(start), end_(end), total_(total) {
  MG_CHECK(start > 0 && start <= 1, ValueError, "LinearLR: start_factor must be in (0, 1], got {}", start);
  MG_CHECK(end >= 0 && end <= 1, ValueError, "LinearLR: end_factor must be in [0, 1], got {}", end);
  MG_CHECK(total > 0, ValueError, "LinearLR: total_iters must be positive, got {}", total);
  apply();
}

double LinearLR::lr_at(double base, int64_t t) const {
  return base * (start_ + (end_ - start_) * static_cast<double>(std::min(t, total_)) / static_cast<double>(total_));
}

SequentialLR::SequentialLR(Optimizer& opt, std::vector<LRScheduler*> schedulers, std::vector<int64_t> milestones)
    : LRScheduler(opt), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  const OpScope scope("SequentialLR");  // what a part raises while the first rate is computed names it
  MG_CHECK(!schedulers_.empty() && milestones_.size() + 1 == schedulers_.size(), ValueError,
           "SequentialLR: {} schedulers need {} milestones, got {}", schedulers_.size(),
           schedulers_.empty() ? 0 : schedulers_.size() - 1, milestones_.size());
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    MG_CHECK(schedulers_[i] != nullptr, ValueError, "SequentialLR: scheduler {} is null", i);
    // PyTorch's rule: every schedule sets the optimizer SequentialLR was given (one of another
    // optimizer would compute rates from that one's base rates, for groups it does not set)
    MG_CHECK(&schedulers_[i]->optimizer() == &opt, ValueError,
             "SequentialLR: scheduler {} ({}) belongs to another optimizer than the one SequentialLR was given", i,
             schedulers_[i]->name());
    MG_CHECK(dynamic_cast<const ReduceLROnPlateau*>(schedulers_[i]) == nullptr, ValueError,
             "SequentialLR: scheduler {} is a ReduceLROnPlateau, whose rates follow a metric, not the step; it cannot "
             "be part of a SequentialLR",
             i);
  }
  for (size_t i = 0; i < milestones_.size(); ++i)
    MG_CHECK(milestones_[i] > 0 && (i == 0 || milestones_[i] > milestones_[i - 1]), ValueError,
             "SequentialLR: milestones must be positive and increasing, got {}", fmt::join(milestones_, ", "));
  apply();
}

double SequentialLR::lr_at(double base, int64_t t) const {
  const OpScope scope("SequentialLR");  // a part's error ("OneCycleLR: tried to step ...") names the sequence
  size_t i = 0;
  while (i < milestones_.size() && t >= milestones_[i]) ++i;
  return schedulers_[i]->lr_for(base, i == 0 ? t : t - milestones_[i - 1]);
}

std::map<std::string, double> SequentialLR::settings() const {
  std::map<std::string, double> s;
  for (size_t i = 0; i < milestones_.size(); ++i)
    s["milestone." + std::to_string(i)] = static_cast<double>(milestones_[i]);
  for (size_t i = 0; i < schedulers_.size(); ++i)
    for (auto& [k, v] : schedulers_[i]->settings()) s[std::to_string(i) + "." + k] = v;
  return s;
}

OneCycleLR::OneCycleLR(Optimizer& opt, double max_lr, int64_t total_steps, OneCycleOptions options)
    : OneCycleLR(opt, std::vector<double>(opt.groups().size(), max_lr), total_steps, std::move(options)) {}

OneCycleLR::OneCycleLR(Optimizer& opt, std::vector<double> max_lrs, int64_t total_steps, OneCycleOptions o)
    : LRScheduler(opt), total_(total_steps), o_(std::move(o)) {
  MG_CHECK(total_steps > 0, ValueError, "OneCycleLR: total_steps must be positive, got {}", total_steps);
  MG_CHECK(max_lrs.size() == opt.groups().size(), ValueError,
           "OneCycleLR: {} max_lr values for an optimizer with {} groups", max_lrs.size(), opt.groups().size());
  for (double m : max_lrs)
    MG_CHECK(m >= 0 && std::isfinite(m), ValueError, "OneCycleLR: max_lr must be finite and >= 0, got {}", m);
  MG_CHECK(o_.pct_start >= 0 && o_.pct_start <= 1, ValueError, "OneCycleLR: pct_start must be in [0, 1], got {}",
           o_.pct_start);
  MG_CHECK(o_.div_factor > 0 && std::isfinite(o_.div_factor) && o_.final_div_factor > 0 &&
               std::isfinite(o_.final_div_factor),
           ValueError, "OneCycleLR: div_factor and final_div_factor must be finite and > 0, got {} and {}",
           o_.div_factor, o_.final_div_factor);
  if (o_.cycle_momentum) {
    MG_CHECK(!opt.cycled_momentum().empty(), ValueError,
             "OneCycleLR: cycle_momentum needs an optimizer with momentum (SGD or RMSprop built with momentum > 0) "
             "or beta1 (Adam, AdamW); {} has neither (pass cycle_momentum = false)",
             opt.name());
    MG_CHECK(o_.base_momentum >= 0 && o_.max_momentum >= 0 && std::isfinite(o_.base_momentum) &&
                 std::isfinite(o_.max_momentum) && (opt.cycled_momentum() != "beta1" || o_.max_momentum < 1),
             ValueError, "OneCycleLR: base_momentum {} and max_momentum {} must be finite and >= 0 (below 1 for beta1)",
             o_.base_momentum, o_.max_momentum);
  }
  // PyTorch's phases, the rates as multiples of the initial rate max_lr / div_factor
  const double peak = o_.div_factor, floor = 1 / o_.final_div_factor, n = static_cast<double>(total_steps);
  const double bm = o_.base_momentum, mm = o_.max_momentum;
  if (o_.three_phase)
    phases_ = {{o_.pct_start * n - 1, 1, peak, mm, bm},
               {2 * o_.pct_start * n - 2, peak, 1, bm, mm},
               {n - 1, 1, floor, mm, mm}};
  else
    phases_ = {{o_.pct_start * n - 1, 1, peak, mm, bm}, {n - 1, peak, floor, bm, mm}};
  // A phase the schedule reaches needs a length to anneal over: the first when it ends at step 0, the
  // last when it ends where the one before does, would divide by zero at a step (PyTorch fails there
  // with ZeroDivisionError; here the options are refused at once). A middle phase of length 0, or a
  // first one that ends before step 0 (pct_start = 0), is never reached and is fine.
  const double before_last = phases_[phases_.size() - 2].end_step;
  MG_CHECK(phases_.front().end_step != 0 && phases_.back().end_step != before_last, ValueError,
           "OneCycleLR: with total_steps {} and pct_start {} the {} phase has no steps to anneal over; raise "
           "total_steps or move pct_start",
           total_steps, o_.pct_start, phases_.front().end_step == 0 ? "first" : "last");
  MG_CHECK(std::isfinite(floor) && std::isfinite(peak), ValueError,
           "OneCycleLR: div_factor {} and final_div_factor {} give rates past the double range", o_.div_factor,
           o_.final_div_factor);
  std::vector<double> initial;
  for (double m : max_lrs) {
    initial.push_back(m / o_.div_factor);
    MG_CHECK(std::isfinite(initial.back()) && std::isfinite(initial.back() * peak), ValueError,
             "OneCycleLR: max_lr {} with div_factor {} gives a rate past the double range", m, o_.div_factor);
  }
  set_base_lrs(std::move(initial));
  apply();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (o_.anneal_strategy == AnnealStrategy::Linear) return (end - start) * pct + start;
  return end + (start - end) / 2 * (std::cos(std::numbers::pi * pct) + 1);
}

std::pair<const OneCycleLR::Phase*, double> OneCycleLR::phase_at(int64_t t) const {
  MG_CHECK(t <= total_, ValueError, "OneCycleLR: tried to step {} times; the schedule has total_steps = {}", t, total_);
  const double step = static_cast<double>(t);
  double start = 0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& p = phases_[i];
    if (step <= p.end_step || i + 1 == phases_.size()) return {&p, (step - start) / (p.end_step - start)};
    start = p.end_step;
  }
  return {nullptr, 0};  // not reached: the last phase takes every step
}

double OneCycleLR::lr_at(double base, int64_t t) const {
  const auto [p, pct] = phase_at(t);
  return anneal(base * p->lr_start, base * p->lr_end, pct);
}

double OneCycleLR::momentum_at(int64_t t) const {
  const auto [p, pct] = phase_at(t);
  return anneal(p->momentum_start, p->momentum_end, pct);
}

void OneCycleLR::apply() {
  LRScheduler::apply();
  if (o_.cycle_momentum)
    for (Group& g : optimizer().groups()) g.momentum = momentum_at(last_step());
}

std::map<std::string, double> OneCycleLR::settings() const {
  return {{"total_steps", static_cast<double>(total_)},
          {"pct_start", o_.pct_start},
          {"anneal_linear", o_.anneal_strategy == AnnealStrategy::Linear ? 1.0 : 0.0},
          {"cycle_momentum", o_.cycle_momentum ? 1.0 : 0.0},
          {"base_momentum", o_.base_momentum},
          {"max_momentum", o_.max_momentum},
          {"div_factor", o_.div_factor},
          {"final_div_factor", o_.final_div_factor},
          {"three_phase", o_.three_phase ? 1.0 : 0.0}};
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& opt, PlateauOptions o) : LRScheduler(opt), o_(std::move(o)) {
  MG_CHECK(o_.factor >= 0 && o_.factor < 1, ValueError, "ReduceLROnPlateau: factor must be in [0, 1), got {}",
           o_.factor);
  MG_CHECK(o_.patience >= 0 && o_.cooldown >= 0, ValueError,
           "ReduceLROnPlateau: patience and cooldown must be >= 0, got {} and {}", o_.patience, o_.cooldown);
  MG_CHECK(std::isfinite(o_.threshold) && o_.threshold >= 0 && std::isfinite(o_.eps) && o_.eps >= 0, ValueError,
           "ReduceLROnPlateau: threshold and eps must be finite and >= 0, got {} and {}", o_.threshold, o_.eps);
  const size_t n = opt.groups().size();
  MG_CHECK(o_.min_lr.size() == 1 || o_.min_lr.size() == n, ValueError,
           "ReduceLROnPlateau: min_lr has {} values; expected 1 or one per group ({})", o_.min_lr.size(), n);
  for (double m : o_.min_lr)
    MG_CHECK(m >= 0 && std::isfinite(m), ValueError, "ReduceLROnPlateau: min_lr must be finite and >= 0, got {}", m);
  min_lrs_ = o_.min_lr.size() == n ? o_.min_lr : std::vector<double>(n, o_.min_lr[0]);
  best_ =
      o_.mode == PlateauMode::Min ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

bool ReduceLROnPlateau::better(double a) const {
  const bool rel = o_.threshold_mode == ThresholdMode::Rel;
  if (o_.mode == PlateauMode::Min) return rel ? a < best_ * (1 - o_.threshold) : a < best_ - o_.threshold;
  return rel ? a > best_ * (1 + o_.threshold) : a > best_ + o_.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  MG_CHECK(!std::isnan(metric), ValueError, "ReduceLROnPlateau: the metric is NaN");
  MG_CHECK(last_step() < std::numeric_limits<int64_t>::max(), StateError,
           "ReduceLROnPlateau: the step count {} cannot go on", last_step());
  set_step(last_step() + 1);
  if (better(metric)) {
    best_ = metric;
    bad_ = 0;
  } else {
    ++bad_;
  }
  if (cooldown_counter_ > 0) {  // just after a reduction: not counted
    --cooldown_counter_;
    bad_ = 0;
  }
  if (bad_ > o_.patience) {
    auto& groups = optimizer().groups();
    for (size_t i = 0; i < groups.size(); ++i) {
      const double lowered = std::max(groups[i].lr * o_.factor, min_lrs_[i]);
      if (groups[i].lr - lowered > o_.eps) groups[i].lr = lowered;
    }
    cooldown_counter_ = o_.cooldown;
    bad_ = 0;
  }
}

void ReduceLROnPlateau::step() {
  throw StateError("ReduceLROnPlateau: step() needs the metric it watches: call step(metric)");
}

double ReduceLROnPlateau::lr_at(double, int64_t) const {
  throw StateError(
      "ReduceLROnPlateau: its rates follow the metric, not the step, so no rate can be computed for a step "
      "(it cannot be part of a SequentialLR)");
}

std::map<std::string, double> ReduceLROnPlateau::settings() const {
  std::map<std::string, double> s{{"mode_max", o_.mode == PlateauMode::Max ? 1.0 : 0.0},
                                  {"factor", o_.factor},
                                  {"patience", static_cast<double>(o_.patience)},
                                  {"threshold", o_.threshold},
                                  {"threshold_abs", o_.threshold_mode == ThresholdMode::Abs ? 1.0 : 0.0},
                                  {"cooldown", static_cast<double>(o_.cooldown)},
                                  {"eps", o_.eps}};
  for (size_t i = 0; i < min_lrs_.size(); ++i) s["min_lr." + std::to_string(i)] = min_lrs_[i];
  return s;
}

std::map<std::string, double> ReduceLROnPlateau::state() const {
  return {{"best", best_},
          {"num_bad_epochs", static_cast<double>(bad_)},
          {"cooldown_counter", static_cast<double>(cooldown_counter_)}};
}

void ReduceLROnPlateau::check_state(const std::map<std::string, double>& s) const {
  for (const char* k : {"best", "num_bad_epochs", "cooldown_counter"})
    MG_CHECK(s.count(k), FileError, "ReduceLROnPlateau: the saved state has no \"{}\"", k);
  for (const char* k : {"num_bad_epochs", "cooldown_counter"}) {
    const double v = s.at(k);
    MG_CHECK(v >= 0 && v < 9e15 && v == std::floor(v), FileError,
             "ReduceLROnPlateau: the saved {} is {}; expected a whole number >= 0", k, v);
  }
  // best starts at +-inf (nothing seen yet); NaN would make every later metric "not better"
  MG_CHECK(!std::isnan(s.at("best")), FileError, "ReduceLROnPlateau: the saved best metric is NaN");
}

void ReduceLROnPlateau::load_state(const std::map<std::string, double>& s) {
  best_ = s.at("best");
  bad_ = static_cast<int64_t>(s.at("num_bad_epochs"));
  cooldown_counter_ = static_cast<int64_t>(s.at("cooldown_counter"));
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  MG_CHECK(step_size > 0, ValueError, "StepLR: step_size must be positive, got {}", step_size);
  MG_CHECK(gamma >= 0 && std::isfinite(gamma), ValueError, "StepLR: gamma must be finite and >= 0, got {}", gamma);
  apply();
}

double StepLR::lr_at(double base, int64_t t) const {
  return base * std::pow(gamma_, static_cast<double>(t / step_size_));
}

WarmupCosineLR::WarmupCosineLR(Optimizer& opt, int64_t warmup, int64_t total, double min_ratio)
    : LRScheduler(opt), warmup_(warmup), total_(total), min_ratio_(min_ratio) {
  MG_CHECK(warmup >= 0 && total > warmup, ValueError,
           "WarmupCosineLR: need 0 <= warmup_steps < total_steps, got warmup {} and total {}", warmup, total);
  MG_CHECK(min_ratio >= 0 && min_ratio <= 1, ValueError, "WarmupCosineLR: min_lr_ratio must be in [0, 1], got {}",
           min_ratio);
  apply();
}

double WarmupCosineLR::lr_at(double base, int64_t t) const {
  const double min_lr = base * min_ratio_;
  if (t < warmup_) return base * static_cast<double>(t + 1) / static_cast<double>(warmup_);
  if (t >= total_) return min_lr;
  const double progress = static_cast<double>(t - warmup_) / static_cast<double>(total_ - warmup_);
  return min_lr + (base - min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min)
    : LRScheduler(opt), t_max_(t_max), eta_min_(eta_min) {
  MG_CHECK(t_max >= 1, ValueError, "CosineAnnealingLR: T_max must be at least 1, got {}", t_max);
  MG_CHECK(std::isfinite(eta_min) && eta_min >= 0, ValueError,
           "CosineAnnealingLR: eta_min must be finite and >= 0, got {}", eta_min);
  apply();
}

double CosineAnnealingLR::lr_at(double base, int64_t t) const {
  return eta_min_ + (base - eta_min_) *
                        (1 + std::cos(std::numbers::pi * static_cast<double>(t) / static_cast<double>(t_max_))) / 2;
}

CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& opt, int64_t t0, int64_t t_mult, double eta_min)
    : LRScheduler(opt), t0_(t0), t_mult_(t_mult), eta_min_(eta_min) {
  MG_CHECK(t0 >= 1, ValueError, "CosineAnnealingWarmRestarts: T_0 must be at least 1, got {}", t0);
  MG_CHECK(t_mult >= 1, ValueError, "CosineAnnealingWarmRestarts: T_mult must be at least 1, got {}", t_mult);
  MG_CHECK(std::isfinite(eta_min) && eta_min >= 0, ValueError,
           "CosineAnnealingWarmRestarts: eta_min must be finite and >= 0, got {}", eta_min);
  apply();
}

double CosineAnnealingWarmRestarts::lr_at(double base, int64_t t) const {
  // Which period step t falls in, and how far into it: periods T_0, T_0 T_mult, T_0 T_mult^2, ...
  int64_t t_cur = t, t_i = t0_;
  if (t_mult_ == 1) {
    t_cur = t % t0_;
  } else {
    while (t_cur >= t_i) {  // at most log_T_mult(t / T_0) + 1 periods
      t_cur -= t_i;
      if (t_i > std::numeric_limits<int64_t>::max() / t_mult_) break;  // the next period outlasts any step
      t_i *= t_mult_;
    }
  }
  return eta_min_ + (base - eta_min_) *
                        (1 + std::cos(std::numbers::pi * static_cast<double>(t_cur) / static_cast<double>(t_i))) / 2;
}

}  // namespace mg::optim
