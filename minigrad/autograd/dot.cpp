#include "minigrad/autograd/dot.h"

#include <unordered_map>

namespace mg {

std::string to_dot(const Variable& output) {
  MG_CHECK(output.defined(), StateError, "to_dot: the variable is undefined");
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
      out += fmt::format("  n{} [shape=box, style=filled, fillcolor=\"#cfe8ff\", label=\"{}\\n{}\\nparam (gets .grad)\"];\n",
                         id[n], name, shape_str(n->out_shape));
    }
    else
      out += fmt::format("  n{} [shape=ellipse, label=\"{}\\n{}\"];\n", id[n], n->name, shape_str(n->out_shape));
  }
  for (Node* n : order)
    for (auto& nx : n->next)
      if (nx) out += fmt::format("  n{} -> n{};\n", id[nx.get()], id[n]);
  out += fmt::format("  out [shape=plaintext, label=\"output {}\"];\n  n0 -> out;\n}}\n", shape_str(output.shape()));
  return out;
}

}  // namespace mg
