#include "optim/adam.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "tensor/parallel.h"

namespace mg::optim {

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions o) : Adam(std::move(groups), o, false) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions o, bool decoupled)
    : Optimizer(std::move(groups), o.lr, o.weight_decay, decoupled ? "AdamW" : "Adam"), options(o), decoupled_(decoupled) {
  MG_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, ValueError,
           "{}: betas must be in [0, 1), got ({}, {})", name(), o.beta1, o.beta2);
  MG_CHECK(o.eps >= 0, ValueError, "{}: eps must be >= 0, got {}", name(), o.eps);
}

void Adam::step() {
  NoGradGuard no_grad;
  for (Group& group : groups()) {
    for (Variable& p : group.params) {
      if (!p.grad().defined()) continue;
      ParamState& st = state(p);
      if (!st.count("step")) {
        st["step"] = zeros({}, DType::Int64);
        st["exp_avg"] = zeros(p.shape(), p.dtype());
        st["exp_avg_sq"] = zeros(p.shape(), p.dtype());
      }
      int64_t& t = st["step"].data<int64_t>()[0];
      ++t;
      // One fused pass over the elements, in the order torch.optim applies the same operations.
      visit_float(p.dtype(), name(), [&]<class T>() {
        const Tensor grad = p.grad().contiguous();
        MG_CHECK(p.data().is_contiguous(), StateError, "{}: parameter {} is not contiguous", name(), p.name());
        T* w = p.data().data<T>();
        const T* g = grad.data<T>();
        T* m = st["exp_avg"].data<T>();
        T* v = st["exp_avg_sq"].data<T>();
        const T lr = static_cast<T>(group.lr), wd = static_cast<T>(group.weight_decay);
        const T b1 = static_cast<T>(options.beta1), b2 = static_cast<T>(options.beta2), eps = static_cast<T>(options.eps);
        const T step_size = static_cast<T>(group.lr / (1 - std::pow(options.beta1, static_cast<double>(t))));
        const T bc2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(options.beta2, static_cast<double>(t))));
        const bool decoupled = decoupled_;
        parallel_for(0, p.numel(), kGrain, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) {
            T gi = g[i];
            if (decoupled) w[i] *= T(1) - lr * wd;
            else if (wd != 0) gi += wd * w[i];
            m[i] = m[i] * b1 + gi * (T(1) - b1);
            v[i] = v[i] * b2 + gi * gi * (T(1) - b2);
            w[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
          }
        });
      });
    }
  }
}

}  // namespace mg::optim
