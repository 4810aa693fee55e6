// Custom ops under second derivatives: a rule written as a template (docs/03-writing-an-op.md's
// example) is differentiable twice, an mg::Function subclass once (then a typed error naming it),
// and gradgradcheck catches a rule whose first derivative is right and whose second is not.
#include "higher_order_helpers.h"

using namespace mg;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;
using mgtest::leaf;

// The example of docs/03-writing-an-op.md: a custom op whose rule is a template is differentiable twice.
Variable cube(const Variable& x) {
  return record(
      "cube", x.data() * x.data() * x.data(), {x}, keep(0),
      []<class V>(const V& dy, const Saved<V, 1>& s, const Node&) -> Grads<V> { return {dy * s[0] * s[0] * 3.0}; });
}

TEST(HigherOrder, CustomOpWrittenAsATemplateRule) {
  EXPECT_TRUE(gradgradcheck([](const V& x) { return cube(x[0]); }, {rnd({4}, 70)}).ok);
  const Variable x = leaf(2);
  const Variable d1 = grad({cube(x)}, {x}, {.create_graph = true})[0];
  EXPECT_EQ(d1.item(), 12);                  // 3 x^2
  EXPECT_EQ(grad({d1}, {x})[0].item(), 12);  // 6 x
}

// A custom op through mg::Function: its backward works on Tensors, so it is differentiable once.
struct TensorCube : Function {
  std::string name() const override { return "tensor_cube"; }
  Tensor forward(FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    ctx.save_for_backward({in[0]});
    return in[0] * in[0] * in[0];
  }
  std::vector<Tensor> backward(FunctionCtx& ctx, const Tensor& dy) override {
    return {dy * ctx.saved()[0] * ctx.saved()[0] * 3.0};
  }
};

TEST(HigherOrder, AFunctionSubclassIsDifferentiableOnce) {
  const Variable x = leaf(2);
  const Variable d1 = grad({apply_function<TensorCube>({x})}, {x}, {.create_graph = true})[0];
  EXPECT_EQ(d1.item(), 12);
  try {
    grad({d1}, {x});
    FAIL();
  } catch (const NotImplementedError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'tensor_cube' is not differentiable twice"));
  }
}

TEST(HigherOrder, GradgradcheckCatchesAWrongSecondDerivative) {
  // A custom op whose first derivative is right and whose backward's history is wrong: its
  // gradient is 3 x^2 dy as a constant times dy, so the second derivative (6 x) is lost.
  // gradcheck passes; gradgradcheck must not.
  const mgtest::Fn cube_constant_rule = [](const V& x) {
    const Tensor x0 = x[0].data();
    return record(
        "cube", x0 * x0 * x0, {x[0]}, keep(),
        [x0]<class T>(const T& dy, const Saved<T, 0>&, const Node&) -> Grads<T> { return {dy * T(x0 * x0 * 3.0)}; });
  };
  EXPECT_TRUE(gradcheck(cube_constant_rule, {rnd({3}, 34)}).ok);
  EXPECT_FALSE(gradgradcheck(cube_constant_rule, {rnd({3}, 34)}).ok);
}
