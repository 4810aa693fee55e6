#include "minigrad/autograd/dot.h"

#include <cmath>
#include <unordered_map>

#include "minigrad/tensor/ops.h"

namespace mg {
namespace {

// "data [0.5, -1.25]" for a small tensor, "|data| 3.162" (the norm) for a big one.
std::string describe(const char* what, const Tensor& t, int64_t max_elements) {
  if (t.numel() <= max_elements) {
    const std::vector<double> v = t.to_vector<double>();
    std::string s = fmt::format("{} ", what);
    if (t.dim() > 0) s += "[";
    for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{:.4g}", i ? ", " : "", v[i]);
    return t.dim() > 0 ? s + "]" : s;
  }
  const Tensor d = t.to(DType::Float64);  // the norm by a reduction, not a copy into a vector
  return fmt::format("|{}| {:.4g}", what, std::sqrt(sum(d * d).item()));
}

// The value and gradient lines of a node, as asked for.
std::string extra_lines(const VariableImpl* v, const DotOptions& o) {
  std::string s;
  if (!v) return s;
  if (o.values && v->data.defined()) s += "\\n" + describe("data", v->data, o.max_elements);
  if (o.grads && v->grad.defined()) s += "\\n" + describe("grad", v->grad, o.max_elements);
  return s;
}

}  // namespace

std::string to_dot(const Variable& output, const DotOptions& options) {
  MG_CHECK(output.defined(), StateError, "to_dot: the variable is undefined");
  MG_CHECK(options.max_elements >= 0, ValueError, "to_dot: max_elements must be >= 0, got {}", options.max_elements);
  std::string out = "digraph minigrad {\n  rankdir=BT;\n  node [fontname=\"Helvetica\", fontsize=11];\n";
  std::shared_ptr<Node> root = output.gradient_edge();
  if (!root) return out + "  out [label=\"output (no graph: nothing requires grad)\"];\n}\n";
  std::unordered_map<Node*, int> id;
  std::vector<Node*> order{root.get()};
  id[root.get()] = 0;
  for (size_t i = 0; i < order.size(); ++i)  // breadth-first: stable numbering
    for (auto& nx : order[i]->next)
      if (nx && !id.count(nx.get())) id[nx.get()] = static_cast<int>(order.size()), order.push_back(nx.get());
  for (Node* n : order) {
    const bool leaf = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    if (leaf) {
      std::shared_ptr<VariableImpl> v = static_cast<AccumulateGrad*>(n)->leaf.lock();
      const std::string name = v && !v->name.empty() ? v->name : "leaf";
      out += fmt::format(
          "  n{} [shape=box, style=filled, fillcolor=\"#cfe8ff\", label=\"{}\\n{}\\nparam (gets .grad){}\"];\n", id[n],
          name, shape_str(n->out_shape), extra_lines(v.get(), options));
    } else {
      std::shared_ptr<VariableImpl> v = n->output.lock();
      const std::string what = n->label.empty() ? n->name : fmt::format("{} = {}", n->label, n->name);
      out += fmt::format("  n{} [shape=ellipse, label=\"{}\\n{}{}\"];\n", id[n], what, shape_str(n->out_shape),
                         extra_lines(v.get(), options));
    }
  }
  for (Node* n : order)
    for (auto& nx : n->next)
      if (nx) out += fmt::format("  n{} -> n{};\n", id[nx.get()], id[n]);
  out += fmt::format("  out [shape=plaintext, label=\"output {}\"];\n  n0 -> out;\n}}\n", shape_str(output.shape()));
  return out;
}

}  // namespace mg
