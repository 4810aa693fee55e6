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

void LRScheduler::apply() {
  for (size_t i = 0; i < base_lrs_.size(); ++i) opt_.groups()[i].lr = lr_at(base_lrs_[i], step_);
}

void LRScheduler::step() {
  MG_CHECK(step_ < std::numeric_limits<int64_t>::max(), StateError, "LRScheduler: the step count {} cannot go on",
           step_);
  ++step_;
  apply();
}

void LRScheduler::set_step(int64_t s) {
  MG_CHECK(s >= 0, ValueError, "LRScheduler: step must be >= 0, got {}", s);
  step_ = s;
  apply();
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
  MG_CHECK(!schedulers_.empty() && milestones_.size() + 1 == schedulers_.size(), ValueError,
           "SequentialLR: {} schedulers need {} milestones, got {}", schedulers_.size(),
           schedulers_.empty() ? 0 : schedulers_.size() - 1, milestones_.size());
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    MG_CHECK(schedulers_[i] != nullptr, ValueError, "SequentialLR: scheduler {} is null", i);
    MG_CHECK(schedulers_[i]->base_lrs().size() == base_lrs().size(), ValueError,
             "SequentialLR: scheduler {} ({}) belongs to an optimizer with other groups", i, schedulers_[i]->name());
  }
  for (size_t i = 0; i < milestones_.size(); ++i)
    MG_CHECK(milestones_[i] > 0 && (i == 0 || milestones_[i] > milestones_[i - 1]), ValueError,
             "SequentialLR: milestones must be positive and increasing, got {}", fmt::join(milestones_, ", "));
  apply();
}

double SequentialLR::lr_at(double base, int64_t t) const {
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

}  // namespace mg::optim
