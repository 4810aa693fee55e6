#pragma once
// L-BFGS (Nocedal & Wright, Numerical Optimization, algorithms 7.4 and 7.5; torch.optim.LBFGS's
// exact iteration). A quasi-Newton method: from the last `history_size` steps s = x_{k+1} - x_k
// and gradient changes y = g_{k+1} - g_k it builds, without ever forming a matrix, the product of
// an approximate inverse Hessian with the gradient (the two-loop recursion), and steps along it.
// One step() runs up to max_iter such iterations, re-evaluating the model through a closure:
//
//   optim::LBFGS opt(model.parameters(), {.line_search_fn = optim::LineSearch::StrongWolfe});
//   opt.step([&] { opt.zero_grad(); Variable loss = criterion(model(x), y); loss.backward(); return loss; });
//
// Each iteration k (d the direction, t the step length, g the flat gradient of every parameter):
//   k = 1:  d = -g                                              (steepest descent)
//   k > 1:  y = g - g_prev, s = t d_prev; kept if y.s > 1e-10, with rho = 1 / y.s; H0 = y.s / y.y
//           q = -g; for i newest..oldest: a_i = rho_i s_i.q, q -= a_i y_i
//           r = H0 q; for i oldest..newest: b = rho_i y_i.r, r += (a_i - b) s_i;   d = r
//   t = lr (k = 1: min(1, 1 / |g|_1) lr), or the strong-Wolfe line search's choice; x += t d.
// It stops early when |g|_inf <= tolerance_grad, |t d|_inf or the change of the loss <=
// tolerance_change, or after max_eval evaluations. The arithmetic is in double whatever the
// parameters' dtype; the parameters are all of one floating dtype, in one group (as PyTorch's).
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "minigrad/optim/optimizer.h"

namespace mg::optim {

/// L-BFGS's line search: none (a fixed step) or one satisfying the strong Wolfe conditions.
enum class LineSearch { None, StrongWolfe };

/// L-BFGS's settings (PyTorch's defaults).
struct LBFGSOptions {
  double lr = 1;
  /// Iterations per step()
  int64_t max_iter = 20;
  /// Closure evaluations per step(); unset: max_iter * 5 / 4.
  std::optional<int64_t> max_eval;
  /// Stop when every |gradient| is at most this.
  double tolerance_grad = 1e-7;
  /// Stop when the step or the loss changes less than this.
  double tolerance_change = 1e-9;
  /// How many (s, y) pairs are kept.
  int64_t history_size = 100;
  /// None (a fixed step lr) or StrongWolfe (PyTorch's line_search_fn=None or "strong_wolfe").
  LineSearch line_search_fn = LineSearch::None;
};

class LBFGS : public Optimizer {
 public:
  /// L-BFGS over `params` (one group, one floating dtype).
  explicit LBFGS(const std::vector<Variable>& params, LBFGSOptions options = {});
  /// One step: up to max_iter iterations, each calling closure() (which clears the gradients,
  /// computes the loss, calls backward() and returns the loss). Returns the first loss.
  Variable step(const std::function<Variable()>& closure);
  /// A StateError: L-BFGS needs the closure, step(closure).
  void step() override;
  std::string name() const override { return "LBFGS"; }
  /// None per parameter: the history is flat, over every parameter at once (see history()).
  std::vector<std::string> state_names() const override { return {}; }
  std::map<std::string, double> hyper_parameters() const override;
  /// Closure evaluations over every step so far (PyTorch's state["func_evals"]).
  int64_t func_evals() const { return func_evals_; }
  /// Iterations over every step so far (PyTorch's state["n_iter"]).
  int64_t n_iter() const { return n_iter_; }
  /// How many (s, y) pairs the history holds now.
  size_t history() const { return old_dirs_.size(); }
  /// The direction, the last gradient, the history (s, y, rho) and the counters, as float64
  /// tensors: "d", "prev_flat_grad", "old_stps" (k, n), "old_dirs" (k, n), "ro" (k), "scalars"
  /// (t, H0, the last loss, func_evals, n_iter). Saved in checkpoints, so a resumed run goes on
  /// with the same history.
  std::map<std::string, Tensor> shared_state() const override;
  void check_shared_state(const std::map<std::string, Tensor>& state) const override;
  void load_shared_state(const std::map<std::string, Tensor>& state) override;

  const LBFGSOptions options;

 private:
  std::vector<double> flat_grad() const;
  std::vector<double> flat_params() const;
  void set_params(const std::vector<double>& x);
  void add_to_params(double t, const std::vector<double>& d);
  // closure() at x + t d: its loss and flat gradient; the parameters are put back to x after
  std::pair<double, std::vector<double>> evaluate_at(const std::function<Variable()>& closure,
                                                     const std::vector<double>& x, double t,
                                                     const std::vector<double>& d);
  double loss_of(const std::function<Variable()>& closure);

  std::vector<double> d_, prev_flat_grad_;
  double t_ = 0, h_diag_ = 1, prev_loss_ = 0;
  std::deque<std::vector<double>> old_dirs_, old_stps_;  // y and s, oldest first
  std::deque<double> ro_;
  int64_t func_evals_ = 0, n_iter_ = 0;
};

}  // namespace mg::optim
