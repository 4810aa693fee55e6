// L-BFGS and its strong-Wolfe line search (optim/lbfgs.h has the iteration).
#include "minigrad/optim/lbfgs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "minigrad/tensor/ops.h"

namespace mg::optim {
namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
// y += alpha x
void axpy(double alpha, const std::vector<double>& x, std::vector<double>& y) {
  for (size_t i = 0; i < y.size(); ++i) y[i] += alpha * x[i];
}
// The largest |a_i|; NaN if any a_i is NaN (std::max would drop it, and an all-NaN gradient would
// look like a converged one: PyTorch's abs().max() keeps the NaN, and so does this).
double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double v : a) m = std::isnan(v) || std::isnan(m) ? NAN : std::max(m, std::abs(v));
  return m;
}
bool all_finite(const Tensor& t) {
  for (double v : t.contiguous().to_vector<double>())
    if (!std::isfinite(v)) return false;
  return true;
}
// PyTorch's default max_eval, max_iter * 5 / 4, without the overflow of max_iter * 5 (saturating at
// INT64_MAX: max_iter = 2^61 once stopped after one iteration).
int64_t default_max_eval(int64_t max_iter) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return max_iter > kMax / 5 * 4 ? kMax : max_iter / 4 * 5 + max_iter % 4 * 5 / 4;
}

// The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, kept within
// [lo, hi] (Nocedal & Wright, equation 3.59); the middle of the bounds if the cubic has none.
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                         std::optional<std::pair<double, double>> bounds = std::nullopt) {
  const auto [lo, hi] = bounds ? *bounds : (x1 <= x2 ? std::pair{x1, x2} : std::pair{x2, x1});
  const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const double d2_square = d1 * d1 - g1 * g2;
  if (d2_square < 0) return (lo + hi) / 2;
  const double d2 = std::sqrt(d2_square);
  const double min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                                  : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
  return std::min(std::max(min_pos, lo), hi);
}

struct LineSearchResult {
  double f;
  std::vector<double> g;
  double t;
  int64_t evals;
};

// A step length t along d satisfying the strong Wolfe conditions (Nocedal & Wright, algorithms
// 3.5 and 3.6, as torch.optim.lbfgs._strong_wolfe):
//   sufficient decrease  f(x + t d) <= f(x) + c1 t g.d
//   curvature            |g(x + t d).d| <= -c2 g.d
// First the step grows (by cubic interpolation, at most 10x) until it brackets such a t, then the
// bracket is narrowed ("zoom"). `phi(t)` evaluates the loss and flat gradient at x + t d.
template <class Phi>
LineSearchResult strong_wolfe(Phi&& phi, double t, const std::vector<double>& d, double f, const std::vector<double>& g,
                              double gtd, double tolerance_change) {
  constexpr double c1 = 1e-4, c2 = 0.9;
  constexpr int64_t max_ls = 25;
  const double d_norm = max_abs(d);
  auto [f_new, g_new] = phi(t);
  int64_t evals = 1;
  double gtd_new = dot(g_new, d);
  double t_prev = 0, f_prev = f, gtd_prev = gtd;
  std::vector<double> g_prev = g;
  bool done = false;
  int64_t ls_iter = 0;
  // the bracket: two step lengths with their losses, gradients and slopes (one when done)
  std::vector<double> bt, bf, bgtd;
  std::vector<std::vector<double>> bg;
  while (ls_iter < max_ls) {
    if (f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= f_prev)) {
      bt = {t_prev, t}, bf = {f_prev, f_new}, bg = {g_prev, g_new}, bgtd = {gtd_prev, gtd_new};
      break;
    }
    if (std::abs(gtd_new) <= -c2 * gtd) {
      bt = {t}, bf = {f_new}, bg = {g_new}, done = true;
      break;
    }
    if (gtd_new >= 0) {
      bt = {t_prev, t}, bf = {f_prev, f_new}, bg = {g_prev, g_new}, bgtd = {gtd_prev, gtd_new};
      break;
    }
    // extrapolate: a longer step, between 1.01 t and 10 t
    const double min_step = t + 0.01 * (t - t_prev), max_step = t * 10;
    const double tmp = t;
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, std::pair{min_step, max_step});
    t_prev = tmp, f_prev = f_new, g_prev = g_new, gtd_prev = gtd_new;
    std::tie(f_new, g_new) = phi(t);
    ++evals;
    gtd_new = dot(g_new, d);
    ++ls_iter;
  }
  if (ls_iter == max_ls) bt = {0, t}, bf = {f, f_new}, bg = {g, g_new};  // (no zoom follows)

  // zoom: shrink the bracket [bt[low], bt[high]] around a step satisfying both conditions
  bool insufficient_progress = false;
  size_t low = bf.front() <= bf.back() ? 0 : 1, high = 1 - low;
  while (!done && ls_iter < max_ls) {
    if (std::abs(bt[1] - bt[0]) * d_norm < tolerance_change) break;  // the bracket is too small to matter
    t = cubic_interpolate(bt[0], bf[0], bgtd[0], bt[1], bf[1], bgtd[1]);
    // a trial too close to an end of the bracket is moved 10% of its width inside
    const double hi_t = std::max(bt[0], bt[1]), lo_t = std::min(bt[0], bt[1]), eps = 0.1 * (hi_t - lo_t);
    if (std::min(hi_t - t, t - lo_t) < eps) {
      if (insufficient_progress || t >= hi_t || t <= lo_t) {
        t = std::abs(t - hi_t) < std::abs(t - lo_t) ? hi_t - eps : lo_t + eps;
        insufficient_progress = false;
      } else {
        insufficient_progress = true;
      }
    } else {
      insufficient_progress = false;
    }
    std::tie(f_new, g_new) = phi(t);
    ++evals;
    gtd_new = dot(g_new, d);
    ++ls_iter;
    if (f_new > f + c1 * t * gtd || f_new >= bf[low]) {
      bt[high] = t, bf[high] = f_new, bg[high] = g_new, bgtd[high] = gtd_new;
      low = bf[0] <= bf[1] ? 0 : 1, high = 1 - low;
    } else {
      if (std::abs(gtd_new) <= -c2 * gtd) {
        done = true;
      } else if (gtd_new * (bt[high] - bt[low]) >= 0) {
        bt[high] = bt[low], bf[high] = bf[low], bg[high] = bg[low], bgtd[high] = bgtd[low];
      }
      bt[low] = t, bf[low] = f_new, bg[low] = g_new, bgtd[low] = gtd_new;
    }
  }
  return {bf[low], bg[low], bt[low], evals};
}

}  // namespace

LBFGS::LBFGS(const std::vector<Variable>& params, LBFGSOptions o)
    : Optimizer(single_group(params), o.lr, 0, "LBFGS"), options(std::move(o)) {
  MG_CHECK(options.max_iter > 0, ValueError, "LBFGS: max_iter must be positive, got {}", options.max_iter);
  MG_CHECK(!options.max_eval || *options.max_eval > 0, ValueError, "LBFGS: max_eval must be positive, got {}",
           options.max_eval.value_or(0));
  MG_CHECK(options.history_size > 0, ValueError, "LBFGS: history_size must be positive, got {}", options.history_size);
  MG_CHECK(options.tolerance_grad >= 0 && options.tolerance_change >= 0, ValueError,
           "LBFGS: the tolerances must be >= 0, got {} and {}", options.tolerance_grad, options.tolerance_change);
  for (const Variable& p : params)
    MG_CHECK(p.dtype() == params.front().dtype() && is_floating(p.dtype()), DTypeError,
             "LBFGS: the parameters must share one floating dtype; got {} and {}", dtype_name(params.front().dtype()),
             dtype_name(p.dtype()));
}

void LBFGS::step() { throw StateError("LBFGS: step() needs the closure that re-evaluates the loss: step(closure)"); }

std::map<std::string, double> LBFGS::hyper_parameters() const {
  return {{"max_iter", static_cast<double>(options.max_iter)},
          {"max_eval", static_cast<double>(options.max_eval.value_or(default_max_eval(options.max_iter)))},
          {"tolerance_grad", options.tolerance_grad},
          {"tolerance_change", options.tolerance_change},
          {"history_size", static_cast<double>(options.history_size)},
          {"strong_wolfe", options.line_search_fn == LineSearch::StrongWolfe ? 1.0 : 0.0}};
}

std::vector<double> LBFGS::flat_grad() const {
  std::vector<double> g;
  for (const Variable& p : groups()[0].params) {
    if (!p.grad().defined()) {
      g.resize(g.size() + p.numel(), 0.0);  // no gradient: zeros, as PyTorch
      continue;
    }
    MG_CHECK(p.grad().shape() == p.shape(), ShapeError, "LBFGS: a gradient of shape {} for a parameter of shape {}",
             shape_str(p.grad().shape()), shape_str(p.shape()));
    for (double v : p.grad().to(DType::Float64).contiguous().to_vector<double>()) g.push_back(v);
  }
  return g;
}

std::vector<double> LBFGS::flat_params() const {
  std::vector<double> x;
  for (const Variable& p : groups()[0].params)
    for (double v : p.data().to(DType::Float64).contiguous().to_vector<double>()) x.push_back(v);
  return x;
}

void LBFGS::set_params(const std::vector<double>& x) {
  size_t offset = 0;
  for (const Variable& p : groups()[0].params) {
    const auto n = static_cast<size_t>(p.numel());
    const std::vector<double> part(x.begin() + static_cast<std::ptrdiff_t>(offset),
                                   x.begin() + static_cast<std::ptrdiff_t>(offset + n));
    p.data().copy_(from_vector(part, p.shape()).to(p.dtype()));
    offset += n;
  }
}

void LBFGS::add_to_params(double t, const std::vector<double>& d) {
  std::vector<double> x = flat_params();
  axpy(t, d, x);
  set_params(x);
}

double LBFGS::loss_of(const std::function<Variable()>& closure) {
  const Variable loss = closure();
  MG_CHECK(loss.defined() && loss.numel() == 1, ValueError, "LBFGS: the closure must return the loss, one number");
  ++func_evals_;
  return loss.data().to(DType::Float64).item<double>();
}

std::pair<double, std::vector<double>> LBFGS::evaluate_at(const std::function<Variable()>& closure,
                                                          const std::vector<double>& x, double t,
                                                          const std::vector<double>& d) {
  add_to_params(t, d);
  const double loss = loss_of(closure);
  std::vector<double> g = flat_grad();
  set_params(x);
  return {loss, std::move(g)};
}

Variable LBFGS::step(const std::function<Variable()>& closure) {
  MG_CHECK(closure != nullptr, ValueError, "LBFGS: the closure is empty");
  const double lr = groups()[0].lr;
  const int64_t max_eval = options.max_eval.value_or(default_max_eval(options.max_iter));
  const Variable orig_loss = closure();
  MG_CHECK(orig_loss.defined() && orig_loss.numel() == 1, ValueError,
           "LBFGS: the closure must return the loss, one number");
  ++func_evals_;
  double loss = orig_loss.data().to(DType::Float64).item<double>();
  int64_t current_evals = 1;
  std::vector<double> g = flat_grad();
  if (max_abs(g) <= options.tolerance_grad) return orig_loss;  // already optimal

  // (the updates below write the parameters' data: no graph records them; the closure records its own)
  for (int64_t n_iter = 1;; ++n_iter) {
    ++n_iter_;
    if (n_iter_ == 1) {  // the first iteration ever: steepest descent, no history
      d_.resize(g.size());
      for (size_t i = 0; i < g.size(); ++i) d_[i] = -g[i];
      old_dirs_.clear(), old_stps_.clear(), ro_.clear();
      h_diag_ = 1;
    } else {  // the two-loop recursion over the history
      std::vector<double> y(g.size()), s(g.size());
      for (size_t i = 0; i < g.size(); ++i) y[i] = g[i] - prev_flat_grad_[i], s[i] = d_[i] * t_;
      const double ys = dot(y, s);
      if (ys > 1e-10) {  // keep the pair only where the curvature is positive
        if (static_cast<int64_t>(old_dirs_.size()) == options.history_size)
          old_dirs_.pop_front(), old_stps_.pop_front(), ro_.pop_front();
        old_dirs_.push_back(y), old_stps_.push_back(s), ro_.push_back(1 / ys);
        h_diag_ = ys / dot(y, y);
      }
      const size_t k = old_dirs_.size();
      std::vector<double> al(k), q(g.size());
      for (size_t i = 0; i < g.size(); ++i) q[i] = -g[i];
      for (size_t i = k; i-- > 0;) {
        al[i] = dot(old_stps_[i], q) * ro_[i];
        axpy(-al[i], old_dirs_[i], q);
      }
      for (double& v : q) v *= h_diag_;
      for (size_t i = 0; i < k; ++i) {
        const double be_i = dot(old_dirs_[i], q) * ro_[i];
        axpy(al[i] - be_i, old_stps_[i], q);
      }
      d_ = std::move(q);
    }
    prev_flat_grad_ = g;
    prev_loss_ = loss;
    // the step length: the first ever is scaled down by the gradient's size
    if (n_iter_ == 1) {
      double l1 = 0;
      for (double v : g) l1 += std::abs(v);
      t_ = std::min(1.0, 1.0 / l1) * lr;
    } else {
      t_ = lr;
    }
    const double gtd = dot(g, d_);  // the slope along d: not downhill enough, stop
    if (gtd > -options.tolerance_change) break;

    int64_t ls_evals = 0;
    bool opt_cond = false;
    if (options.line_search_fn == LineSearch::StrongWolfe) {
      const std::vector<double> x = flat_params();
      LineSearchResult r = strong_wolfe([&](double t) { return evaluate_at(closure, x, t, d_); }, t_, d_, loss, g, gtd,
                                        options.tolerance_change);
      loss = r.f, g = std::move(r.g), t_ = r.t, ls_evals = r.evals;
      add_to_params(t_, d_);
      opt_cond = max_abs(g) <= options.tolerance_grad;
    } else {
      add_to_params(t_, d_);
      if (n_iter != options.max_iter) {  // re-evaluate at the new point (not after the last iteration)
        loss = loss_of(closure);
        g = flat_grad();
        opt_cond = max_abs(g) <= options.tolerance_grad;
        ls_evals = 1;
      }
    }
    current_evals += ls_evals;
    // stop: out of iterations or evaluations, at a minimum, or no longer moving
    if (n_iter == options.max_iter || current_evals >= max_eval || opt_cond) break;
    double step_size = 0;
    for (double v : d_) step_size = std::max(step_size, std::abs(v * t_));
    if (step_size <= options.tolerance_change || std::abs(loss - prev_loss_) < options.tolerance_change) break;
  }
  return orig_loss;
}

namespace {
Tensor vector_tensor(const std::vector<double>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }
Tensor rows_tensor(const std::deque<std::vector<double>>& rows, int64_t n) {
  std::vector<double> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return from_vector(flat, {static_cast<int64_t>(rows.size()), n});
}
}  // namespace

std::map<std::string, Tensor> LBFGS::shared_state() const {
  int64_t n = 0;
  for (const Variable& p : groups()[0].params) n += p.numel();
  return {{"d", vector_tensor(d_)},
          {"prev_flat_grad", vector_tensor(prev_flat_grad_)},
          {"old_dirs", rows_tensor(old_dirs_, n)},
          {"old_stps", rows_tensor(old_stps_, n)},
          {"ro", from_vector(std::vector<double>(ro_.begin(), ro_.end()), {static_cast<int64_t>(ro_.size())})},
          {"scalars",
           vector_tensor({t_, h_diag_, prev_loss_, static_cast<double>(func_evals_), static_cast<double>(n_iter_)})}};
}

void LBFGS::check_shared_state(const std::map<std::string, Tensor>& s) const {
  int64_t n = 0;
  for (const Variable& p : groups()[0].params) n += p.numel();
  auto get = [&](const char* k) -> const Tensor& {
    auto it = s.find(k);
    MG_CHECK(it != s.end(), FileError, "load_checkpoint: the LBFGS state has no \"{}\"", k);
    MG_CHECK(it->second.dtype() == DType::Float64, FileError, "load_checkpoint: LBFGS state \"{}\" is {}, not float64",
             k, dtype_name(it->second.dtype()));
    return it->second;
  };
  MG_CHECK(s.size() == 6, FileError, "load_checkpoint: the LBFGS state has {} entries; expected 6", s.size());
  const Tensor& sc = get("scalars");
  MG_CHECK(sc.shape() == Shape{5}, FileError, "load_checkpoint: LBFGS \"scalars\" has shape {}; expected (5)",
           shape_str(sc.shape()));
  const std::vector<double> v = sc.to_vector<double>();
  for (int i = 3; i < 5; ++i)
    MG_CHECK(v[i] >= 0 && v[i] < 9e15 && v[i] == std::floor(v[i]), FileError,
             "load_checkpoint: LBFGS's {} is {}; expected a whole number >= 0", i == 3 ? "func_evals" : "n_iter", v[i]);
  const int64_t iters = static_cast<int64_t>(v[4]);  // (converted only once checked: 1e300 or NaN would be UB)
  // the step length, H0's scale and the last loss: finite numbers (NaN here makes the next step NaN)
  for (int i = 0; i < 3; ++i)
    MG_CHECK(std::isfinite(v[i]), FileError, "load_checkpoint: LBFGS's {} is {}; expected a finite number",
             i == 0   ? "step length t"
             : i == 1 ? "H_diag"
                      : "prev_loss",
             v[i]);
  const Shape flat{iters == 0 ? 0 : n};  // before the first iteration there is no direction yet
  for (const char* k : {"d", "prev_flat_grad"})
    MG_CHECK(get(k).shape() == flat, FileError, "load_checkpoint: LBFGS \"{}\" has shape {}; the parameters need {}", k,
             shape_str(get(k).shape()), shape_str(flat));
  const int64_t k = get("ro").dim() == 1 ? get("ro").size(0) : -1;
  MG_CHECK(k >= 0 && k <= options.history_size, FileError,
           "load_checkpoint: LBFGS \"ro\" has shape {}; expected at most history_size = {} values",
           shape_str(get("ro").shape()), options.history_size);
  for (const char* key : {"old_dirs", "old_stps"})
    MG_CHECK(get(key).shape() == (Shape{k, n}), FileError, "load_checkpoint: LBFGS \"{}\" has shape {}; expected {}",
             key, shape_str(get(key).shape()), shape_str(Shape{k, n}));
  for (const char* key : {"d", "prev_flat_grad", "ro", "old_dirs", "old_stps"})
    MG_CHECK(all_finite(get(key)), FileError, "load_checkpoint: LBFGS \"{}\" holds NaN or inf", key);
}

void LBFGS::load_shared_state(const std::map<std::string, Tensor>& s) {
  const std::vector<double> v = s.at("scalars").to_vector<double>();
  t_ = v[0], h_diag_ = v[1], prev_loss_ = v[2];
  func_evals_ = static_cast<int64_t>(v[3]), n_iter_ = static_cast<int64_t>(v[4]);
  d_ = s.at("d").contiguous().to_vector<double>();
  prev_flat_grad_ = s.at("prev_flat_grad").contiguous().to_vector<double>();
  const std::vector<double> r = s.at("ro").contiguous().to_vector<double>();
  ro_.assign(r.begin(), r.end());
  auto rows = [](const Tensor& t) {
    std::deque<std::vector<double>> out;
    const std::vector<double> flat = t.contiguous().to_vector<double>();
    const int64_t n = t.size(1);
    for (int64_t i = 0; i < t.size(0); ++i) out.emplace_back(flat.begin() + i * n, flat.begin() + (i + 1) * n);
    return out;
  };
  old_dirs_ = rows(s.at("old_dirs"));
  old_stps_ = rows(s.at("old_stps"));
}

}  // namespace mg::optim
