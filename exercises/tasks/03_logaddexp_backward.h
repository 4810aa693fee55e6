#pragma once
// Exercise 3 (chapter 3, writing an op): the backward of an op of your own.
//
// logaddexp(a, b) = log(exp(a) + exp(b)), a smooth maximum of a and b, written as an mg::Function:
// forward is done (computed without overflow); backward is yours. Derive it first, on paper:
//   y = log(exp(a) + exp(b))     da = dy * dy/da = ?     db = dy * dy/db = ?
// then write it with the tensors forward saved. Keep it stable: at a = b = 1000, exp(a) is inf,
// yet both gradients are 0.5 (there is a way to write dy/da with y in it that never overflows).
#include <string>
#include <vector>

#include "exercise.h"

namespace exercises {

/// y = log(exp(a) + exp(b)), elementwise; a and b may broadcast against each other.
struct LogAddExp : mg::Function {
  std::string name() const override { return "logaddexp"; }

  /// a, b -> y, as m + log(exp(a - m) + exp(b - m)) with m = max(a, b), so nothing overflows.
  /// Saves a, b and y for backward (ctx.saved()[0], [1], [2]).
  mg::Tensor forward(mg::FunctionCtx& ctx, const std::vector<mg::Tensor>& in) override {
    const mg::Tensor& a = in[0];
    const mg::Tensor& b = in[1];
    const mg::Tensor m = mg::maximum(a, b);
    const mg::Tensor y = m + mg::log(mg::exp(a - m) + mg::exp(b - m));
    ctx.save_for_backward({a, b, y});
    return y;
  }

  /// dy (y's shape) -> {da, db}: the gradients of a and b, in y's shape (the engine sums a
  /// broadcast input's gradient down to its shape, as exercise 1 did).
  /// Useful: mg::exp, mg::sigmoid, and the operators + - * / on tensors.
  /// Hint: docs/03-writing-an-op.md, section "From your own code: `mg::Function`".
  std::vector<mg::Tensor> backward(mg::FunctionCtx& ctx, const mg::Tensor& dy) override {
    throw NotDone("03_logaddexp_backward", "docs/03-writing-an-op.md, section \"From your own code: `mg::Function`\"");
  }
};

/// logaddexp(a, b), recorded on the tape with LogAddExp's backward.
inline mg::Variable logaddexp(const mg::Variable& a, const mg::Variable& b) {
  return mg::apply_function<LogAddExp>({a, b});
}

}  // namespace exercises
