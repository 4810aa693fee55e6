#pragma once
// second_order, part 5: what each kind of derivative costs, in time and in recorded nodes.
#include "experiment.h"

namespace second_order {

// ---------------------------------------------------------------- 5. what it costs
// Graph sizes (exact) and times (medians of repeated runs, this machine) for a 2 -> 64 -> 64 -> 1
// tanh MLP on 256 points, and the two ways of getting a whole Jacobian.
struct Costs {
  size_t forward_nodes = 0;                           // nodes of the loss's graph
  size_t grad_nodes = 0;                              // nodes the backward with create_graph recorded on top of it
  double ms_grad = 0, ms_grad_graph = 0, ms_hvp = 0;  // forward + grad; the same with create_graph; one hvp
  // a Jacobian of f: R^n -> R^m by rows (m backward passes, mg::vjp) or by columns (n forward
  // passes with dual numbers): wide is n = 256, m = 1; tall is n = 1, m = 256
  double ms_wide_rows = 0, ms_wide_columns = 0, ms_tall_rows = 0, ms_tall_columns = 0;
};

// Nodes reachable from the variables' grad_fns.
std::unordered_set<Node*> graph_nodes(const VL& vs) {
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Variable& v : vs)
    if (v.grad_fn() && seen.insert(v.grad_fn().get()).second) stack.push_back(v.grad_fn().get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& nx : n->next)
      if (nx && seen.insert(nx.get()).second) stack.push_back(nx.get());
  }
  return seen;
}

Costs measure_costs() {
  Costs c;
  const Tensor x = formula_tensor({256, 2}, 0.3, 1.0), y = formula_tensor({256, 1}, 0.9, 1.0);
  const VL p = {Variable(formula_tensor({64, 2}, 0.1, 0.7), true),   Variable(formula_tensor({64}, 0.2, 0.1), true),
                Variable(formula_tensor({64, 64}, 0.3, 0.15), true), Variable(formula_tensor({64}, 0.4, 0.1), true),
                Variable(formula_tensor({1, 64}, 0.5, 0.15), true),  Variable(formula_tensor({1}, 0.6, 0.1), true)};
  const VariableFunction loss = [&](const VL& q) {
    const Variable h = tanh(linear(tanh(linear(Variable(x), q[0], q[1])), q[2], q[3]));
    return mean(pow(linear(h, q[4], q[5]) - Variable(y), 2));
  };
  {
    const Variable l = loss(p);
    const VL g = grad({l}, p, {.create_graph = true});
    const std::unordered_set<Node*> fwd = graph_nodes({l}), all = graph_nodes(g);
    c.forward_nodes = fwd.size();
    for (Node* n : all) c.grad_nodes += fwd.count(n) ? 0 : 1;
  }
  VL v;
  for (const Variable& q : p) v.emplace_back(ones_like(q.data()));
  c.ms_grad = median_ms(15, [&] { grad({loss(p)}, p); });
  c.ms_grad_graph = median_ms(15, [&] { grad({loss(p)}, p, {.create_graph = true}); });
  c.ms_hvp = median_ms(15, [&] { hvp(loss, p, v); });

  const int64_t n = 256;
  const Tensor A = formula_tensor({64, n}, 0.7, 0.1), b = formula_tensor({n}, 0.8, 1.0),
               x0 = formula_tensor({n}, 0.9, 1.0);
  // wide: f(x) = sum(tanh(A x)), R^256 -> R^1
  c.ms_wide_rows =
      median_ms(5, [&] { vjp([&](const VL& q) { return sum(tanh(matmul(Variable(A), q[0]))); }, {Variable(x0)}); });
  c.ms_wide_columns = median_ms(5, [&] {
    for (int64_t j = 0; j < n; ++j) {
      Tensor e = zeros({n}, DType::Float64);
      e.narrow(0, j, 1).fill_(1);
      sum(tanh(matmul(constant_dual(A), make_dual(x0, e))));
    }
  });
  // tall: g(t) = tanh(b t), R^1 -> R^256
  const Tensor t0 = full({1}, 0.5, DType::Float64);
  c.ms_tall_rows = median_ms(5, [&] {
    for (int64_t i = 0; i < n; ++i) {
      Tensor e = zeros({n}, DType::Float64);
      e.narrow(0, i, 1).fill_(1);
      vjp([&](const VL& q) { return tanh(Variable(b) * q[0]); }, {Variable(t0)}, Variable(e));
    }
  });
  c.ms_tall_columns = median_ms(5, [&] { tanh(constant_dual(b) * make_dual(t0, ones_like(t0))); });
  return c;
}

}  // namespace second_order
