#include "minigrad/optim/rmsprop.h"

#include <cmath>
#include <limits>

#include "minigrad/tensor/ops.h"

namespace mg::optim {

namespace {
void check_finite_nonneg(double v, const char* what, const char* who) {
  MG_CHECK(std::isfinite(v) && v >= 0, ValueError, "{}: {} must be finite and >= 0, got {}", who, what, v);
}

// The state tensors named `names` of a parameter seen for the first time: zeros of its shape
// (Adagrad's sum starts at `init`).
ParamState fresh_state(const Variable& p, std::initializer_list<const char*> names, double init = 0) {
  ParamState st{{"step", zeros({}, DType::Int64)}};
  for (const char* n : names) st[n] = full(p.shape(), init, p.dtype());
  return st;
}

// One parameter's update, prepared: checked before any parameter changes (a failed check leaves
// the parameters and the optimizer's state as they were).
struct Pending {
  Variable p;
  double lr, weight_decay, momentum;  // momentum: RMSprop's, the group's if a schedule cycles it
  ParamState st;                      // its state: shared with the optimizer's, or fresh (added after the update)
  bool fresh;
};
}  // namespace

// ---------------------------------------------------------------- RMSprop

RMSprop::RMSprop(std::vector<ParamGroup> groups, RMSpropOptions o)
    : Optimizer(std::move(groups), o.lr, o.weight_decay, "RMSprop"), options(o) {
  MG_CHECK(o.alpha >= 0 && o.alpha <= 1, ValueError, "RMSprop: alpha must be in [0, 1], got {}", o.alpha);
  check_finite_nonneg(o.eps, "eps", "RMSprop");
  check_finite_nonneg(o.momentum, "momentum", "RMSprop");
}

RMSprop::RMSprop(const std::vector<Variable>& params, RMSpropOptions options)
    : RMSprop(single_group(params), options) {}

std::vector<std::string> RMSprop::state_names() const {
  std::vector<std::string> n{"step", "square_avg"};
  if (options.momentum > 0) n.push_back("momentum_buffer");
  if (options.centered) n.push_back("grad_avg");
  return n;
}

void RMSprop::step() {
  std::vector<Pending> todo;
  std::vector<const char*> names{"square_avg"};
  if (options.momentum > 0) names.push_back("momentum_buffer");
  if (options.centered) names.push_back("grad_avg");
  for_each_param([&](const Group& group, const Variable& p, size_t gi, size_t pi) {
    const bool fresh = !has_state(p) || !state(p).count("step");
    if (!fresh) {
      for (const char* n : names) {
        MG_CHECK(state(p).count(n), StateError, "RMSprop: {} has no \"{}\" state (the options changed?)",
                 describe(gi, pi), n);
        check_state(gi, pi, {n});
      }
    }
    ParamState st = fresh ? fresh_state(p, {}) : state(p);
    if (fresh)
      for (const char* n : names) st[n] = zeros(p.shape(), p.dtype());
    todo.push_back({p, group.lr, group.weight_decay, group.momentum.value_or(options.momentum), st, fresh});
  });
  const double a = options.alpha;
  for (Pending& t : todo) {
    Tensor g = t.p.grad();
    if (t.weight_decay != 0) g = g + t.p.data() * t.weight_decay;
    const Tensor& v = t.st["square_avg"];
    v.copy_(v * a + g * g * (1 - a));
    Tensor d;
    if (options.centered) {
      const Tensor& ga = t.st["grad_avg"];
      ga.copy_(ga * a + g * (1 - a));
      d = sqrt(v - ga * ga) + options.eps;
    } else {
      d = sqrt(v) + options.eps;
    }
    if (options.momentum > 0) {
      const Tensor& b = t.st["momentum_buffer"];
      b.copy_(b * t.momentum + g / d);
      t.p.data().copy_(t.p.data() - b * t.lr);
    } else {
      t.p.data().copy_(t.p.data() - g / d * t.lr);
    }
    t.st["step"].data<int64_t>()[0] += 1;
    if (t.fresh)
      for (auto& [key, value] : t.st) state(t.p)[key] = value;
  }
}

// ---------------------------------------------------------------- Adagrad

Adagrad::Adagrad(std::vector<ParamGroup> groups, AdagradOptions o)
    : Optimizer(std::move(groups), o.lr, o.weight_decay, "Adagrad"), options(o) {
  check_finite_nonneg(o.lr_decay, "lr_decay", "Adagrad");
  check_finite_nonneg(o.initial_accumulator_value, "initial_accumulator_value", "Adagrad");
  check_finite_nonneg(o.eps, "eps", "Adagrad");
}

Adagrad::Adagrad(const std::vector<Variable>& params, AdagradOptions options)
    : Adagrad(single_group(params), options) {}

void Adagrad::step() {
  std::vector<Pending> todo;
  for_each_param([&](const Group& group, const Variable& p, size_t gi, size_t pi) {
    const bool fresh = !has_state(p) || !state(p).count("step");
    if (!fresh) {
      MG_CHECK(state(p).count("sum"), StateError, "Adagrad: {} has no \"sum\" state", describe(gi, pi));
      check_state(gi, pi, {"sum"});
      const int64_t t = state(p)["step"].data<int64_t>()[0];
      MG_CHECK(t >= 0 && t < std::numeric_limits<int64_t>::max(), StateError,
               "Adagrad: {} has a step count of {}, which cannot go on", describe(gi, pi), t);
    }
    todo.push_back({p, group.lr, group.weight_decay, 0.0,
                    fresh ? fresh_state(p, {"sum"}, options.initial_accumulator_value) : state(p), fresh});
  });
  for (Pending& t : todo) {
    int64_t& step = t.st["step"].data<int64_t>()[0];
    ++step;
    Tensor g = t.p.grad();
    if (t.weight_decay != 0) g = g + t.p.data() * t.weight_decay;
    const double clr = t.lr / (1 + static_cast<double>(step - 1) * options.lr_decay);
    const Tensor& s = t.st["sum"];
    s.copy_(s + g * g);
    t.p.data().copy_(t.p.data() - g / (sqrt(s) + options.eps) * clr);
    if (t.fresh)
      for (auto& [key, value] : t.st) state(t.p)[key] = value;
  }
}

}  // namespace mg::optim
