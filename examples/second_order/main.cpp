// second_order: derivatives of derivatives, four ways a model-writer uses them.
//
//   1. The Hessian of a small MLP's loss, one column per Hessian-vector product (mg::hvp), never
//      differentiating more than twice; its eigenvalues say how curved the loss is in each direction.
//   2. Newton's method beside gradient descent on a logistic regression: Newton divides the gradient
//      by the curvature (H d = g) and converges in a handful of steps where gradient descent needs
//      hundreds.
//   3. A physics-informed network: u(x) learns to solve u'' = -pi^2 sin(pi x), u(0) = u(1) = 0, from
//      the residual of the equation alone. The loss contains u'', so every training step
//      differentiates the network twice with respect to its input, and then once more with
//      respect to its weights.
//   4. MAML, one inner step: the meta-gradient goes through a gradient step, so it differentiates a
//      gradient. The same numbers as PyTorch, step for step (tests/golden/gen_second_order.py).
//
//   make build && build/examples/second_order/second_order
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "costs.h"

int main(int argc, char** argv) {
  using namespace second_order;
  Config c;
  CLI::App app{"second_order: Hessians, Newton's method, a physics-informed network and MAML"};
  example::add_run_options(app, c.seed, &c.out, {.seed_help = "the physics-informed network's initial weights"});
  app.add_option("--pinn-steps", c.pinn_steps, "Adam steps for the physics-informed network");
  app.add_option("--pinn-points", c.pinn_points, "collocation points in (0, 1)");
  CLI11_PARSE(app, argc, argv);
  viz::Report rep(c.out, "second_order: derivatives of derivatives",
                  "Hessian-vector products, Newton's method, a physics-informed network and MAML.");

  {  // 0. what create_graph records: the graph of a first derivative
    const Variable w = Variable(scalar_tensor(1.5, DType::Float64), true).set_name("w");
    const Variable x = Variable(scalar_tensor(0.5, DType::Float64), true).set_name("x");
    const Variable y = tanh(w * x);
    const Variable dy_dw = grad({y}, {w}, {.create_graph = true})[0];  // x (1 - y^2), itself a graph
    const Variable d2y_dw2 = grad({dy_dw}, {w})[0];                    // -2 x^2 y (1 - y^2)
    const double t = std::tanh(0.75);
    fmt::print(
        "0. y = tanh(w x) at w = 1.5, x = 0.5: dy/dw = {:.6f} (x (1 - y^2) = {:.6f}), d2y/dw2 = {:.6f} "
        "(-2 x^2 y (1 - y^2) = {:.6f})\n\n",
        dy_dw.item(), 0.5 * (1 - t * t), d2y_dw2.item(), -2 * 0.25 * t * (1 - t * t));
    rep.add_text("gradient_graph.dot", to_dot(dy_dw),
                 "The graph of dy/dw for y = tanh(w x), recorded by a backward with create_graph (Graphviz DOT).");
    if (std::system("command -v dot > /dev/null 2>&1") == 0 &&
        std::system(
            ("dot -Tsvg " + rep.path("gradient_graph.dot") + " -o " + rep.path("gradient_graph.svg")).c_str()) == 0)
      rep.add_image("gradient_graph.svg",
                    "dy/dw as a graph: tanh's rule ran as recorded ops (tanh_backward, mul) on the forward's nodes.");
  }

  fmt::print("1. The Hessian of a small MLP's loss (2 -> 4 -> 1, tanh, mean squared error, 17 parameters)\n");
  const HessianResult h = mlp_hessian();
  fmt::print("   loss {:.6f}; 17 Hessian-vector products give the 17 columns; max |H - H^T| = {:.1e}\n", h.loss,
             h.asymmetry);
  const int negative =
      static_cast<int>(std::count_if(h.eigenvalues.begin(), h.eigenvalues.end(), [](double e) { return e < -1e-12; }));
  fmt::print("   eigenvalues from {:.4f} to {:.4f}: {} negative, so this point is {}\n", h.eigenvalues.front(),
             h.eigenvalues.back(), negative,
             negative > 0 ? "a saddle, not a minimum (some directions curve down)" : "in a convex bowl");
  fmt::print("   all:");
  for (double e : h.eigenvalues) fmt::print(" {:.4f}", e);
  fmt::print("\n\n");

  fmt::print("2. Newton's method beside gradient descent (logistic regression, 3 weights, from w = 0)\n");
  const LogReg d = make_logreg();
  const Descent nt = newton(d), gd = gradient_descent(d, 1.0);
  const double best = nt.loss.back();
  fmt::print("   Newton: {} steps to |grad| < {:.0e}; gradient descent (lr 1): {} steps{}\n", nt.steps, kGradTol,
             gd.steps, gd.steps >= kMaxSteps ? " (stopped at the cap)" : "");
  fmt::print("   the same minimum: loss {:.12f} and {:.12f}, max |w_newton - w_gd| = {:.1e}\n", best, gd.loss.back(),
             max(abs(nt.w - gd.w)).item());
  auto gap = [&](const std::vector<double>& l) {
    std::vector<double> out;
    for (double v : l) out.push_back(std::max(v - best, 1e-16));
    return out;
  };
  rep.add_svg(
      "newton_vs_gd.svg",
      viz::line_chart_svg(
          {viz::Series::over_steps("Newton", gap(nt.loss)), viz::Series::over_steps("gradient descent", gap(gd.loss))},
          {.title = "Loss above the minimum", .x_label = "step", .y_label = "loss - min", .log_y = true}),
      fmt::format("Newton reaches the minimum in {} steps, gradient descent in {}.", nt.steps, gd.steps));
  fmt::print("\n");

  fmt::print("3. A physics-informed network: u'' = -pi^2 sin(pi x), u(0) = u(1) = 0 (exact: sin(pi x))\n");
  const PinnResult p = train_pinn(c);
  fmt::print("   {} Adam steps on {} collocation points: loss {:.2e} -> {:.2e}\n", c.pinn_steps, c.pinn_points,
             p.loss.front(), p.loss.back());
  fmt::print("   against the exact solution on 101 points: max |u - sin(pi x)| = {:.2e}, relative L2 error {:.2e}\n",
             p.max_error, p.rel_l2);
  rep.add_svg("pinn.svg",
              viz::line_chart_svg({viz::Series{"network u(x)", p.grid, p.u}, viz::Series{"sin(pi x)", p.grid, p.exact}},
                                  {.title = "Learned from the equation alone", .x_label = "x", .y_label = "u"}),
              fmt::format("max |u - sin(pi x)| = {:.2e}", p.max_error));
  rep.add_svg("pinn_loss.svg",
              viz::line_chart_svg({viz::Series::over_steps("residual + boundary", p.loss)},
                                  {.title = "PINN loss", .x_label = "step", .y_label = "loss", .log_y = true}),
              "mean(residual^2) + mean(u(0)^2, u(1)^2).");
  fmt::print("\n");

  fmt::print("4. MAML with one inner step on sine-wave regression ({} meta steps of {} tasks)\n", kMetaSteps, kTasks);
  const MamlResult m = train_maml();
  auto window_mean = [&](size_t from) {  // each step draws new tasks: their losses scatter, so compare averages
    double t = 0;
    for (size_t i = from; i < from + 10; ++i) t += m.meta_loss[i];
    return t / 10;
  };
  fmt::print("   meta-loss after adaptation, mean of the first 10 steps {:.3f}, of the last 10 {:.3f}\n",
             window_mean(0), window_mean(m.meta_loss.size() - 10));
  fmt::print(
      "   dropping the second-order term (first-order MAML) would move the first meta-gradient by {:.2f} times its "
      "length\n",
      m.second_order_share);
  fmt::print("\n");

  fmt::print("5. What it costs (2 -> 64 -> 64 -> 1 tanh MLP, 256 points, float64, {} threads)\n", get_num_threads());
  const Costs k = measure_costs();
  fmt::print("   the loss's graph: {} nodes; the backward with create_graph recorded {} more ({:.1f}x)\n",
             k.forward_nodes, k.grad_nodes, static_cast<double>(k.grad_nodes) / static_cast<double>(k.forward_nodes));
  fmt::print(
      "   loss + gradient {:.3f} ms; with create_graph {:.3f} ms ({:.2f}x); a Hessian-vector product {:.3f} ms ({:.2f}x)\n",
      k.ms_grad, k.ms_grad_graph, k.ms_grad_graph / k.ms_grad, k.ms_hvp, k.ms_hvp / k.ms_grad);
  fmt::print("   a whole Jacobian, R^256 -> R^1: 1 backward {:.3f} ms, 256 dual-number passes {:.3f} ms\n",
             k.ms_wide_rows, k.ms_wide_columns);
  fmt::print("   a whole Jacobian, R^1 -> R^256: 256 backwards {:.3f} ms, 1 dual-number pass {:.3f} ms\n",
             k.ms_tall_rows, k.ms_tall_columns);
  fmt::print("   reverse mode wins by {:.0f}x on the wide function, forward mode by {:.0f}x on the tall one\n",
             k.ms_wide_columns / k.ms_wide_rows, k.ms_tall_rows / k.ms_tall_columns);
  fmt::print("\npictures: {}\n", rep.write_index());
  return 0;
}
