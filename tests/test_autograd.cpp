// The tape: accumulation, retain_graph, no-grad, detach, custom ops, gradcheck itself, to_dot.
#include "helpers.h"

using namespace mg;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

TEST(Autograd, WorkedExampleFromTheDocs) {
  // docs/02-autograd.md traces this by hand: L = sum((w * x + b)^2) at w = 2, x = (1, 2), b = 1
  // u = w*x + b = (3, 5), L = 9 + 25 = 34, dL/du = 2u = (6, 10)
  // dL/dw = sum(2u * x) = 6 + 20 = 26, dL/db = sum(2u) = 16, dL/dx = 2u * w = (12, 20)
  Variable w(scalar_tensor(2), true), b(scalar_tensor(1), true), x(tensor({1, 2}, {2}), true);
  Variable L = sum(pow(w * x + b, 2));
  EXPECT_EQ(L.item(), 34);
  L.backward();
  EXPECT_EQ(w.grad().item(), 26);
  EXPECT_EQ(b.grad().item(), 16);
  expect_values(x.grad(), {2}, {12, 20});
}

TEST(Autograd, SharedSubexpressionsSumTheirGradients) {
  Variable x(tensor({3}, {1}), true);
  Variable y = x * x + x;  // dy/dx = 2x + 1 = 7
  sum(y).backward();
  expect_values(x.grad(), {1}, {7});
}

TEST(Autograd, LeafGradientsAccumulateUntilZeroGrad) {
  Variable x(tensor({1, 2}, {2}), true);
  sum(x * 3.0).backward();
  sum(x * 3.0).backward();
  expect_values(x.grad(), {2}, {6, 6});
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
  sum(x * 3.0).backward();
  expect_values(x.grad(), {2}, {3, 3});
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Variable x(tensor({1, 2}, {2}), true);
  Variable loss = sum(exp(x));
  loss.backward();
  try {
    loss.backward();
    FAIL();
  } catch (const StateError& e) {
    EXPECT_THAT(e.what(), HasSubstr("backward through the graph a second time"));
    EXPECT_THAT(e.what(), HasSubstr("retain_graph"));
  }
  Variable y(tensor({1, 2}, {2}), true);
  Variable l2 = sum(exp(y));
  l2.backward(Tensor(), /*retain_graph=*/true);
  l2.backward();
  expect_values(y.grad(), {2}, {2 * std::exp(1.0), 2 * std::exp(2.0)}, 1e-5);
}

TEST(Autograd, TwoLiveGraphsOverTheSameLeaf) {
  // Both graphs end in the leaf's one AccumulateGrad node; running the first must not stop the
  // second from reaching it.
  Variable x(tensor({1, 2}, {2}), true);
  Variable a = sum(x * 2.0), b = sum(x * x);
  a.backward();
  b.backward();
  expect_values(x.grad(), {2}, {2 + 2, 2 + 4});
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Variable x(tensor({1, 2}, {2}), true);
  Variable y;
  {
    NoGradGuard guard;
    y = x * 2.0;
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(y.is_leaf());
  EXPECT_TRUE(GradMode::is_enabled());
  try {
    sum(y).backward();
    FAIL();
  } catch (const StateError& e) {
    EXPECT_THAT(e.what(), HasSubstr("does not require grad"));
  }
}

TEST(Autograd, DetachCutsTheGraph) {
  Variable x(tensor({1, 2}, {2}), true);
  Variable d = (x * 2.0).detach();
  EXPECT_TRUE(d.is_leaf());
  EXPECT_FALSE(d.requires_grad());
  sum(x * d).backward();  // d is a constant here: dx = d = (2, 4)
  expect_values(x.grad(), {2}, {2, 4});
}

TEST(Autograd, NonScalarBackwardNeedsAGradient) {
  Variable x(tensor({1, 2}, {2}), true);
  Variable y = x * x;
  EXPECT_THROW(y.backward(), ShapeError);
  y.backward(tensor({1, 10}, {2}));  // vector-Jacobian product: (2x) * v
  expect_values(x.grad(), {2}, {2, 40});
  EXPECT_THROW((x * 1.0).backward(zeros({3})), ShapeError);
}

TEST(Autograd, LeafRules) {
  Variable x(zeros({2}), true);
  Variable y = x * 2.0;
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn()->name, "mul");
  EXPECT_THROW(y.set_requires_grad(false), StateError);
  EXPECT_THROW(Variable(arange(3), true), DTypeError);
  EXPECT_THROW(x.set_grad(zeros({3})), ShapeError);
}

TEST(Autograd, DeepGraphsDoNotOverflowTheStack) {
  Variable x(tensor({1}, {1}), true);
  Variable y = x;
  for (int i = 0; i < 200000; ++i) y = y * 1.0;
  sum(y).backward();
  expect_values(x.grad(), {1}, {1});
  // Dropping a deep graph that was never run frees it without recursion too.
  Variable z = x;
  for (int i = 0; i < 200000; ++i) z = z + 1.0;
  z = Variable();
}

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

TEST(Autograd, ToDotShowsOpsAndParameters) {
  Variable W(rnd({3, 2}, 3), true), x(rnd({4, 2}, 4));
  W.set_name("W_q");
  Variable loss = sum(relu(matmul(x, transpose(W, 0, 1))));
  const std::string dot = to_dot(loss);
  EXPECT_THAT(dot, HasSubstr("digraph"));
  EXPECT_THAT(dot, HasSubstr("matmul\\n(4, 3)"));
  EXPECT_THAT(dot, HasSubstr("W_q\\n(3, 2)\\nparam"));
  EXPECT_THAT(dot, HasSubstr("relu"));
  EXPECT_THAT(dot, HasSubstr("->"));
  // x does not require grad, so it is not on the tape
  EXPECT_THAT(dot, testing::Not(HasSubstr("(4, 2)\\nparam")));
}

TEST(Autograd, ToDotNamesAnOpsOutputAfterTheVariableIsGone) {
  // set_name on a variable an op made labels that op's node, which outlives the variable
  Variable W(rnd({3, 2}, 3), true), x(rnd({4, 2}, 4));
  Variable loss = [&] {
    Variable q = matmul(x, transpose(W, 0, 1));
    q.set_name("Q");
    return sum(relu(q));
  }();
  const std::string dot = to_dot(loss);
  EXPECT_THAT(dot, HasSubstr("Q = matmul\\n(4, 3)"));
  EXPECT_THAT(dot, HasSubstr("\"relu\\n(4, 3)\""));  // unnamed ops keep their plain label
  // MultiheadAttention's composed path names its Q, K, V, scores and weights
  Generator g(1);
  nn::MultiheadAttention mha(8, 2, {.fused = false}, g);
  Variable in(randn({1, 3, 8}, g), true);
  const std::string adot = to_dot(sum(mha(in).output));
  for (const char* n : {"Q = ", "K = ", "V = ", "scores = ", "weights = softmax"}) EXPECT_THAT(adot, HasSubstr(n)) << n;
}

TEST(Autograd, TrainingIsBitForBitReproducible) {
  // Two identical runs of a small MLP with the same seed give identical weights.
  auto run = [] {
    Generator g(99);
    Tensor X = randn({64, 4}, g), Y = randint(0, 3, {64}, g);
    Variable W1(randn({16, 4}, g) * 0.5, true), W2(randn({3, 16}, g) * 0.5, true);
    for (int step = 0; step < 20; ++step) {
      Variable loss = cross_entropy(linear(relu(linear(Variable(X), W1)), W2), Y);
      W1.zero_grad();
      W2.zero_grad();
      loss.backward();
      W1.data().copy_(W1.data() - W1.grad() * 0.1);
      W2.data().copy_(W2.data() - W2.grad() * 0.1);
    }
    return W2.data().to_vector<float>();
  };
  EXPECT_EQ(run(), run());
}

// micrograd's example, L = (a * b + c) * f with a = 2, b = -3, c = 10, f = -2: drawn after backward,
// every node carries its value and gradient (e and d through retain_grad), all by hand:
// e = -6, d = 4, L = -8; dL/dd = f = -2, dL/de = -2, dL/dc = -2, dL/da = -2 b = 6, dL/db = -2 a = -4, dL/df = d = 4.
TEST(Autograd, ToDotShowsValuesAndGradientsPerNode) {
  auto leaf = [](double x, const char* name) {
    Variable v(full({}, x, DType::Float64), true);
    v.set_name(name);
    return v;
  };
  Variable a = leaf(2, "a"), b = leaf(-3, "b"), c = leaf(10, "c"), f = leaf(-2, "f");
  Variable e = a * b, d = e + c;
  e.retain_grad(), d.retain_grad();
  EXPECT_TRUE(e.retains_grad());
  EXPECT_FALSE(a.retains_grad());
  Variable L = d * f;
  L.backward();
  EXPECT_EQ(e.grad().item(), -2);
  EXPECT_EQ(d.grad().item(), -2);
  const std::string dot = to_dot(L, {.values = true, .grads = true});
  EXPECT_THAT(dot, HasSubstr("a\\n()\\nparam (gets .grad)\\ndata 2\\ngrad 6\""));
  EXPECT_THAT(dot, HasSubstr("b\\n()\\nparam (gets .grad)\\ndata -3\\ngrad -4\""));
  EXPECT_THAT(dot, HasSubstr("c\\n()\\nparam (gets .grad)\\ndata 10\\ngrad -2\""));
  EXPECT_THAT(dot, HasSubstr("f\\n()\\nparam (gets .grad)\\ndata -2\\ngrad 4\""));
  EXPECT_THAT(dot, HasSubstr("mul\\n()\\ndata -6\\ngrad -2\""));  // e
  EXPECT_THAT(dot, HasSubstr("add\\n()\\ndata 4\\ngrad -2\""));   // d
  EXPECT_THAT(dot, HasSubstr("mul\\n()\\ndata -8\""));            // L: no retained gradient
  // without options the labels are as before: op, shape
  EXPECT_THAT(to_dot(L), testing::Not(HasSubstr("data")));
}

TEST(Autograd, ToDotShowsNormsOfLargeTensorsAndOnlyLiveValues) {
  Variable w(full({3, 4}, 0.5, DType::Float64), true);  // norm sqrt(12 * 0.25) = sqrt(3)
  w.set_name("w");
  Variable y = sum(relu(w) * 2.0);
  y.backward();  // dy/dw = 2 everywhere: norm sqrt(12 * 4) = 6.928
  const std::string dot = to_dot(y, {.values = true, .grads = true});
  EXPECT_THAT(dot, HasSubstr("|data| 1.732"));
  EXPECT_THAT(dot, HasSubstr("|grad| 6.928"));
  // the relu and mul outputs were temporaries: gone, so their nodes show no value
  EXPECT_THAT(dot, HasSubstr("relu\\n(3, 4)\""));
  EXPECT_THROW(to_dot(y, {.max_elements = -1}), ValueError);
}

TEST(Autograd, RetainGradSumsOverBackwardsAndDoesNotKeepTheVariableAlive) {
  Variable x(tensor({1.0, 2.0}, {2}).to(DType::Float64), true);
  Variable h = x * 3.0;
  h.retain_grad();
  h.retain_grad();          // twice is once
  Variable y = sum(h * h);  // dy/dh = 2h = (6, 12)
  y.backward({}, true);
  expect_values(h.grad(), {2}, {6, 12});
  y.backward();
  expect_values(h.grad(), {2}, {12, 24});  // summed, like a leaf's
  // the node's hook holds h weakly: dropping h frees it although the graph lives on
  std::weak_ptr<VariableImpl> weak;
  Variable z;
  {
    Variable k = x * 2.0;
    k.retain_grad();
    weak = k.impl();
    z = sum(k);
  }
  EXPECT_TRUE(weak.expired());
  z.backward();  // the hook finds nothing to store into, and nothing breaks
  EXPECT_THROW(Variable(tensor({1.0}, {1}), false).retain_grad(), StateError);
}

// ---- in-place writes after the forward (Storage::version, Node::saved_versions) ----

namespace {
// backward() must fail with a StateError whose text holds every piece in `parts`.
void expect_inplace_error(const std::function<void()>& backward, const std::vector<std::string>& parts) {
  try {
    backward();
    ADD_FAILURE() << "no error: the gradient was computed from numbers written after the forward";
  } catch (const StateError& e) {
    EXPECT_THAT(e.what(), HasSubstr("modified by an in-place operation"));
    for (const std::string& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}
}  // namespace

TEST(Versions, EveryInPlaceWriteCountsAndViewsShareTheCount) {
  Tensor t = zeros({2, 3});
  EXPECT_EQ(t.version(), 0u);
  t.fill_(1);
  EXPECT_EQ(t.version(), 1u);
  t.copy_(ones({3}));  // broadcast
  EXPECT_EQ(t.version(), 2u);
  add_(t, ones({2, 3}));
  EXPECT_EQ(t.version(), 3u);
  const Tensor view = t.transpose(0, 1).narrow(0, 1, 2);  // shares t's storage, so its count
  EXPECT_EQ(view.version(), 3u);
  view.fill_(0);
  EXPECT_EQ(t.version(), 4u);
  const Tensor out = t * 2.0;  // an op's new output starts its own count
  EXPECT_EQ(out.version(), 0u);
  EXPECT_EQ(t.version(), 4u);  // reading does not count
}

TEST(Versions, WritingASavedOutputBeforeBackwardIsAnError) {
  // y = e^x keeps y for dx = dy * y: after y.data() *= 2 the gradient would be 2 e^x, silently.
  Variable x(tensor({0.5f, 1}, {2}), true);
  Variable y = exp(x);
  Variable l = sum(y);
  y.data().copy_(y.data() * 2.0);
  expect_inplace_error([&] { l.backward(); },
                       {"'exp'", "its output (shape (2,))", "now at version 1", "ran at version 0", "clone()"});
  EXPECT_FALSE(x.grad().defined());  // nothing was accumulated
  // the same for the other ops whose rule reads their output
  for (auto op : {+[](const Variable& v) { return sigmoid(v); }, +[](const Variable& v) { return tanh(v); },
                  +[](const Variable& v) { return sqrt(v); }, +[](const Variable& v) { return softmax(v, 0); }}) {
    Variable z(tensor({0.5f, 1}, {2}), true);
    Variable out = op(z);
    Variable loss = sum(out);
    out.data().fill_(0);
    expect_inplace_error([&] { loss.backward(); }, {"its output"});
  }
}

TEST(Versions, WritingASavedInputBeforeBackwardIsAnError) {
  // b = a * a keeps a: with a += 10 before backward, db/da would come out 22, 24 instead of 2, 4.
  Variable a(tensor({1, 2}, {2}), true);
  Variable b = a * a;
  a.data().copy_(a.data() + 10.0);
  expect_inplace_error([&] { sum(b).backward(); }, {"'mul'", "its input 0 (shape (2,))"});
  // through a view of the input: the view shares the storage's count
  Variable c(tensor({1, 2, 3, 4}, {2, 2}), true);
  Variable d = matmul(c, c);
  c.data().transpose(0, 1).narrow(0, 1, 1).fill_(7);
  expect_inplace_error([&] { sum(d).backward(); }, {"'matmul'", "its input"});
}

TEST(Versions, LegalWritesStayLegal) {
  // after the backward: the graph is done with the numbers
  Variable a(tensor({1, 2}, {2}), true);
  sum(a * a).backward();
  a.data().fill_(3);
  expect_values(a.grad(), {2}, {2, 4});
  // under no_grad, before a new forward: the new graph saves the new numbers
  {
    NoGradGuard no_grad;
    a.data().copy_(tensor({5, 6}, {2}));
  }
  a.zero_grad();
  sum(a * a).backward();
  expect_values(a.grad(), {2}, {10, 12});
  // to a tensor nothing saved: add keeps nothing, linear keeps x and W but not the bias
  Variable p(tensor({1, 2}, {2}), true), q(tensor({3, 4}, {2}), true);
  Variable s = p + q;
  p.data().fill_(0);
  sum(s).backward();
  expect_values(q.grad(), {2}, {1, 1});
  Variable x(tensor({1, 2}, {1, 2}), true), w(tensor({1, 1, 1, 1}, {2, 2}), true), bias(tensor({0, 0}, {2}), true);
  Variable y = linear(x, w, bias);
  bias.data().fill_(5);
  sum(y).backward();
  expect_values(w.grad(), {2, 2}, {1, 2, 1, 2});
  // with retain_graph, a write between two backwards is caught at the second
  Variable r(tensor({2}, {1}), true);
  Variable e = exp(r);
  sum(e).backward({.retain_graph = true});
  e.data().fill_(0);
  expect_inplace_error([&] { sum(e).backward(); }, {"'exp'"});
}

TEST(Versions, AnOptimizerStepBetweenForwardAndBackwardIsCaught) {
  // The GAN-style mistake: the weights updated in place while a graph that read them waits.
  Generator g(3);
  Variable w(randn({3, 4}, g), true), x(randn({2, 4}, g));
  optim::SGD opt({w}, {.lr = 0.1});
  Variable first = sum(linear(x, w));
  first.backward();
  Variable second = sum(linear(x, w) * linear(x, w));
  opt.step();  // p -= lr * grad, in place
  expect_inplace_error([&] { second.backward(); }, {"'linear'", "its input 1 (shape (3, 4))"});
}

TEST(Versions, CapturedIndicesMasksAndFunctionSavesAreChecked) {
  Variable x(tensor({1, 2, 3, 4}, {4}), true);
  const Tensor index = from_vector<int64_t>({3, 0}, {2});
  Variable y = gather(x, 0, index);
  index.fill_(1);
  expect_inplace_error([&] { sum(y).backward(); }, {"'gather'", "a tensor it captured besides its inputs (shape (2,)"});
  const Tensor mask = from_vector<bool>({true, false, false, true}, {4});
  Variable z = masked_fill(x * 1.0, mask, 0.0);
  mask.fill_(false);
  expect_inplace_error([&] { sum(z).backward(); }, {"'masked_fill'"});
  const Tensor targets = from_vector<int64_t>({1}, {1});
  Variable logits(tensor({0.1f, 0.2f, 0.3f}, {1, 3}), true);
  Variable loss = cross_entropy(logits, targets);
  targets.fill_(2);
  expect_inplace_error([&] { loss.backward(); }, {"'cross_entropy'"});
}

namespace {
struct SavesItsInput : Function {
  std::string name() const override { return "saves_its_input"; }
  Tensor forward(FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    ctx.save_for_backward({in[0]});
    return in[0] * in[0];
  }
  std::vector<Tensor> backward(FunctionCtx& ctx, const Tensor& dy) override { return {dy * ctx.saved()[0] * 2.0}; }
};
}  // namespace

TEST(Versions, ACustomFunctionsSavedTensorsAreChecked) {
  Variable x(tensor({1, 2}, {2}), true);
  Variable y = apply_function<SavesItsInput>({x});
  x.data().fill_(9);
  expect_inplace_error([&] { sum(y).backward(); }, {"'saves_its_input'", "what a custom Function saved"});
}

TEST(Versions, FusedOpsAndHigherOrderGraphsAreChecked) {
  Generator g(5);
  // fused attention: its backward reads q, k, v and its own output
  Variable q(randn({1, 2, 3, 4}, g), true), k(randn({1, 2, 3, 4}, g), true), v(randn({1, 2, 3, 4}, g), true);
  Variable o = scaled_dot_product_attention(q, k, v, {.is_causal = true});
  o.data().narrow(2, 0, 1).fill_(0);
  expect_inplace_error([&] { sum(o * o).backward(); }, {"'scaled_dot_product_attention'", "its output"});
  Variable o2 = scaled_dot_product_attention(q, k, v, {.is_causal = true});
  v.data().fill_(1);
  expect_inplace_error([&] { sum(o2).backward(); }, {"'scaled_dot_product_attention'", "its input 2"});
  // fused layer norm: x and the weight
  Variable x(randn({2, 5}, g), true), w(randn({5}, g), true), b(randn({5}, g), true);
  Variable y = layer_norm(x, {5}, w, b);
  w.data().fill_(2);
  expect_inplace_error([&] { sum(y * y).backward(); }, {"'layer_norm'", "its input 1"});
  // a second derivative: grad's graph saved x; writing x before differentiating it again is caught
  Variable t(tensor({2}, {1}), true);
  Variable dy = grad({t * t * t}, {t}, {.create_graph = true})[0];  // 3 t^2, recorded
  t.data().fill_(1);
  expect_inplace_error([&] { dy.backward(); }, {"its input"});
}
