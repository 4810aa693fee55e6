// The derivative rules of docs/03-writing-an-op.md's table, as the comments above the rules in
// autograd/ops/ state them: the table is generated at build time by cmake/op_rules_gen.cpp, so the
// page that steps through a backward pass (viz/backward_page.h) shows the same text a reader finds
// in the code, and a rule edited there is the rule shown.
#include <string_view>

#include "minigrad/inspect/backward_recorder.h"

namespace mg::inspect {
namespace {
struct OpRule {
  std::string_view op, where, rule;
};
constexpr OpRule kRules[] = {
#include "minigrad_op_rules.inc"
};
}  // namespace

std::pair<std::string, std::string> derivative_rule(const std::string& op) {
  for (const OpRule& r : kRules)
    if (r.op == op) return {std::string(r.rule), std::string(r.where)};
  return {"", ""};
}

std::vector<std::string> ops_with_rules() {
  std::vector<std::string> ops;
  for (const OpRule& r : kRules) ops.emplace_back(r.op);
  return ops;
}

}  // namespace mg::inspect
