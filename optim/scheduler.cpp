#include "minigrad/optim/scheduler.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "minigrad/tensor/ops.h"

namespace mg::optim {

LRScheduler::LRScheduler(Optimizer& opt) : opt_(opt) {
  for (const Group& g : opt.groups()) base_lrs_.push_back(g.lr);
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
