// Custom ops through mg::Function and mg::MultiFunction (one output or several, an int64 one among
// them), what the engine does with the gradients their backward returns (none, the wrong shape or
// dtype), and gradcheck catching a wrong backward.
#include "helpers.h"

using namespace mg;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

// y = x^3      dx = 3 x^2 dy  (the example of autograd/function.h and docs/03-writing-an-op.md)
struct Cube : Function {
  std::string name() const override { return "cube"; }
  Tensor forward(FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    ctx.save_for_backward({in[0]});
    return in[0] * in[0] * in[0];
  }
  std::vector<Tensor> backward(FunctionCtx& ctx, const Tensor& dy) override {
    const Tensor& x = ctx.saved()[0];
    return {dy * x * x * 3.0};
  }
};

// A deliberately wrong backward (2x^2 instead of 3x^2): gradcheck must catch it.
struct BadCube : Cube {
  std::vector<Tensor> backward(FunctionCtx& ctx, const Tensor& dy) override {
    const Tensor& x = ctx.saved()[0];
    return {dy * x * x * 2.0};
  }
};

TEST(Autograd, CustomFunction) {
  Variable x(tensor({1, 2}, {2}), true);
  Variable y = apply_function<Cube>({x});
  EXPECT_EQ(y.grad_fn()->name, "cube");
  sum(y).backward();
  expect_values(x.grad(), {2}, {3, 12});
  expect_gradcheck([](const V& v) { return apply_function<Cube>({v[0]}) * v[0]; }, {rnd({3, 2}, 1)});
  EXPECT_THROW(sum(y).backward(), StateError);  // its saved tensors were freed
}

namespace {
// Two outputs: (sin x, cos x); dx = g_sin cos x - g_cos sin x. And an op whose second output is
// an int64 index (the argmax of each row), returned as a constant.
struct SinCos : MultiFunction {
  std::string name() const override { return "sincos"; }
  std::vector<Tensor> forward(FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    ctx.save_for_backward({in[0]});
    return {sin(in[0]), cos(in[0])};
  }
  std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& g) override {
    const Tensor& x = ctx.saved()[0];
    return {g[0] * cos(x) - g[1] * sin(x)};
  }
};
struct RowMax : MultiFunction {
  std::string name() const override { return "row_max"; }
  std::vector<Tensor> forward(FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    const auto [values, index] = max(in[0], 1);
    ctx.save_for_backward({index});
    shape_ = in[0].shape();
    return {values, index};
  }
  std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& g) override {
    EXPECT_FALSE(g[1].defined());  // the index has no gradient
    return {scatter(zeros(shape_, g[0].dtype()), 1, ctx.saved()[0].unsqueeze(1), g[0].unsqueeze(1))};
  }
  Shape shape_;
};
}  // namespace

TEST(Autograd, CustomFunctionWithSeveralOutputs) {
  Variable x(tensor({0.5, 1.0}, {2}), true);
  const std::vector<Variable> sc = apply_multi_function<SinCos>({x});
  ASSERT_EQ(sc.size(), 2u);
  mgtest::expect_close(sc[0].data(), sin(x.data()), 0, 0);
  mgtest::expect_close(sc[1].data(), cos(x.data()), 0, 0);
  sum(sc[0] * 2.0 + sc[1]).backward();  // d/dx (2 sin x + cos x) = 2 cos x - sin x
  mgtest::expect_close(x.grad(), cos(x.data()) * 2.0 - sin(x.data()), 1e-7, 1e-7);
  // only one output used: the other's gradient arrives as zeros
  x.zero_grad();
  sum(apply_multi_function<SinCos>({x})[1]).backward();
  mgtest::expect_close(x.grad(), -sin(x.data()), 1e-7, 1e-7);
  expect_gradcheck(
      [](const V& v) {
        const std::vector<Variable> o = apply_multi_function<SinCos>({v[0]});
        return o[0] * o[1] + o[1] * v[0];
      },
      {rnd({3, 2}, 2)});
  // a non-floating output is a constant; the floating one differentiates as max's values
  const std::vector<Variable> m = apply_multi_function<RowMax>({Variable(rnd({3, 4}, 3), true)});
  EXPECT_EQ(m[1].dtype(), DType::Int64);
  EXPECT_FALSE(m[1].requires_grad());
  expect_gradcheck([](const V& v) { return apply_multi_function<RowMax>({v[0]})[0] * 3.0; }, {rnd({3, 4}, 4)});
}

namespace {
// An op whose backward gives no gradient (an undefined tensor, which counts as zero).
struct NoGradient : Function {
  std::string name() const override { return "no_gradient"; }
  Tensor forward(FunctionCtx&, const std::vector<Tensor>& in) override { return in[0] * 1.0; }
  std::vector<Tensor> backward(FunctionCtx&, const Tensor&) override { return {Tensor()}; }
};
// Backwards that return what they should not: a gradient of another shape, or of another dtype.
struct WrongShape : Function {
  std::string name() const override { return "wrong_shape"; }
  Tensor forward(FunctionCtx&, const std::vector<Tensor>& in) override { return in[0] * 1.0; }
  std::vector<Tensor> backward(FunctionCtx&, const Tensor&) override { return {zeros({3})}; }
};
struct WrongDtype : Function {
  std::string name() const override { return "wrong_dtype"; }
  Tensor forward(FunctionCtx&, const std::vector<Tensor>& in) override { return in[0] * 1.0; }
  std::vector<Tensor> backward(FunctionCtx&, const Tensor& dy) override { return {dy.to(DType::Float64)}; }
};
}  // namespace

TEST(Autograd, AnUndefinedGradientCountsAsZeroAndOtherPathsStillFlow) {
  // y = no_gradient(x) + 2x: the first path sends nothing back, the second 2.
  Variable x(tensor({1, 2}, {2}), true);
  sum(apply_function<NoGradient>({x}) + x * 2.0).backward();
  ASSERT_TRUE(x.grad().defined());
  expect_values(x.grad(), {2}, {2, 2});
  // y = no_gradient(h * h) + h, h = w: the node h * h receives no gradient at all. The engine once
  // released such a node without counting down its inputs, so h's node, which the "+ h" path
  // does reach, never ran, and w ended with no gradient instead of 1.
  Variable w(tensor({3}, {1}), true);
  Variable h = w * 1.0;
  sum(apply_function<NoGradient>({h * h}) + h).backward();
  expect_values(w.grad(), {1}, {1});
}

TEST(Autograd, AWrongGradientIsNamedByItsOp) {
  Variable x(tensor({1, 2}, {2}), true);
  try {
    sum(apply_function<WrongShape>({x})).backward();
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("backward: 'wrong_shape' returned a gradient of shape (3,) for input 0 of shape (2,)"));
  }
  try {
    sum(apply_function<WrongDtype>({x})).backward();
    FAIL();
  } catch (const DTypeError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("backward: 'wrong_dtype' returned a float64 gradient for input 0, which is float32"));
  }
  // a gradient of the wrong dtype given by the user is a DTypeError too, not a ShapeError
  EXPECT_THROW(sum(x * 2.0).backward(scalar_tensor(1, DType::Float64)), DTypeError);
  EXPECT_THROW(x.set_grad(zeros({2}, DType::Float64)), DTypeError);
  EXPECT_THROW(x.set_grad(zeros({3})), ShapeError);
}

TEST(Autograd, GradcheckCatchesAWrongBackward) {
  GradcheckResult r = gradcheck([](const V& v) { return apply_function<BadCube>({v[0]}); }, {rnd({2, 3}, 2, 0.5, 1)});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.input, 0);
  EXPECT_EQ(r.index.size(), 2u);
  EXPECT_NEAR(r.analytic / r.numeric, 2.0 / 3.0, 1e-4);
  EXPECT_THAT(r.message, HasSubstr("gradcheck FAILED"));
}
