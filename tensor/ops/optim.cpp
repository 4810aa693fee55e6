// Optimizer update kernels.
#include "minigrad/tensor/ops/optim.h"

#include <cmath>

#include "minigrad/tensor/parallel.h"

namespace mg {

// p, g, m, v: the same shape, flattened to n elements
void adam_step_(const Tensor& param, const Tensor& grad0, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const AdamStepArgs& a) {
  for (const Tensor* t : {&grad0, &exp_avg, &exp_avg_sq}) {
    MG_CHECK(!t->defined() || t->dtype() == param.dtype(), DTypeError,
             "adam_step_: parameter {} and a gradient or state of {}", dtype_name(param.dtype()),
             dtype_name(t->dtype()));
    MG_CHECK(t->defined() && t->shape() == param.shape(), ShapeError,
             "adam_step_: parameter {} {} and a gradient or state of {} {} do not match", dtype_name(param.dtype()),
             shape_str(param.shape()), t->defined() ? dtype_name(t->dtype()) : "undefined",
             t->defined() ? shape_str(t->shape()) : "");
  }
  MG_CHECK(exp_avg.is_contiguous() && exp_avg_sq.is_contiguous(), ValueError,
           "adam_step_: the state must be contiguous");
  // A parameter view that is not contiguous is updated through a contiguous copy, then written back.
  const Tensor p = param.is_contiguous() ? param : param.contiguous();
  const Tensor grad = grad0.contiguous();
  visit_float(param.dtype(), "adam_step_", [&]<class T>() {
    T* w = p.data<T>();
    const T* g = grad.data<T>();
    T* m = exp_avg.data<T>();
    T* v = exp_avg_sq.data<T>();
    const T lr = static_cast<T>(a.lr), wd = static_cast<T>(a.weight_decay);
    const T b1 = static_cast<T>(a.beta1), b2 = static_cast<T>(a.beta2), eps = static_cast<T>(a.eps);
    const T step_size = static_cast<T>(a.lr / (1 - std::pow(a.beta1, static_cast<double>(a.step))));
    const T bc2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(a.beta2, static_cast<double>(a.step))));
    const bool decoupled = a.decoupled;
    parallel_for(0, p.numel(), kGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        T gi = g[i];
        if (decoupled)
          w[i] *= T(1) - lr * wd;
        else if (wd != 0)
          gi += wd * w[i];
        m[i] = m[i] * b1 + gi * (T(1) - b1);
        v[i] = v[i] * b2 + gi * gi * (T(1) - b2);
        w[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
      }
    });
  });
  if (!param.is_contiguous()) param.copy_(p);
}

}  // namespace mg
