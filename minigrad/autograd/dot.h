#pragma once
// The recorded graph as Graphviz DOT, to look at what backward will walk.
#include <string>

#include "minigrad/autograd/variable.h"

namespace mg {

/// DOT text of the graph behind `output`: one node per recorded op (its name and output shape),
/// and one box per leaf that receives a gradient (its name and shape; filled, marked "param").
/// Edges point from inputs to the ops that consumed them. Render with `dot -Tsvg`.
std::string to_dot(const Variable& output);

}  // namespace mg
