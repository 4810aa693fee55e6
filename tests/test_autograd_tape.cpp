// The tape: gradients summed and accumulated, retain_graph, no-grad, detach, the leaf rules, deep
// graphs, bit-for-bit reproducible training, retain_grad, and to_dot, which draws the tape (ops,
// parameters, values and gradients).
#include "helpers.h"

using namespace mg;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;

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
