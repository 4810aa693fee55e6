#pragma once
// The recorded graph as Graphviz DOT, to look at what backward will walk.
#include <string>

#include "minigrad/autograd/variable.h"

namespace mg {

/// What to write in each node besides the op (or leaf name) and shape.
struct DotOptions {
  /// Each node's value: the numbers when there are at most `max_elements`, else the norm
  /// sqrt(sum x^2). An op's value is shown while its Variable is alive (the tape does not keep it).
  bool values = false;
  /// Each node's gradient, the same way: a leaf's .grad(), an op's output's .grad() after
  /// retain_grad() (call to_dot after backward). micrograd's draw_dot shows data and grad alike.
  bool grads = false;
  /// The largest tensor written out in full; bigger ones show their norm.
  int64_t max_elements = 4;
};

/// DOT text of the graph behind `output`: one node per recorded op (its name and output shape),
/// and one box per leaf that receives a gradient (its name and shape; filled, marked "param").
/// Edges point from inputs to the ops that consumed them. Render with `dot -Tsvg`.
std::string to_dot(const Variable& output, const DotOptions& options = {});

}  // namespace mg
