#pragma once
// Exercise 3, the reference solution (docs/03-writing-an-op.md, section "From your own code: `mg::Function`").
#include <string>
#include <vector>

#include "exercise.h"

namespace exercises {

/// y = log(exp(a) + exp(b)), elementwise; a and b may broadcast against each other.
struct LogAddExp : mg::Function {
  std::string name() const override { return "logaddexp"; }

  /// a, b -> y, as m + log(exp(a - m) + exp(b - m)) with m = max(a, b), so nothing overflows.
  mg::Tensor forward(mg::FunctionCtx& ctx, const std::vector<mg::Tensor>& in) override {
    const mg::Tensor& a = in[0];
    const mg::Tensor& b = in[1];
    const mg::Tensor m = mg::maximum(a, b);
    const mg::Tensor y = m + mg::log(mg::exp(a - m) + mg::exp(b - m));
    ctx.save_for_backward({a, b, y});
    return y;
  }

  // dy/da = exp(a) / (exp(a) + exp(b)) = exp(a - y)       (the share of a in the sum)
  // dy/db = exp(b) / (exp(a) + exp(b)) = exp(b - y)       (the two add up to 1)
  // a - y <= 0 and b - y <= 0, so neither exp overflows, whatever a and b are.
  std::vector<mg::Tensor> backward(mg::FunctionCtx& ctx, const mg::Tensor& dy) override {
    const mg::Tensor& a = ctx.saved()[0];
    const mg::Tensor& b = ctx.saved()[1];
    const mg::Tensor& y = ctx.saved()[2];
    return {dy * mg::exp(a - y), dy * mg::exp(b - y)};
  }
};

/// logaddexp(a, b), recorded on the tape with LogAddExp's backward.
inline mg::Variable logaddexp(const mg::Variable& a, const mg::Variable& b) {
  return mg::apply_function<LogAddExp>({a, b});
}

}  // namespace exercises
