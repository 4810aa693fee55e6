#pragma once
// second_order, the experiment: the Hessian of an MLP's loss, Newton beside gradient descent, a
// physics-informed network and MAML. The tests include it; main.cpp runs it and prints what it
// measured, costs.h measures what each kind of derivative costs.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <unordered_set>

#include "../common/numbers.h"  // window_mean, median, median_ms, finite_abs_max
#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"

namespace second_order {
using namespace mg;
using example::median_ms;
using VL = VariableList;

struct Config {
  int pinn_steps = 2000;  // Adam steps for the physics-informed network
  int pinn_points = 32;   // collocation points in (0, 1)
  uint64_t seed = 0;      // the PINN's initial weights (parts 1, 2 and 4 are fixed by formulas)
  std::string out = "runs/second_order";
};

// value[k] = scale * sin(0.37 k + phase), k the row-major index: inputs that this program and the
// PyTorch script tests/golden/gen_second_order.py build alike, with no random numbers to share.
Tensor formula_tensor(const Shape& shape, double phase, double scale) {
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (size_t k = 0; k < v.size(); ++k) v[k] = scale * std::sin(0.37 * static_cast<double>(k) + phase);
  return from_vector(v, shape);
}

// Every tensor of `parts` flattened and joined: the parameters as one vector.
Tensor flat(const VL& parts) {
  std::vector<Tensor> f;
  for (const Variable& p : parts) f.push_back(p.data().reshape({-1}));
  return concat(f, 0);
}

// The inverse: a vector cut into tensors shaped like `like`.
VL unflat(const Tensor& v, const VL& like) {
  VL out;
  int64_t at = 0;
  for (const Variable& p : like) {
    out.emplace_back(v.narrow(0, at, p.numel()).reshape(p.shape()).contiguous());
    at += p.numel();
  }
  return out;
}

// The n x n Hessian of f at `params`, column j = H e_j from one Hessian-vector product.
Tensor hessian_by_columns(const VariableFunction& f, const VL& params) {
  const int64_t n = flat(params).numel();
  Tensor H = zeros({n, n}, DType::Float64);
  for (int64_t j = 0; j < n; ++j) {
    Tensor e = zeros({n}, DType::Float64);
    e.narrow(0, j, 1).fill_(1);
    const auto [value, hv] = hvp(f, params, unflat(e, params));
    H.narrow(1, j, 1).copy_(flat(hv).reshape({n, 1}));
  }
  return H;
}

// Eigenvalues of a symmetric matrix by cyclic Jacobi rotations (each zeroes one off-diagonal pair),
// ascending. Fine for the few dozen rows here.
std::vector<double> symmetric_eigenvalues(const Tensor& m) {
  const int64_t n = m.size(0);
  std::vector<double> a = m.contiguous().to_vector<double>();
  auto at = [&](int64_t i, int64_t j) -> double& { return a[static_cast<size_t>(i * n + j)]; };
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, total = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) (i == j ? total : off) += at(i, j) * at(i, j);
    if (off <= 1e-30 * (total + off)) break;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        if (at(p, q) == 0) continue;
        // the rotation angle that zeroes a_pq: tan(2 theta) = 2 a_pq / (a_qq - a_pp)
        const double theta = (at(q, q) - at(p, p)) / (2 * at(p, q));
        const double t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int64_t k = 0; k < n; ++k) {  // columns p and q
          const double kp = at(k, p), kq = at(k, q);
          at(k, p) = c * kp - s * kq, at(k, q) = s * kp + c * kq;
        }
        for (int64_t k = 0; k < n; ++k) {  // rows p and q
          const double pk = at(p, k), qk = at(q, k);
          at(p, k) = c * pk - s * qk, at(q, k) = s * pk + c * qk;
        }
      }
  }
  std::vector<double> ev(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ev[static_cast<size_t>(i)] = at(i, i);
  std::sort(ev.begin(), ev.end());
  return ev;
}

// ---------------------------------------------------------------- 1. the Hessian of an MLP's loss
struct HessianResult {
  double loss = 0;
  Tensor hessian;  // (17, 17): W1 (4, 2), b1 (4), W2 (1, 4), b2 (1), flattened in that order
  std::vector<double> eigenvalues;
  double asymmetry = 0;  // max |H - H^T|: hvp gives columns; symmetry is a check, not an input
};

// mean((tanh(x W1^T + b1) W2^T + b2 - y)^2) for x (8, 2), y (8, 1)
Variable mlp_loss(const VL& p, const Tensor& x, const Tensor& y) {
  return mean(pow(linear(tanh(linear(Variable(x), p[0], p[1])), p[2], p[3]) - Variable(y), 2));
}

HessianResult mlp_hessian() {
  const Tensor x = formula_tensor({8, 2}, 1.0, 1.0), y = formula_tensor({8, 1}, 2.0, 0.5);
  const VL params = {Variable(formula_tensor({4, 2}, 0.1, 0.8)), Variable(formula_tensor({4}, 0.2, 0.3)),
                     Variable(formula_tensor({1, 4}, 0.3, 0.8)), Variable(formula_tensor({1}, 0.4, 0.3))};
  const VariableFunction f = [&](const VL& p) { return mlp_loss(p, x, y); };
  HessianResult r;
  r.loss = mlp_loss(params, x, y).item();
  r.hessian = hessian_by_columns(f, params);
  r.asymmetry = max(abs(r.hessian - r.hessian.transpose(0, 1))).item();
  r.eigenvalues = symmetric_eigenvalues(r.hessian);
  return r;
}

// ---------------------------------------------------------------- 2. Newton beside gradient descent
struct Descent {
  std::vector<double> loss;  // per step, from the start
  int steps = 0;             // steps until |grad| < tol (or the cap)
  Tensor w;
};

struct LogReg {
  Tensor X;  // (40, 3): two features and a column of ones (the bias)
  Tensor y;  // (40, 1): labels 0 or 1, overlapping classes (so the optimum is finite)
  double lambda = 0.01;
};

LogReg make_logreg() {
  const int64_t n = 40;
  const Tensor f = formula_tensor({n, 2}, 0.5, 2.0);
  std::vector<double> X, y;
  for (int64_t i = 0; i < n; ++i) {
    const double a = f.at({i, 0}), b = f.at({i, 1});
    X.insert(X.end(), {a, b, 1.0});
    y.push_back(a + 0.5 * b + 0.8 * std::sin(3.0 * static_cast<double>(i)) > 0 ? 1.0 : 0.0);  // a noisy line
  }
  return {from_vector(X, {n, 3}), from_vector(y, {n, 1})};
}

// Logistic loss with an L2 penalty: mean(softplus(z) - y z) + lambda/2 |w|^2, z = X w.
// (softplus(z) - y z is -log of the likelihood of y, written in ops that are differentiable twice.)
Variable logreg_loss(const Variable& w, const LogReg& d) {
  const Variable z = matmul(Variable(d.X), w);
  return mean(softplus(z) - Variable(d.y) * z) + sum(w * w) * (d.lambda / 2);
}

// Solve A d = g (3 x 3) by Gaussian elimination with partial pivoting.
Tensor solve(const Tensor& A, const Tensor& g) {
  const int64_t n = A.size(0);
  std::vector<double> a = A.contiguous().to_vector<double>(), b = g.contiguous().to_vector<double>();
  for (int64_t c = 0; c < n; ++c) {
    int64_t piv = c;
    for (int64_t r = c + 1; r < n; ++r)
      if (std::abs(a[r * n + c]) > std::abs(a[piv * n + c])) piv = r;
    for (int64_t k = 0; k < n; ++k) std::swap(a[c * n + k], a[piv * n + k]);
    std::swap(b[c], b[piv]);
    for (int64_t r = c + 1; r < n; ++r) {
      const double m = a[r * n + c] / a[c * n + c];
      for (int64_t k = c; k < n; ++k) a[r * n + k] -= m * a[c * n + k];
      b[r] -= m * b[c];
    }
  }
  std::vector<double> d(n);
  for (int64_t r = n - 1; r >= 0; --r) {
    double s = b[r];
    for (int64_t k = r + 1; k < n; ++k) s -= a[r * n + k] * d[k];
    d[r] = s / a[r * n + r];
  }
  return from_vector(d, {n, 1});
}

constexpr double kGradTol = 1e-10;  // converged: every gradient element below this
constexpr int kMaxSteps = 20000;

// w <- w - lr grad, from w = 0
Descent gradient_descent(const LogReg& d, double lr) {
  Descent r;
  r.w = zeros({3, 1}, DType::Float64);
  for (r.steps = 0; r.steps < kMaxSteps; ++r.steps) {
    const Variable w(r.w, true);
    const Variable loss = logreg_loss(w, d);
    const Tensor g = grad({loss}, {w})[0].data();
    r.loss.push_back(loss.item());
    if (max(abs(g)).item() < kGradTol) break;
    r.w = r.w - g * lr;
  }
  return r;
}

// w <- w - H^-1 grad, from w = 0, H from three Hessian-vector products
Descent newton(const LogReg& d) {
  Descent r;
  r.w = zeros({3, 1}, DType::Float64);
  const VariableFunction f = [&](const VL& p) { return logreg_loss(p[0], d); };
  for (r.steps = 0; r.steps < kMaxSteps; ++r.steps) {
    const Variable w(r.w, true);
    const Variable loss = logreg_loss(w, d);
    const Tensor g = grad({loss}, {w})[0].data();
    r.loss.push_back(loss.item());
    if (max(abs(g)).item() < kGradTol) break;
    const Tensor H = hessian_by_columns(f, {w});
    r.w = r.w - solve(H, g.reshape({3}));
  }
  return r;
}

// ---------------------------------------------------------------- 3. a physics-informed network
// u(x) = MLP(x), 1 -> 32 -> 32 -> 1 with tanh, trained so that u'' + pi^2 sin(pi x) = 0 at the
// collocation points and u(0) = u(1) = 0. The exact solution is sin(pi x).
struct PinnResult {
  std::vector<double> loss;
  std::vector<double> grid, u, exact;  // 101 points of [0, 1]
  double max_error = 0;                // max |u - sin(pi x)| over the grid
  double rel_l2 = 0;                   // |u - exact| / |exact| over the grid
};

struct PinnNet : nn::Callable<PinnNet> {
  nn::Linear l1, l2, l3;
  explicit PinnNet(Generator& g) : l1(1, 32, {}, g), l2(32, 32, {}, g), l3(32, 1, {}, g) {
    register_module("l1", l1), register_module("l2", l2), register_module("l3", l3);
    to(DType::Float64);
  }
  Variable forward(const Variable& x) const { return l3(tanh(l2(tanh(l1(x))))); }
  std::string type_name() const override { return "PinnNet"; }
};

PinnResult train_pinn(const Config& c) {
  constexpr double pi = std::numbers::pi;
  Generator gen(c.seed);
  PinnNet net(gen);
  optim::Adam opt(net.parameters(), {.lr = 3e-3});
  std::vector<double> xs;
  for (int i = 0; i < c.pinn_points; ++i) xs.push_back((i + 0.5) / c.pinn_points);
  const Tensor x0 = from_vector(xs, {c.pinn_points, 1});
  const Tensor forcing = mg::sin(x0 * pi) * (pi * pi);  // u'' must equal -forcing
  const Tensor ends = from_vector(std::vector<double>{0.0, 1.0}, {2, 1});
  const Variable ones(ones_like(x0));
  PinnResult r;
  for (int step = 0; step < c.pinn_steps; ++step) {
    const Variable x(x0, true);  // the input itself requires grad: we differentiate u with respect to it
    const Variable u = net.forward(x);
    // each u_i depends on x_i alone, so the gradient of sum(u) is u'(x_i) at every point
    const Variable du = grad({u}, {x}, {.grad_outputs = {ones}, .create_graph = true})[0];
    const Variable d2u = grad({du}, {x}, {.grad_outputs = {ones}, .create_graph = true})[0];
    const Variable residual = d2u + Variable(forcing);
    const Variable loss = mean(residual * residual) + mean(pow(net.forward(Variable(ends)), 2));
    opt.zero_grad();
    loss.backward();  // through u'' to the weights: third-order derivatives of the network
    opt.step();
    r.loss.push_back(loss.item());
  }
  const NoGradGuard ng;
  double err2 = 0, norm2 = 0;
  for (int i = 0; i <= 100; ++i) r.grid.push_back(i / 100.0);
  const Tensor gx = from_vector(r.grid, {101, 1});
  r.u = net.forward(Variable(gx)).data().reshape({101}).to_vector<double>();
  for (size_t i = 0; i < r.grid.size(); ++i) {
    r.exact.push_back(std::sin(pi * r.grid[i]));
    const double e = r.u[i] - r.exact[i];
    r.max_error = std::max(r.max_error, std::abs(e));
    err2 += e * e, norm2 += r.exact[i] * r.exact[i];
  }
  r.rel_l2 = std::sqrt(err2 / norm2);
  return r;
}

// ---------------------------------------------------------------- 4. MAML, one inner step
// Sine-wave regression tasks (Finn et al. 2017): y = A sin(x + phase). For each task, one gradient
// step on its 5 support points gives fast weights p' = p - alpha grad L_support(p); the meta-loss
// is L_query(p'), and its gradient with respect to p goes back through that step, so it contains
// the Hessian of L_support: grad L_query(p') (I - alpha H_support).
constexpr double kInnerLr = 0.1, kMetaLr = 0.05;
constexpr int kMetaSteps = 30, kTasks = 2;

struct MamlResult {
  std::vector<double> meta_loss;  // per meta step
  VL params;                      // after the last step
  double second_order_share = 0;  // |meta-grad - first-order meta-grad| / |meta-grad| at step 0
};

Variable sine_net(const VL& p, const Tensor& x) { return linear(tanh(linear(Variable(x), p[0], p[1])), p[2], p[3]); }

struct Task {
  Tensor xs, ys, xq, yq;
};

// Task t of meta step `step` (as task() in the PyTorch script).
Task sine_task(int step, int t) {
  const int k = 2 * step + t;
  const double a = 1.0 + 0.5 * std::sin(0.9 * k), phase = 0.3 * k;
  Task r;
  r.xs = formula_tensor({5, 1}, 0.11 * k, 3.0);
  r.xq = formula_tensor({5, 1}, 0.11 * k + 1.3, 3.0);
  r.ys = mg::sin(r.xs + phase) * a;
  r.yq = mg::sin(r.xq + phase) * a;
  return r;
}

// The meta-loss of one step; with first_order, the inner gradient is cut from the graph (FOMAML).
Variable meta_loss(const VL& p, int step, bool first_order) {
  Variable total;
  for (int t = 0; t < kTasks; ++t) {
    const Task task = sine_task(step, t);
    const Variable inner = mean(pow(sine_net(p, task.xs) - Variable(task.ys), 2));
    const VL g = grad({inner}, p, {.create_graph = !first_order});
    VL fast;
    for (size_t i = 0; i < p.size(); ++i) fast.push_back(p[i] - g[i] * kInnerLr);
    const Variable outer = mean(pow(sine_net(fast, task.xq) - Variable(task.yq), 2));
    total = total.defined() ? total + outer : outer;
  }
  return total / static_cast<double>(kTasks);
}

MamlResult train_maml() {
  MamlResult r;
  r.params = {Variable(formula_tensor({8, 1}, 0.5, 1.0), true), Variable(formula_tensor({8}, 0.6, 0.5), true),
              Variable(formula_tensor({1, 8}, 0.7, 0.3), true), Variable(formula_tensor({1}, 0.8, 0.1), true)};
  for (int step = 0; step < kMetaSteps; ++step) {
    const Variable loss = meta_loss(r.params, step, false);
    const VL g = grad({loss}, r.params);
    if (step == 0) {
      const Tensor full = flat(g), first = flat(grad({meta_loss(r.params, step, true)}, r.params));
      r.second_order_share =
          mg::sqrt(mg::sum((full - first) * (full - first))).item() / mg::sqrt(mg::sum(full * full)).item();
    }
    r.meta_loss.push_back(loss.item());
    const NoGradGuard ng;
    for (size_t i = 0; i < r.params.size(); ++i) r.params[i].data().copy_(r.params[i].data() - g[i].data() * kMetaLr);
  }
  return r;
}

}  // namespace second_order
