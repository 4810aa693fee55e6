#include "minigrad/autograd/gradcheck.h"

#include <cmath>

#include "minigrad/autograd/engine.h"
#include "minigrad/autograd/ops.h"

namespace mg {

GradcheckResult gradcheck(const std::function<Variable(const std::vector<Variable>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  std::vector<Variable> vars, leaves;
  for (const Tensor& t : inputs) {
    MG_CHECK(t.defined(), StateError, "gradcheck: input {} is undefined", vars.size());
    if (is_floating(t.dtype()))
      vars.emplace_back(t.to(DType::Float64), true), leaves.push_back(vars.back());
    else
      vars.emplace_back(t, false);
  }
  GradcheckResult r = gradcheck([&] { return fn(vars); }, leaves, opt);
  // Report the index among all inputs, not among the floating ones.
  for (size_t i = 0, f = 0; i < vars.size(); ++i)
    if (vars[i].requires_grad() && static_cast<int64_t>(f++) == r.input) {
      r.input = static_cast<int64_t>(i);
      break;
    }
  return r;
}

namespace {
// What gradcheck can work with: sane tolerances, and float64 leaves that require grad and whose
// elements each own their memory (perturbing one element of an expanded view would move others).
void check_inputs(const std::vector<Variable>& leaves, const GradcheckOptions& opt) {
  MG_CHECK(opt.eps > 0 && opt.atol >= 0 && opt.rtol >= 0 && std::isfinite(opt.eps) && std::isfinite(opt.atol) &&
               std::isfinite(opt.rtol),
           ValueError, "gradcheck: eps must be > 0 and atol, rtol >= 0, got eps {}, atol {}, rtol {}", opt.eps,
           opt.atol, opt.rtol);
  for (size_t i = 0; i < leaves.size(); ++i) {
    MG_CHECK(leaves[i].defined() && leaves[i].is_leaf() && leaves[i].requires_grad(), StateError,
             "gradcheck: input {} must be a leaf that requires grad", i);
    MG_CHECK(!has_internal_overlap(leaves[i].data()), ValueError,
             "gradcheck: input {} (shape {}, strides {}) has elements that share memory (an expanded view); pass a "
             "contiguous copy",
             i, shape_str(leaves[i].shape()), shape_str(leaves[i].data().strides()));
    MG_CHECK(leaves[i].dtype() == DType::Float64, DTypeError,
             "gradcheck: input {} is {}; gradcheck needs float64 (hint: module.to(DType::Float64))", i,
             dtype_name(leaves[i].dtype()));
  }
}

// Analytic: one backward of sum(y * v), v a fixed random weighting of the output `y`; the
// gradients of the leaves (zeros for a leaf the output does not reach). The leaves' .grad() are
// left cleared.
std::vector<Tensor> analytic_gradients(const Variable& y, const Tensor& v, const std::vector<Variable>& leaves) {
  for (const Variable& l : leaves) l.zero_grad();
  sum(mul(y, Variable(v))).backward();
  std::vector<Tensor> grads;
  for (const Variable& l : leaves) {
    grads.push_back(l.grad().defined() ? l.grad() : zeros(l.shape(), DType::Float64));
    l.zero_grad();
  }
  return grads;
}

// Numeric: central differences (f(x + eps) - f(x - eps)) / 2 eps, one element at a time through the
// tensor's own strides, each compared with the analytic gradient; the worst element is reported.
GradcheckResult compare_numeric(const std::function<double()>& f, const std::vector<Variable>& leaves,
                                const std::vector<Tensor>& grads, const GradcheckOptions& opt) {
  GradcheckResult res;
  double worst_ratio = -1;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Tensor& x = leaves[i].data();
    double* base = static_cast<double*>(x.storage()->data());
    std::vector<int64_t> idx(x.dim(), 0);
    for (int64_t e = 0; e < x.numel(); ++e) {
      int64_t off = x.offset();
      for (int64_t d = 0; d < x.dim(); ++d) off += idx[d] * x.strides()[d];
      const double orig = base[off];
      base[off] = orig + opt.eps;
      const double fp = f();
      base[off] = orig - opt.eps;
      const double fm = f();
      base[off] = orig;
      const double numeric = (fp - fm) / (2 * opt.eps);
      const double analytic = grads[i].at(idx);
      const double err = std::abs(analytic - numeric);
      const double ratio = err / (opt.atol + opt.rtol * std::abs(numeric));
      if (ratio > worst_ratio || std::isnan(ratio)) {
        worst_ratio = std::isnan(ratio) ? INFINITY : ratio;
        res.input = static_cast<int64_t>(i);
        res.index = idx;
        res.analytic = analytic;
        res.numeric = numeric;
        res.error = err;
      }
      for (int64_t d = x.dim() - 1; d >= 0; --d) {
        if (++idx[d] < x.shape()[d]) break;
        idx[d] = 0;
      }
    }
  }
  res.ok = worst_ratio <= 1;
  return res;
}
}  // namespace

GradcheckResult gradcheck(const std::function<Variable()>& fn, const std::vector<Variable>& leaves,
                          const GradcheckOptions& opt) {
  check_inputs(leaves, opt);
  const Variable y = fn();
  MG_CHECK(y.dtype() == DType::Float64, DTypeError,
           "gradcheck: fn returned a {} output; gradcheck needs float64 throughout (create constants "
           "with the inputs' dtype)",
           dtype_name(y.dtype()));
  MG_CHECK(y.requires_grad(), StateError, "gradcheck: the output does not depend on any input");
  Generator gen(opt.seed);
  const Tensor v = randn(y.shape(), gen, DType::Float64);
  const std::vector<Tensor> grads = analytic_gradients(y, v, leaves);
  GradcheckResult res = compare_numeric(
      [&] {
        NoGradGuard ng;
        return mg::sum(mg::mul(fn().data(), v)).item();
      },
      leaves, grads, opt);
  res.message = fmt::format(
      "{}: worst element is input {} at {}: analytic {:.10g}, numeric {:.10g}, "
      "|diff| {:.3g} (allowed {:.3g})",
      res.ok ? "gradcheck ok" : "gradcheck FAILED", res.input, shape_str(res.index), res.analytic, res.numeric,
      res.error, opt.atol + opt.rtol * std::abs(res.numeric));
  return res;
}

GradcheckResult gradgradcheck(const std::function<Variable(const std::vector<Variable>&)>& fn,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  // v, the output's weights, becomes one more input: g is linear in it, and checked in it too.
  MG_CHECK(fn != nullptr, ValueError, "gradgradcheck: the function is empty");
  std::vector<Variable> probe;
  bool any_floating = false;
  for (const Tensor& t : inputs) {
    MG_CHECK(t.defined(), StateError, "gradgradcheck: input {} is undefined", probe.size());
    any_floating = any_floating || is_floating(t.dtype());
    probe.emplace_back(is_floating(t.dtype()) ? t.to(DType::Float64) : t);
  }
  MG_CHECK(any_floating, ValueError, "gradgradcheck: no floating input to differentiate with respect to");
  Shape out_shape;
  {
    const NoGradGuard ng;
    out_shape = fn(probe).shape();
  }
  Generator gen(opt.seed + 1);
  std::vector<Tensor> all = inputs;
  all.push_back(randn(out_shape, gen, DType::Float64));
  // g(x, v) = J(x)^T v, all the inputs' gradients flattened into one vector; recorded (create_graph),
  // also inside gradcheck's numeric pass, which runs without grad mode.
  auto first = [&](const std::vector<Variable>& xs) {
    const EnableGradGuard recording;
    const std::vector<Variable> in(xs.begin(), xs.end() - 1);
    VariableList wrt;
    for (const Variable& x : in)
      if (x.requires_grad()) wrt.push_back(x);
    const VariableList g =
        grad({fn(in)}, wrt, {.grad_outputs = {xs.back()}, .create_graph = true, .allow_unused = true});
    VariableList flat;
    for (size_t i = 0; i < g.size(); ++i)
      flat.push_back(reshape(g[i].defined() ? g[i] : Variable(zeros(wrt[i].shape(), DType::Float64)), {-1}));
    return concat(flat, 0);
  };
  GradcheckResult r = gradcheck(first, all, opt);
  r.message = (r.ok ? "gradgradcheck ok" : "gradgradcheck FAILED") + r.message.substr(r.message.find(':'));
  return r;
}

}  // namespace mg
