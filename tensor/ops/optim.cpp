// Optimizer update kernels.
#include "minigrad/tensor/ops/optim.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "minigrad/tensor/parallel.h"

namespace mg {

namespace {
void check_adam_tensors(const AdamTensors& t, std::string_view op) {
  for (const Tensor* s : {&t.grad, &t.exp_avg, &t.exp_avg_sq}) {
    MG_CHECK(!s->defined() || s->dtype() == t.param.dtype(), DTypeError,
             "{}: parameter {} and a gradient or state of {}", op, dtype_name(t.param.dtype()), dtype_name(s->dtype()));
    MG_CHECK(s->defined() && s->shape() == t.param.shape(), ShapeError,
             "{}: parameter {} {} and a gradient or state of {} {} do not match", op, dtype_name(t.param.dtype()),
             shape_str(t.param.shape()), s->defined() ? dtype_name(s->dtype()) : "undefined",
             s->defined() ? shape_str(s->shape()) : "");
  }
  MG_CHECK(t.exp_avg.is_contiguous() && t.exp_avg_sq.is_contiguous(), ValueError, "{}: the state must be contiguous",
           op);
}

// Elements [i0, i1) of one parameter: the constants in double from the step count, rounded once to
// T; then one loop for AdamW and one for Adam, each free of branches so that it vectorises.
template <class T>
void adam_update(T* w, const T* g, T* m, T* v, int64_t i0, int64_t i1, const AdamStepArgs& a) {
  const T lr = static_cast<T>(a.lr), wd = static_cast<T>(a.weight_decay);
  const T b1 = static_cast<T>(a.beta1), b2 = static_cast<T>(a.beta2), eps = static_cast<T>(a.eps);
  const T step_size = static_cast<T>(a.lr / (1 - std::pow(a.beta1, static_cast<double>(a.step))));
  const T bc2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(a.beta2, static_cast<double>(a.step))));
  auto moments_and_step = [&](int64_t i, T gi) {
    m[i] = m[i] * b1 + gi * (T(1) - b1);
    v[i] = v[i] * b2 + gi * gi * (T(1) - b2);
    w[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
  };
  if (a.decoupled) {
    for (int64_t i = i0; i < i1; ++i) {
      w[i] *= T(1) - lr * wd;
      moments_and_step(i, g[i]);
    }
  } else if (wd != 0) {
    for (int64_t i = i0; i < i1; ++i) moments_and_step(i, g[i] + wd * w[i]);
  } else {
    for (int64_t i = i0; i < i1; ++i) moments_and_step(i, g[i]);
  }
}

// Every parameter's elements are cut into pieces of at most kGrain, and all the pieces of all the
// parameters are shared out over the pool together: a model's many small tensors (biases, layer
// norms) no longer run one after another, each too small to split. Each element's update is the
// same arithmetic wherever its piece runs, so the bits do not depend on the split. Parameters that
// share memory (two views of one buffer) are updated one after another instead, in order, as
// separate calls would: run together, two threads would update the same elements at once.
void adam_steps(const std::vector<AdamTensors>& items, std::string_view op) {
  std::vector<const void*> storages;
  for (const AdamTensors& t : items) {
    MG_CHECK(t.param.defined(), StateError, "{}: a parameter is undefined", op);
    check_adam_tensors(t, op);
    visit_float(t.param.dtype(), op, []<class T>() {});  // a DTypeError unless float32 or float64
    for (const Tensor* s : {&t.param, &t.exp_avg, &t.exp_avg_sq}) storages.push_back(s->storage().get());
  }
  std::sort(storages.begin(), storages.end());
  if (items.size() > 1 && std::adjacent_find(storages.begin(), storages.end()) != storages.end()) {
    for (const AdamTensors& t : items) adam_steps({t}, op);
    return;
  }
  // A parameter view that is not contiguous is updated through a contiguous copy, then written back.
  std::vector<Tensor> params, grads;
  struct Piece {
    size_t item;
    int64_t begin, end;
  };
  std::vector<Piece> pieces;
  for (size_t k = 0; k < items.size(); ++k) {
    params.push_back(items[k].param.is_contiguous() ? items[k].param : items[k].param.contiguous());
    grads.push_back(items[k].grad.contiguous());
    for (int64_t b = 0; b < items[k].param.numel(); b += kGrain)
      pieces.push_back({k, b, std::min(items[k].param.numel(), b + kGrain)});
  }
  parallel_for(0, static_cast<int64_t>(pieces.size()), 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const Piece& pc = pieces[p];
      const AdamTensors& t = items[pc.item];
      visit_float(t.param.dtype(), op, [&]<class T>() {
        adam_update<T>(params[pc.item].data<T>(), grads[pc.item].data<T>(), t.exp_avg.data<T>(), t.exp_avg_sq.data<T>(),
                       pc.begin, pc.end, t.args);
      });
    }
  });
  for (size_t k = 0; k < items.size(); ++k) {
    if (!items[k].param.is_contiguous()) items[k].param.copy_(params[k]);
    for (const Tensor* s : {&items[k].param, &items[k].exp_avg, &items[k].exp_avg_sq}) s->storage()->bump_version();
  }
}
}  // namespace

void adam_step_many_(const std::vector<AdamTensors>& items) { adam_steps(items, "adam_step_many_"); }

void adam_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const AdamStepArgs& args) {
  adam_steps({AdamTensors{param, grad, exp_avg, exp_avg_sq, args}}, "adam_step_");
}

}  // namespace mg
