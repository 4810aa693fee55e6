// Derivatives of derivatives: mg::grad and backward with create_graph, gradgradcheck over every op
// that is differentiable twice, the typed error of one that is not, vjp/jvp/hvp, and dual numbers.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

namespace {
Variable leaf(double v) { return Variable(scalar_tensor(v, DType::Float64), true); }
Tensor f64(const std::vector<double>& v, const Shape& s) { return from_vector<double>(v, s); }
Tensor ints(const std::vector<int64_t>& v, const Shape& s) { return from_vector<int64_t>(v, s); }
// rnd, with every element at least `gap` away from 0 (for ops with a kink there)
Tensor away_from_zero(const Shape& s, uint64_t seed, double gap = 0.1) {
  const Tensor r = rnd(s, seed);
  return r + mg::sign(r) * gap;
}
}  // namespace

// ---- the engine ----

TEST(HigherOrder, ThirdDerivativeOfACube) {
  // y = x^3 at x = 1.5: y' = 3x^2 = 6.75, y'' = 6x = 9, y''' = 6, each a Variable with history
  const Variable x = leaf(1.5);
  const Variable y = x * x * x;
  const Variable d1 = grad({y}, {x}, {.create_graph = true})[0];
  EXPECT_DOUBLE_EQ(d1.item(), 6.75);
  ASSERT_TRUE(d1.requires_grad());
  const Variable d2 = grad({d1}, {x}, {.create_graph = true})[0];
  EXPECT_DOUBLE_EQ(d2.item(), 9);
  const Variable d3 = grad({d2}, {x}, {.create_graph = true})[0];
  EXPECT_DOUBLE_EQ(d3.item(), 6);
}

TEST(HigherOrder, SecondDerivativesOfTranscendentals) {
  // f = sin(x) e^x:  f'' = 2 e^x cos x
  const Variable x = leaf(0.7);
  const Variable f = sin(x) * exp(x);
  const Variable d1 = grad({f}, {x}, {.create_graph = true})[0];
  EXPECT_NEAR(d1.item(), std::exp(0.7) * (std::sin(0.7) + std::cos(0.7)), 1e-15);
  const Variable d2 = grad({d1}, {x})[0];
  EXPECT_NEAR(d2.item(), 2 * std::exp(0.7) * std::cos(0.7), 1e-14);
  EXPECT_FALSE(d2.requires_grad());  // without create_graph: numbers only
}

TEST(HigherOrder, MixedPartialsOfTwoInputs) {
  // f = x^2 y^3: df/dx = 2x y^3, d2f/dxdy = 6 x y^2 (= d2f/dydx)
  const Variable x = leaf(2), y = leaf(-1.5);
  const Variable f = pow(x, 2) * pow(y, 3);
  const V g = grad({f}, {x, y}, {.create_graph = true});
  EXPECT_DOUBLE_EQ(g[0].item(), 2 * 2 * std::pow(-1.5, 3));
  EXPECT_DOUBLE_EQ(g[1].item(), 3 * 4 * 1.5 * 1.5);
  EXPECT_DOUBLE_EQ(grad({g[0]}, {y})[0].item(), 6 * 2 * 1.5 * 1.5);
  EXPECT_DOUBLE_EQ(grad({g[1]}, {x})[0].item(), 6 * 2 * 1.5 * 1.5);
}

TEST(HigherOrder, GradTouchesNoDotGradAndRunsOnlyWhatLeadsToTheInputs) {
  const Variable a(rnd({3}, 1), true), b(rnd({3}, 2), true);
  int calls_b_side = 0;
  const Variable bb = exp(b);
  bb.register_hook([&](const Tensor&) {
    ++calls_b_side;
    return Tensor();
  });
  const Variable y = sum(a * a) + sum(bb);
  const V g = grad({y}, {a});
  expect_close(g[0].data(), a.data() * 2.0, 0, 0);
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  EXPECT_EQ(calls_b_side, 0);  // exp(b) leads to no input asked for: it did not run
}

TEST(HigherOrder, GradOfANonLeafAndGradOutputs) {
  const Variable x(rnd({2, 3}, 3), true);
  const Variable h = x * 2.0;
  const Variable y = h * h;  // dy/dh = 2h, weighted by v
  const Tensor v = rnd({2, 3}, 4);
  const V g = grad({y}, {h, x}, {.grad_outputs = {Variable(v)}});
  expect_close(g[0].data(), h.data() * v * 2.0, 0, 0);
  expect_close(g[1].data(), h.data() * v * 4.0, 1e-15, 1e-15);
}

TEST(HigherOrder, GradErrors) {
  const Variable x = leaf(1), z = leaf(2), c(scalar_tensor(1.0, DType::Float64));
  const Variable y = x * 3.0;
  try {
    grad({y}, {x, z}, {.retain_graph = true});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("grad: input 1"));
    EXPECT_THAT(e.what(), HasSubstr("allow_unused"));
  }
  const V g = grad({y}, {x, z}, {.retain_graph = true, .allow_unused = true});
  EXPECT_EQ(g[0].item(), 3);
  EXPECT_FALSE(g[1].defined());
  EXPECT_THROW(grad({y}, {c}, {.retain_graph = true}), StateError);  // c does not require grad
  EXPECT_THROW(grad({y}, {}, {.retain_graph = true}), ValueError);   // nothing to differentiate by
  EXPECT_THROW(grad({y}, {x}, {.grad_outputs = {Variable(), Variable()}}), ValueError);
  const Variable v2(rnd({2}, 5), true);
  EXPECT_THROW(grad({v2 * 2.0}, {v2}), ShapeError);  // two elements and no grad_output
}

TEST(HigherOrder, RetainGraphDefaultsToCreateGraph) {
  const Variable x = leaf(0.5);
  const Variable y = exp(x) * x;
  grad({y}, {x}, {.create_graph = true});
  EXPECT_NO_THROW(grad({y}, {x}));           // kept by the first call
  EXPECT_THROW(grad({y}, {x}), StateError);  // freed by the second
}

TEST(HigherOrder, BackwardWithCreateGraphGivesADifferentiableGrad) {
  // A gradient penalty: L = sum(w^2 x), dL/dw = 2 w x; P = sum((dL/dw)^2) = 4 sum(w^2 x^2); dP/dw = 8 w x^2
  const Tensor x = rnd({4}, 6);
  const Variable w(rnd({4}, 7), true);
  sum(w * w * Variable(x)).backward({.create_graph = true});
  expect_close(w.grad(), w.data() * x * 2.0, 0, 0);
  const Variable g = w.grad_variable();
  ASSERT_TRUE(g.requires_grad());
  const Variable penalty = sum(g * g);
  w.zero_grad();
  EXPECT_FALSE(w.grad_variable().defined());  // zero_grad forgets the history too
  penalty.backward();
  expect_close(w.grad(), w.data() * x * x * 8.0, 1e-15, 1e-14);
  EXPECT_FALSE(w.grad_variable().requires_grad());  // a plain backward: numbers only
}

TEST(HigherOrder, CreateGraphOffRecordsNothingAndKeepsTheBits) {
  // Without create_graph, mg::grad runs the same Tensor rules as backward(): the same bits, and no
  // history. With it, the rules run as recorded ops (cross_entropy's in its composed form), equal
  // to float32 rounding.
  Generator gen(3);
  nn::Sequential net;
  net.emplace_back<nn::Linear>(5, 8, nn::LinearOptions{}, gen);
  net.emplace_back<nn::GELU>();
  net.emplace_back<nn::Linear>(8, 3, nn::LinearOptions{}, gen);
  const Tensor x = randn({6, 5}, gen), t = ints({0, 2, 1, 1, 0, 2}, {6});
  const V params = net.parameters();
  const Variable loss = cross_entropy(net.forward(Variable(x)), t);
  const V plain = grad({loss}, params, {.retain_graph = true});
  const V graph = grad({loss}, params, {.retain_graph = true, .create_graph = true});
  loss.backward();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_FALSE(plain[i].requires_grad());
    EXPECT_EQ(plain[i].grad_fn(), nullptr);
    EXPECT_TRUE(graph[i].requires_grad());
    expect_close(plain[i].data(), params[i].grad(), 0, 0);
    expect_close(graph[i].data(), plain[i].data(), 1e-7, 1e-5);
  }
}

TEST(HigherOrder, AnOpWithoutASecondRuleSaysSo) {
  // conv2d's backward is a kernel with no rule of its own: its gradient exists with create_graph,
  // and differentiating that gradient is a NotImplementedError naming the op, not a silent zero.
  const Variable x(rnd({1, 1, 4, 4}, 8), true), w(rnd({1, 1, 3, 3}, 9), true);
  const Variable y = sum(pow(conv2d(x, w), 2));
  const V g = grad({y}, {w}, {.create_graph = true});
  expect_close(g[0].data(), grad({sum(pow(conv2d(x, w), 2))}, {w})[0].data(), 0, 0);
  try {
    grad({sum(g[0] * g[0])}, {x});
    FAIL();
  } catch (const NotImplementedError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'conv2d' is not differentiable twice"));
  }
  // conv1d and conv_transpose1d run conv2d's kernels, but the error names the op that was called
  const Variable x1(rnd({1, 1, 5}, 10), true), w1(rnd({1, 1, 3}, 11), true);
  for (int transposed = 0; transposed < 2; ++transposed) {
    auto f = [&] { return transposed ? conv_transpose1d(x1, w1) : conv1d(x1, w1); };
    const V g1 = grad({sum(pow(f(), 2))}, {w1}, {.create_graph = true});
    try {
      grad({sum(g1[0] * g1[0])}, {x1});
      FAIL();
    } catch (const NotImplementedError& e) {
      EXPECT_THAT(e.what(), HasSubstr(transposed ? "'conv_transpose1d' is not differentiable twice"
                                                 : "'conv1d' is not differentiable twice"));
    }
  }
}

TEST(HigherOrder, AHookThatReplacesAGradientCannotBeRecorded) {
  const Variable x = leaf(2);
  const Variable h = x * x;
  h.register_hook([](const Tensor& g) { return g * 2.0; });
  EXPECT_THROW(grad({h * 3.0}, {x}, {.create_graph = true}), NotImplementedError);
  const Variable x2 = leaf(2);
  const Variable h2 = x2 * x2;
  int seen = 0;
  h2.register_hook([&](const Tensor& g) {  // hooks that only look are fine, also one that returns g itself
    ++seen;
    return g;
  });
  h2.retain_grad();
  const Variable g = grad({h2 * 3.0}, {x2}, {.create_graph = true})[0];
  EXPECT_EQ(g.item(), 12);
  EXPECT_EQ(seen, 1);
  EXPECT_FALSE(h2.grad().defined());  // mg::grad touches no .grad(), retain_grad's included
  (h2 * 3.0).backward({.create_graph = true});
  EXPECT_EQ(seen, 2);
  EXPECT_EQ(h2.grad().item(), 3);  // backward fills it
}

TEST(HigherOrder, GradRunsALeafInputsHooks) {
  const Variable x = leaf(2);
  x.register_hook([](const Tensor& g) { return g * 10.0; });
  EXPECT_EQ(grad({x * 3.0}, {x})[0].item(), 30);  // as backward would put into .grad()
  EXPECT_FALSE(x.grad().defined());
}

TEST(HigherOrder, AZeroSecondDerivativeIsZeroNotUnused) {
  // relu's gradient does not depend on x (away from 0): its derivative is 0, and x was used
  const Variable x(away_from_zero({4}, 90), true);
  const Variable g = grad({sum(relu(x))}, {x}, {.create_graph = true})[0];  // 1 where x > 0, else 0
  ASSERT_TRUE(g.requires_grad());
  const Variable d = grad({sum(g)}, {x})[0];  // without allow_unused: x was used, its derivative is 0
  expect_close(d.data(), zeros({4}, DType::Float64), 0, 0);
  const Variable l = leaf(1.5);
  const Variable dl = grad({relu(l)}, {l}, {.create_graph = true})[0];  // relu' = 1, its derivative 0
  EXPECT_EQ(grad({dl}, {l})[0].item(), 0);
}

TEST(HigherOrder, CreateGraphIgnoresAnEnclosingAutocast) {
  // The recorded backward keeps float32 products inside an AutocastGuard, so it is differentiable
  // twice and equals the same backward outside one.
  const Tensor a = rnd({3, 4}, 91).to(DType::Float32), b = rnd({4, 2}, 92).to(DType::Float32);
  Variable x(a, true);
  const Variable y = sum(pow(matmul(x, Variable(b)), 2));  // recorded without autocast
  Variable g_outside = grad({y}, {x}, {.retain_graph = true, .create_graph = true})[0];
  Variable g_inside;
  {
    const AutocastGuard bf16;
    g_inside = grad({y}, {x}, {.retain_graph = true, .create_graph = true})[0];
  }
  expect_close(g_inside.data(), g_outside.data(), 0, 0);
  {
    const AutocastGuard bf16;  // backward with create_graph, the same
    y.backward({.create_graph = true});
  }
  expect_close(x.grad_variable().data(), g_outside.data(), 0, 0);
}

TEST(HigherOrder, ALeafHookThatReplacesItsGradientCannotBeRecorded) {
  const Variable x = leaf(2);
  x.register_hook([](const Tensor& g) { return g * 2.0; });
  EXPECT_EQ(grad({x * x}, {x})[0].item(), 8);  // without create_graph the hook applies
  EXPECT_THROW(grad({x * x}, {x}, {.create_graph = true}), NotImplementedError);
  EXPECT_THROW((x * x).backward({.create_graph = true}), NotImplementedError);
}

// ---- gradgradcheck over every op that is differentiable twice (docs/03's table, last column) ----

namespace {
struct OpCase {
  std::string name;
  mgtest::Fn fn;
  std::vector<Tensor> inputs;
};

std::vector<OpCase> twice_differentiable_cases() {
  const Tensor a = rnd({2, 3}, 11), b = rnd({2, 3}, 12), pos = rnd({2, 3}, 13, 0.5, 2), row = rnd({3}, 14);
  const Tensor nz = away_from_zero({2, 3}, 15), mask = gt(rnd({2, 3}, 16), scalar_tensor(0, DType::Float64));
  const Tensor ids = ints({0, 2, 1, 2}, {4}), idx = ints({1, 0, 2, 1, 1, 0}, {2, 3});
  const Tensor targets = ints({0, 2, 1, 2}, {4});
  std::vector<OpCase> c = {
      {"add", [](const V& x) { return x[0] + x[1]; }, {a, row}},
      {"sub", [](const V& x) { return x[0] - x[1]; }, {a, b}},
      {"mul", [](const V& x) { return x[0] * x[1]; }, {a, row}},
      {"div", [](const V& x) { return x[0] / x[1]; }, {a, pos}},
      {"neg", [](const V& x) { return -x[0]; }, {a}},
      {"pow", [](const V& x) { return pow(x[0], 3.5); }, {pos}},
      {"exp", [](const V& x) { return exp(x[0]); }, {a}},
      {"log", [](const V& x) { return log(x[0]); }, {pos}},
      {"sqrt", [](const V& x) { return sqrt(x[0]); }, {pos}},
      {"abs", [](const V& x) { return abs(x[0]) * x[0]; }, {nz}},
      {"sign", [](const V& x) { return sign(x[0]) * x[0] * x[0]; }, {nz}},
      {"tanh", [](const V& x) { return tanh(x[0]); }, {a}},
      {"sigmoid", [](const V& x) { return sigmoid(x[0]); }, {a}},
      {"sin", [](const V& x) { return sin(x[0]); }, {a}},
      {"cos", [](const V& x) { return cos(x[0]); }, {a}},
      {"log1p", [](const V& x) { return log1p(x[0]); }, {pos}},
      {"expm1", [](const V& x) { return expm1(x[0]); }, {a}},
      {"clamp", [](const V& x) { return clamp(x[0] * x[0], 0.2, 0.7); }, {a}},
      {"maximum", [](const V& x) { return maximum(x[0], x[1]) * x[0]; }, {a, b}},
      {"minimum", [](const V& x) { return minimum(x[0], x[1]) * x[1]; }, {a, b}},
      {"masked_fill", [mask](const V& x) { return masked_fill(x[0] * x[0], mask, 2.0); }, {a}},
      {"where", [mask](const V& x) { return where(mask, x[0] * x[1], x[1] * x[1]); }, {a, b}},
      {"relu", [](const V& x) { return relu(x[0]) * x[0]; }, {nz}},
      {"gelu", [](const V& x) { return gelu(x[0]); }, {a}},
      {"gelu_tanh", [](const V& x) { return gelu(x[0], "tanh"); }, {a}},
      {"silu", [](const V& x) { return silu(x[0]); }, {a}},
      {"softplus", [](const V& x) { return softplus(x[0], 2.0, 1.0); }, {a}},
      {"leaky_relu", [](const V& x) { return leaky_relu(x[0], 0.2) * x[0]; }, {nz}},
      {"elu", [](const V& x) { return elu(x[0], 0.7); }, {nz}},
      {"tanh_backward", [](const V& x) { return tanh_backward(x[0], x[1]); }, {a, b}},
      {"sigmoid_backward", [](const V& x) { return sigmoid_backward(x[0], x[1]); }, {a, b}},
      {"gelu_backward", [](const V& x) { return gelu_backward(x[0], x[1]); }, {a, b}},
      {"silu_backward", [](const V& x) { return silu_backward(x[0], x[1]); }, {a, b}},
      {"softplus_backward", [](const V& x) { return softplus_backward(x[0], x[1], 1.5, 1.0); }, {a, b}},
      {"elu_backward", [](const V& x) { return elu_backward(x[0], x[1], 0.7); }, {a, nz}},
      {"relu_backward", [](const V& x) { return relu_backward(x[0] * x[0], x[1]); }, {a, nz}},
      {"leaky_relu_backward", [](const V& x) { return leaky_relu_backward(x[0] * x[0], x[1], 0.3); }, {a, nz}},
      {"clamp_backward", [](const V& x) { return clamp_backward(x[0] * x[0], x[1], -0.5, 0.5); }, {a, b}},
      {"reshape",
       [](const V& x) {
         return reshape(x[0] * x[0], {3, 2});
       },
       {a}},
      {"view", [](const V& x) { return view(x[0] * x[0], {6}); }, {a}},
      {"transpose", [](const V& x) { return transpose(x[0], 0, 1) * transpose(x[0], 0, 1); }, {a}},
      {"permute",
       [](const V& x) {
         return permute(x[0] * x[0], {1, 0});
       },
       {a}},
      {"slice", [](const V& x) { return slice(x[0] * x[0], 1, 0, 3, 2); }, {a}},
      {"expand",
       [](const V& x) {
         return expand(x[0], {2, 3}) * expand(x[0], {2, 3});
       },
       {row}},
      {"concat",
       [](const V& x) {
         return concat({x[0] * x[0], x[1]}, 0);
       },
       {a, b}},
      {"sum", [](const V& x) { return sum(x[0] * x[0], {1}); }, {a}},
      {"mean", [](const V& x) { return mean(x[0] * x[0], {0}, true); }, {a}},
      {"max", [](const V& x) { return max(x[0] * x[0], 1).first; }, {a}},
      {"min", [](const V& x) { return min(x[0] * x[1], 0).first; }, {a, b}},
      {"var", [](const V& x) { return var(x[0], {1}); }, {a}},
      {"std", [](const V& x) { return mg::std(x[0], {1}); }, {a}},
      {"logsumexp", [](const V& x) { return logsumexp(x[0], {1}); }, {a}},
      {"matmul",
       [](const V& x) { return matmul(x[0], transpose(x[1], 0, 1)) * matmul(x[0], transpose(x[1], 0, 1)); },
       {a, b}},
      {"linear", [](const V& x) { return pow(linear(x[0], x[1], x[2]), 2); }, {rnd({4, 3}, 17), a, rnd({2}, 18)}},
      {"linear_gelu", [](const V& x) { return linear_gelu(x[0], x[1], x[2]); }, {rnd({4, 3}, 17), a, rnd({2}, 18)}},
      {"softmax", [](const V& x) { return softmax(x[0], 1); }, {a}},
      {"log_softmax", [](const V& x) { return log_softmax(x[0], 0); }, {a}},
      {"layer_norm", [](const V& x) { return layer_norm(x[0], {3}, x[1], x[2]); }, {a, row, rnd({3}, 19)}},
      {"batch_norm",
       [](const V& x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], Variable(), true); },
       {rnd({4, 2}, 20), rnd({2}, 21)}},
      {"group_norm", [](const V& x) { return group_norm(x[0], 2, x[1]); }, {rnd({2, 4, 2}, 22), rnd({4}, 23)}},
      {"gather", [idx](const V& x) { return gather(x[0] * x[0], 0, idx.narrow(0, 0, 2)); }, {rnd({3, 3}, 24)}},
      {"index_select", [ids](const V& x) { return index_select(x[0] * x[0], 1, ids.narrow(0, 0, 3)); }, {a}},
      {"embedding", [ids](const V& x) { return embedding(ids, x[0]) * embedding(ids, x[0]); }, {rnd({3, 2}, 25)}},
      {"cross_entropy", [targets](const V& x) { return cross_entropy(x[0], targets); }, {rnd({4, 3}, 26)}},
      {"cross_entropy_options",
       [targets](const V& x) {
         return cross_entropy(x[0], targets,
                              {.weight = f64({0.5, 2, 1}, {3}),
                               .ignore_index = 1,
                               .reduction = Reduction::Mean,
                               .label_smoothing = 0.2});
       },
       {rnd({4, 3}, 27)}},
      {"cross_entropy_none",
       [targets](const V& x) { return cross_entropy(x[0], targets, {.reduction = Reduction::None}); },
       {rnd({4, 3}, 28)}},
      {"nll_loss", [targets](const V& x) { return nll_loss(log_softmax(x[0], 1), targets); }, {rnd({4, 3}, 29)}},
      {"mse_loss", [](const V& x) { return mse_loss(x[0] * x[0], x[1]); }, {a, b}},
      {"scaled_dot_product_attention",
       [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true}); },
       {rnd({1, 2, 3, 2}, 30), rnd({1, 2, 3, 2}, 31), rnd({1, 2, 3, 2}, 32)}},
      {"scaled_dot_product_attention_gqa",
       [](const V& x) {
         return scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true, .scale = 0.6, .enable_gqa = true});
       },
       {rnd({1, 4, 3, 2}, 42), rnd({1, 2, 3, 2}, 43), rnd({1, 2, 3, 2}, 44)}},
      {"rms_norm", [](const V& x) { return rms_norm(x[0], {3}, x[1]); }, {a, row}},
      {"rotary_embedding",
       [](const V& x) {
         auto [c, s] = rotary_tables(2, 3, 10.0, DType::Float64);
         return rotary_embedding(x[0] * x[0], c, s);
       },
       {rnd({2, 3, 2}, 45)}},
      {"repeat", [](const V& x) { return repeat(x[0] * x[0], {2, 1, 2}); }, {a}},
      {"flip", [](const V& x) { return flip(x[0] * x[0], {0, 1}); }, {a}},
      {"repeat_interleave", [](const V& x) { return repeat_interleave(x[0] * x[0], 2, 1); }, {a}},
      {"lerp", [](const V& x) { return lerp(x[0], x[1] * x[1], x[0] * x[1]); }, {a, b}},
      {"addmm", [](const V& x) { return addmm(x[0] * x[0], x[1], x[2] * x[2], 0.5, 2.0); },
       {rnd({3}, 46), rnd({2, 4}, 47), rnd({4, 3}, 48)}},
      {"baddbmm", [](const V& x) { return baddbmm(x[0], x[1] * x[1], x[2], 2.0, 0.5); },
       {rnd({2, 1, 3}, 49), rnd({2, 2, 4}, 50), rnd({2, 4, 3}, 51)}},
      {"normalize", [](const V& x) { return normalize(x[0], 2.0, 1); }, {a}},
      {"interpolate",
       [](const V& x) { return interpolate(x[0].unsqueeze(0) * x[0].unsqueeze(0), {.size = {3, 5}, .mode = "bilinear"}); },
       {rnd({1, 2, 3}, 52)}},
      {"pad", [](const V& x) { return pad(x[0] * x[0], {2, 1}, "constant", 0.5) + pad(x[0], {1, 2}, "reflect"); }, {a}},
      {"cosine_similarity", [](const V& x) { return cosine_similarity(x[0], x[1], 1); }, {a, b}},
      {"einsum", [](const V& x) { return einsum("ij,kj,ii->ik", {x[0] * x[0], x[1], x[2]}); },
       {a, b, rnd({2, 2}, 53)}},
      {"diagonal", [](const V& x) { return diagonal(x[0] * x[0], 1); }, {a}},
      {"diagonal_backward", [](const V& x) { return diagonal_backward(x[0] * x[0], {3, 2}, -1, 0, 1); },
       {rnd({2}, 54)}},
      {"scatter", [idx](const V& x) { return scatter(x[0] * x[0], 0, idx, x[1] * x[1]) + scatter(x[0], 1, idx, 2.0); },
       {rnd({3, 3}, 55), rnd({2, 3}, 56)}},
      {"scatter_add", [idx](const V& x) { return scatter_add(x[0] * x[1], 0, idx, x[1] * x[1]); },
       {rnd({3, 3}, 57), rnd({3, 3}, 58)}},
      {"index_get", [ids](const V& x) { return index_get(x[0] * x[0], {ids}); }, {rnd({3, 2}, 59)}},
      {"index_put",
       [ids](const V& x) { return index_put(x[0] * x[0], {ids}, x[1] * x[1], true) + index_put(x[0], {ids}, x[1] * x[0].sum()); },
       {rnd({3, 2}, 60), rnd({2}, 61)}},
      {"masked_select", [](const V& x) { return masked_select(x[0] * x[0], gt(x[1].data(), zeros({}, DType::Float64))); },
       {a, b}},
      {"self_attention_qkv", [](const V& x) { return self_attention_qkv(x[0], 2, false); }, {rnd({1, 3, 12}, 33)}},
      {"self_attention_qkv_causal", [](const V& x) { return self_attention_qkv(x[0], 3, true); }, {rnd({2, 3, 9}, 41)}},
      {"linear_gelu_no_bias",
       [](const V& x) { return linear_gelu(x[0], x[1], Variable(), "tanh"); },
       {rnd({4, 3}, 42), a}},
      {"layer_norm_no_weight",
       [](const V& x) {
         return layer_norm(x[0], {2, 3}, Variable(), x[1]);
       },
       {rnd({2, 2, 3}, 43), b}},
      {"nll_loss_options",
       [targets](const V& x) {
         return nll_loss(log_softmax(x[0], 1), targets,
                         {.weight = f64({0.3, 1.5, 2}, {3}), .ignore_index = 2, .reduction = Reduction::Mean});
       },
       {rnd({4, 3}, 44)}},
      {"cross_entropy_sum",
       [targets](const V& x) {
         return cross_entropy(x[0], targets, {.weight = f64({1, 0.5, 2}, {3}), .reduction = Reduction::Sum});
       },
       {rnd({4, 3}, 45)}},
      // composed of the ops above
      {"flatten", [](const V& x) { return flatten(x[0] * x[0]); }, {a}},
      {"narrow", [](const V& x) { return narrow(x[0] * x[0], 1, 1, 2); }, {a}},
      {"squeeze", [](const V& x) { return squeeze(unsqueeze(x[0] * x[0], 0), 0); }, {a}},
      {"unsqueeze", [](const V& x) { return unsqueeze(x[0] * x[0], 1); }, {a}},
      {"unflatten",
       [](const V& x) {
         return unflatten(x[0] * x[0], 1, {3, 1});
       },
       {a}},
      {"split",
       [](const V& x) {
         return split(x[0] * x[0], {1, 2}, 1)[1];
       },
       {a}},
      {"chunk", [](const V& x) { return chunk(x[0] * x[0], 3, 1)[2]; }, {a}},
      {"stack",
       [](const V& x) {
         return stack({x[0] * x[0], x[1]}, 1);
       },
       {a, b}},
      {"topk", [](const V& x) { return topk(x[0] * x[0], 2, 1).first; }, {a}},
      {"sort", [](const V& x) { return sort(x[0] * x[1], 0, true).first; }, {a, b}},
      {"cumsum", [](const V& x) { return cumsum(x[0] * x[0], 1); }, {a}},
      {"l1_loss", [](const V& x) { return l1_loss(x[0] * x[0], x[1]); }, {a, b}},
      {"smooth_l1_loss", [](const V& x) { return smooth_l1_loss(x[0] * x[0], x[1], {.beta = 0.5}); }, {a, b}},
      {"huber_loss", [](const V& x) { return huber_loss(x[0] * x[0], x[1], {.delta = 0.5}); }, {a, b}},
      {"dropout",
       [](const V& x) {
         Generator g(5);
         return dropout(x[0] * x[0], 0.4, true, g);
       },
       {a}},
      {"batch_norm_eval",
       [](const V& x) {
         return batch_norm(x[0] * x[0], f64({0.1, -0.2}, {2}), f64({0.5, 2}, {2}), x[1], x[2], false);
       },
       {rnd({3, 2}, 35), rnd({2}, 36), rnd({2}, 37)}},
      // the backward ops of the linear-in-dy rules
      {"slice_backward",
       [](const V& x) {
         return slice_backward(x[0] * x[0], {2, 5}, 1, 1, 5, 2);
       },
       {a.narrow(1, 0, 2)}},
      {"gather_backward", [idx](const V& x) { return gather_backward(x[0] * x[0], {3, 3}, 0, idx); }, {a}},
      {"index_select_backward",
       [ids](const V& x) { return index_select_backward(x[0] * x[0], {3, 3}, 0, ids.narrow(0, 0, 2)); },
       {a}},
      {"embedding_backward",
       [ids](const V& x) { return embedding_backward(x[0] * x[0], ids, 3, 1); },
       {rnd({4, 2}, 38)}},
      {"nll_loss_backward",
       [targets](const V& x) { return nll_loss_backward(x[0] * x[0], x[1], targets, {.reduction = Reduction::Sum}); },
       {rnd({}, 39), rnd({4, 3}, 40)}},
      {"cumsum_backward", [](const V& x) { return cumsum_backward(x[0] * x[0], 0); }, {a}},
  };
  return c;
}
}  // namespace

TEST(HigherOrder, GradgradcheckEveryTwiceDifferentiableOp) {
  for (const OpCase& c : twice_differentiable_cases()) {
    SCOPED_TRACE(c.name);
    const GradcheckResult r = gradgradcheck(c.fn, c.inputs);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
  }
}

namespace {
// docs/03-writing-an-op.md's table: op -> its last column ("yes", "composed" or "no").
std::map<std::string, std::string> twice_column() {
  std::ifstream in(std::filesystem::path(MG_GOLDEN_DIR) / ".." / ".." / "docs" / "03-writing-an-op.md");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static const std::regex row_re(R"(\n\| *`([a-z_0-9]+)` *\|.*\| *(yes|composed|no) *\|)");
  std::map<std::string, std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), row_re), end; it != end; ++it) out[(*it)[1]] = (*it)[2];
  return out;
}
}  // namespace

TEST(HigherOrder, TheOpTablesTwiceColumnIsWhatIsTested) {
  // every "yes" or "composed" row has a gradgradcheck case above, and no other row does
  const std::map<std::string, std::string> column = twice_column();
  EXPECT_GT(column.size(), 90u);
  std::set<std::string> cases;
  for (const OpCase& c : twice_differentiable_cases()) cases.insert(c.name);
  for (const auto& [op, twice] : column) {
    if (twice == "no")
      EXPECT_FALSE(cases.count(op)) << op << " is marked no in docs/03 but has a gradgradcheck case";
    else
      EXPECT_TRUE(cases.count(op)) << op << " is marked " << twice << " in docs/03 but has no gradgradcheck case";
  }
}

TEST(HigherOrder, OpsThatAreNotTwiceDifferentiableNameThemselves) {
  // docs/03's table, "no" in the last column: the first derivative works, the second is the
  // NotImplementedError naming the node (conv1d records a conv2d node).
  const Tensor img = rnd({1, 1, 4, 4}, 60), p = rnd({2, 3}, 61, 0.1, 0.9), t = rnd({2, 3}, 62, 0.1, 0.9);
  struct NoCase {
    OpCase c;
    std::string node;
  };
  const std::vector<NoCase> cases = {
      {{"prod", [](const V& x) { return prod(x[0], 1); }, {rnd({2, 3}, 63)}}, "prod"},
      {{"scatter_reduce",
        [](const V& x) {
          return scatter_reduce(x[0] * x[0], 0, ints({0, 1, 0}, {1, 3}), x[1], "amax");
        },
        {rnd({2, 3}, 67), rnd({1, 3}, 68)}},
       "scatter_reduce"},
      {{"conv2d", [](const V& x) { return conv2d(x[0], x[1]); }, {img, rnd({1, 1, 2, 2}, 64)}}, "conv2d"},
      {{"conv1d", [](const V& x) { return conv1d(x[0], x[1]); }, {rnd({1, 1, 5}, 65), rnd({1, 1, 2}, 66)}},
       "conv1d"},  // (it named the conv2d it runs on)
      {{"max_pool2d",
        [](const V& x) {
          return max_pool2d(x[0] * x[0], {2, 2});
        },
        {img}},
       "max_pool2d"},
      {{"max_pool2d_with_indices",
        [](const V& x) {
          return max_pool2d_with_indices(x[0] * x[0], {2, 2}).first;
        },
        {img}},
       "max_pool2d"},
      {{"avg_pool2d",
        [](const V& x) {
          return avg_pool2d(x[0] * x[0], {2, 2});
        },
        {img}},
       "avg_pool2d"},
      {{"adaptive_avg_pool2d",
        [](const V& x) {
          return adaptive_avg_pool2d(x[0] * x[0], {2, 2});
        },
        {img}},
       "adaptive_avg_pool2d"},
      {{"binary_cross_entropy", [](const V& x) { return binary_cross_entropy(x[0], x[1]); }, {p, t}},
       "binary_cross_entropy"},
      {{"binary_cross_entropy_with_logits",
        [](const V& x) { return binary_cross_entropy_with_logits(x[0], x[1]); },
        {p, t}},
       "binary_cross_entropy_with_logits"},
      {{"kl_div", [](const V& x) { return kl_div(x[0], x[1]); }, {p, t}}, "kl_div"},
      {{"conv_transpose2d",
        [](const V& x) { return conv_transpose2d(x[0] * x[0], x[1], Variable(), {.stride = 2}); },
        {rnd({1, 2, 2, 2}, 70), rnd({2, 1, 2, 2}, 71)}},
       "conv_transpose2d"},
      {{"conv_transpose1d",
        [](const V& x) { return conv_transpose1d(x[0] * x[0], x[1], Variable(), {.stride = 2}); },
        {rnd({1, 2, 3}, 72), rnd({2, 1, 2}, 73)}},
       "conv_transpose1d"},  // (it named the conv_transpose2d it runs on)
      {{"recurrence",
        [](const V& x) { return recurrence(RNNKind::Tanh, x[0], x[1], Variable(), x[2]); },
        {rnd({3, 2, 2}, 67), rnd({2, 2}, 68), rnd({2, 2}, 69)}},
       "recurrence"},
  };
  std::set<std::string> tested;
  for (const NoCase& n : cases) {
    SCOPED_TRACE(n.c.name);
    tested.insert(n.c.name);
    EXPECT_TRUE(gradcheck(n.c.fn, n.c.inputs).ok);
    try {
      gradgradcheck(n.c.fn, n.c.inputs);
      ADD_FAILURE() << n.c.name << " was differentiated twice";
    } catch (const NotImplementedError& e) {
      EXPECT_THAT(e.what(), HasSubstr("'" + n.node));
      EXPECT_THAT(e.what(), HasSubstr("not differentiable twice"));
    }
  }
  for (const auto& [op, twice] : twice_column()) {
    if (twice == "no") {
      EXPECT_TRUE(tested.count(op)) << op << " is marked no in docs/03 but not tested here";
    }
  }
}

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

TEST(HigherOrder, SecondDerivativesDoNotDependOnTheInputsLayout) {
  // H v for the same numbers laid out contiguously, transposed, strided and at an offset: the same
  // answer (the rules under create_graph read their saved inputs through any strides).
  const Tensor base = rnd({4, 3}, 80), v = rnd({4, 3}, 81), w = rnd({3, 5}, 82), wv = rnd({4, 3}, 83);
  const Tensor t = ints({0, 2, 1, 1}, {4});
  const Tensor transposed = base.transpose(0, 1).contiguous().transpose(0, 1);
  Tensor wide = zeros({4, 6}, DType::Float64);
  wide.slice(1, 0, 6, 2).copy_(base);
  Tensor padded = zeros({6, 3}, DType::Float64);
  padded.narrow(0, 2, 4).copy_(base);
  const std::vector<Tensor> layouts = {transposed, wide.slice(1, 0, 6, 2), padded.narrow(0, 2, 4)};
  const std::vector<std::pair<std::string, std::function<Variable(const Variable&)>>> fns = {
      {"matmul", [&](const Variable& x) { return matmul(x, transpose(x, 0, 1)) * matmul(x, Variable(w)).sum(); }},
      {"softmax", [&](const Variable& x) { return softmax(x * x, 1) * Variable(wv); }},
      {"log_softmax", [&](const Variable& x) { return log_softmax(x * x, 0) * Variable(wv); }},
      {"layer_norm", [&](const Variable& x) { return layer_norm(x * x, {3}) * Variable(wv); }},
      {"linear_gelu", [&](const Variable& x) { return linear_gelu(x, transpose(Variable(w), 0, 1)); }},
      {"cross_entropy", [&](const Variable& x) { return cross_entropy(x * x, t); }},
      {"logsumexp", [&](const Variable& x) { return logsumexp(x * x, {1}); }},
      {"std", [&](const Variable& x) { return mg::std(x * x, {0}); }},
      {"attention",
       [&](const Variable& x) {
         const Variable q = reshape(x, {1, 1, 4, 3});
         return scaled_dot_product_attention(q, q * 0.5, q * q, {.is_causal = true});
       }},
  };
  for (const auto& [name, f] : fns) {
    SCOPED_TRACE(name);
    const VariableFunction loss = [&](const V& in) { return sum(pow(f(in[0]), 2)); };
    const Tensor want = hvp(loss, {Variable(base)}, {Variable(v)}).second[0].data();
    for (const Tensor& x : layouts) {
      ASSERT_TRUE(!x.is_contiguous() || x.offset() > 0);
      expect_close(hvp(loss, {Variable(x)}, {Variable(v)}).second[0].data(), want, 1e-14, 1e-13);
    }
  }
}

TEST(HigherOrder, SecondDerivativesOfZeroSizeZeroDimAndExpandedInputs) {
  const VariableFunction f = [](const V& in) { return sum(pow(tanh(matmul(in[0], in[1])), 2)); };
  // a batch of zero rows: the input's H v is empty, the weight's is zero (the loss is the empty sum)
  const auto [l0, h0] = hvp(f, {Variable(rnd({0, 3}, 100)), Variable(rnd({3, 2}, 101))},
                            {Variable(zeros({0, 3}, DType::Float64)), Variable(ones({3, 2}, DType::Float64))});
  EXPECT_EQ(h0[0].shape(), (Shape{0, 3}));
  expect_close(h0[1].data(), zeros({3, 2}, DType::Float64), 0, 0);
  EXPECT_TRUE(gradgradcheck([](const V& in) { return softmax(in[0], 1); }, {rnd({0, 3}, 102)}).ok);
  // 0-dim: (e^x sin x)'' = 2 e^x cos x
  const auto [l1, h1] = hvp([](const V& in) { return exp(in[0]) * sin(in[0]); }, {leaf(0.3)}, {leaf(1)});
  EXPECT_NEAR(h1[0].item(), 2 * std::exp(0.3) * std::cos(0.3), 1e-15);
  // an expanded (stride 0) input and weight give the H v of their contiguous copies
  const Tensor xe = rnd({1, 3}, 103).expand({4, 3}), we = rnd({3, 1}, 104).expand({3, 2});
  const V v = {Variable(rnd({4, 3}, 105)), Variable(rnd({3, 2}, 106))};
  const V a = hvp(f, {Variable(xe), Variable(we)}, v).second;
  const V b = hvp(f, {Variable(xe.contiguous()), Variable(we.contiguous())}, v).second;
  expect_close(a[0].data(), b[0].data(), 0, 0);
  expect_close(a[1].data(), b[1].data(), 0, 0);
}

// ---- vjp, jvp, hvp ----

namespace {
// f(x, y) = sum over rows of tanh(x W) * y, a function of two inputs with a (2, 3) output
Variable two_input_fn(const V& in) {
  const Tensor W = rnd({3, 3}, 40);
  return tanh(matmul(in[0], Variable(W))) * in[1];
}
}  // namespace

TEST(HigherOrder, JvpEqualsFiniteDifferencesAndVjpIsItsTranspose) {
  const Tensor x = rnd({2, 3}, 41), y = rnd({2, 3}, 42), u = rnd({2, 3}, 43), w = rnd({2, 3}, 44);
  const Tensor uy = rnd({2, 3}, 45), v = rnd({2, 3}, 46);
  const auto [fx, ju] = jvp(two_input_fn, {Variable(x), Variable(y)}, {Variable(u), Variable(uy)});
  // central differences of f along (u, uy)
  const double h = 1e-6;
  Tensor fp, fm;
  {
    const NoGradGuard ng;
    fp = two_input_fn({Variable(x + u * h), Variable(y + uy * h)}).data();
    fm = two_input_fn({Variable(x - u * h), Variable(y - uy * h)}).data();
  }
  expect_close(ju.data(), (fp - fm) / (2 * h), 1e-8, 1e-7);
  // <v, J u> = <J^T v, u>
  const auto [fx2, jt] = vjp(two_input_fn, {Variable(x), Variable(y)}, Variable(v));
  expect_close(fx2.data(), fx.data(), 0, 0);
  const double lhs = mg::sum(v * ju.data()).item();
  const double rhs = mg::sum(jt[0].data() * u).item() + mg::sum(jt[1].data() * uy).item();
  EXPECT_NEAR(lhs, rhs, 1e-13);
  (void)w;
}

TEST(HigherOrder, HvpOfAQuadraticIsTheSymmetrisedMatrix) {
  // f(x) = x^T A x has Hessian A + A^T: each hvp with a unit vector is one of its columns, exactly
  const Tensor A = rnd({4, 4}, 47), x = rnd({4}, 48);
  auto f = [A](const V& in) { return matmul(in[0], matmul(Variable(A), in[0])); };
  const Tensor H = A + A.transpose(0, 1);
  for (int64_t j = 0; j < 4; ++j) {
    Tensor e = zeros({4}, DType::Float64);
    e.narrow(0, j, 1).fill_(1);
    const auto [fx, hv] = hvp(f, {Variable(x)}, {Variable(e)});
    expect_close(hv[0].data(), H.narrow(1, j, 1).reshape({4}), 1e-15, 0);
  }
}

TEST(HigherOrder, FunctionalErrors) {
  const Variable x(rnd({3}, 49));
  auto f = [](const V& in) { return sum(exp(in[0])); };
  EXPECT_THROW(jvp(f, {x}, {Variable(rnd({2}, 1))}), ShapeError);
  EXPECT_THROW(jvp(f, {x}, {Variable(rnd({3}, 1).to(DType::Float32))}), DTypeError);
  EXPECT_THROW(vjp(VariableFunction(), {x}), ValueError);
  EXPECT_THROW(gradgradcheck(mgtest::Fn(), {rnd({3}, 1)}), ValueError);
  EXPECT_THROW(
      gradgradcheck([](const V& in) { return Variable(in[0].data().to(DType::Float64)); }, {ints({1, 2}, {2})}),
      ValueError);
  try {
    const Variable w = leaf(1);
    grad({Variable(w.data() * 2.0)}, {w});  // an output with no history
    FAIL();
  } catch (const StateError& e) {
    EXPECT_THAT(e.what(), HasSubstr("grad: the output does not require grad"));
  }
  {
    const NoGradGuard ng;  // functional calls record what they need even inside one
    const Variable xr(rnd({3}, 50), true);
    const auto [value, hv] = hvp(f, {xr}, {Variable(ones({3}, DType::Float64))}, /*create_graph=*/true);
    EXPECT_NEAR(hv[0].data().at({1}), std::exp(xr.data().at({1})), 1e-15);
    EXPECT_TRUE(hv[0].requires_grad());  // through the alias of xr, recorded inside the guard
  }
  EXPECT_THROW(hvp(f, {x}, {}), ValueError);
  EXPECT_THROW(hvp([](const V& in) { return exp(in[0]); }, {x}, {Variable(rnd({3}, 2))}), ShapeError);  // not a scalar
  EXPECT_THROW(vjp([](const V&) { return Variable(zeros({1}, DType::Float64)); }, {x}, Variable(), false, true),
               ValueError);  // strict: an output independent of the inputs
  EXPECT_THROW(jvp(f, {Variable(ints({1, 2}, {2}))}, {Variable(rnd({2}, 3))}), DTypeError);
}

TEST(HigherOrder, OutputsThatDoNotDependOnAnInputGiveZerosUnlessStrict) {
  // The gradient of max is a one-hot vector whatever x is (away from ties): as a function of x it is
  // piecewise constant, its output carries no history, and its Jacobian is 0. torch.autograd.functional
  // returns zeros there (strict=False) and raises with strict=True; so do vjp, jvp and hvp.
  const auto grad_of_max = [](const V& in) { return grad({max(in[0])}, {in[0]}, {.create_graph = true})[0]; };
  const Variable x(tensor({0.5f, 2, -1}, {3}).to(DType::Float64)), u(rnd({3}, 7));
  const auto [gx, ju] = jvp(grad_of_max, {x}, {u});
  mgtest::expect_values(gx.data(), {3}, {0, 1, 0});
  mgtest::expect_values(ju.data(), {3}, {0, 0, 0});
  const auto [gx2, vj] = vjp(grad_of_max, {x}, Variable(rnd({3}, 8)));
  mgtest::expect_values(vj[0].data(), {3}, {0, 0, 0});
  const auto [l, hv] = hvp([](const V& in) { return sum(in[0] * 2.0); }, {x}, {u});  // linear: H = 0
  mgtest::expect_values(hv[0].data(), {3}, {0, 0, 0});
  try {
    jvp(grad_of_max, {x}, {u}, false, /*strict=*/true);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("jvp: the function's output does not depend on its inputs"));
  }
  // an input the function does not use: zeros for it, or with strict an error naming it
  const auto first_only = [](const V& in) { return sum(in[0] * in[0]); };
  const Variable y(rnd({2}, 9));
  const auto [v0, g] = vjp(first_only, {x, y});
  mgtest::expect_values(g[1].data(), {2}, {0, 0});
  try {
    vjp(first_only, {x, y}, Variable(), false, true);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("vjp: the output is independent of input 1"));
  }
  try {
    hvp([](const V& in) { return sum(in[0] * 2.0); }, {x}, {u}, false, true);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("hvp: the gradient (so the Hessian's row) is independent of input 0"));
  }
}

// ---- dual numbers ----

TEST(HigherOrder, DualNumbersAgreeWithTheDoubleVjpOnEveryElementwiseOp) {
  // The same generic function three ways: on Duals (one forward pass), through jvp (two backwards),
  // and by central differences.
  const Tensor x = away_from_zero({2, 3}, 50, 0.2), y = rnd({2, 3}, 51, 0.5, 1.5), u = rnd({2, 3}, 52);
  const Tensor mask = gt(rnd({2, 3}, 53), scalar_tensor(0, DType::Float64));
  std::vector<std::pair<std::string, std::function<Dual(const Dual&, const Dual&)>>> dual_fns;
  std::vector<mgtest::Fn> var_fns;
#define BOTH(name, expr)                                          \
  dual_fns.emplace_back(name, [&](const Dual& a, const Dual& b) { \
    (void)a, (void)b;                                             \
    return expr;                                                  \
  });                                                             \
  var_fns.push_back([&](const V& in) {                            \
    const Variable &a = in[0], &b = in[1];                        \
    (void)a, (void)b;                                             \
    return expr;                                                  \
  })
  BOTH("add", a + b);
  BOTH("sub", a - b);
  BOTH("mul", a * b);
  BOTH("div", a / b);
  BOTH("neg", -a);
  BOTH("scalar", (a + 1.5) * 2.0 - b / 4.0);
  BOTH("exp", exp(a));
  BOTH("log", log(b));
  BOTH("sqrt", sqrt(b));
  BOTH("abs", abs(a));
  BOTH("pow", pow(b, 2.5));
  BOTH("tanh", tanh(a));
  BOTH("sigmoid", sigmoid(a));
  BOTH("sin", sin(a));
  BOTH("cos", cos(a));
  BOTH("log1p", log1p(b));
  BOTH("expm1", expm1(a));
  BOTH("clamp", clamp(a, -0.5, 0.5));
  BOTH("relu", relu(a));
  BOTH("gelu", gelu(a));
  BOTH("gelu_tanh", gelu(a, "tanh"));
  BOTH("silu", silu(a));
  BOTH("softplus", softplus(a, 2.0, 1.0));
  BOTH("leaky_relu", leaky_relu(a, 0.1));
  BOTH("elu", elu(a, 0.5));
  BOTH("maximum", maximum(a, b));
  BOTH("minimum", minimum(a, b));
  BOTH("where", where(mask, a, b));
  BOTH("masked_fill", masked_fill(a, mask, 3.0));
  BOTH("sum", sum(a * b, {1}, true));
  BOTH("mean", mean(a * b));
  BOTH("matmul", matmul(a, transpose(b, 0, 1)));
  BOTH("chain", tanh(exp(a) * sin(b)) / (b * b + 1.0));
#undef BOTH
  for (size_t i = 0; i < dual_fns.size(); ++i) {
    SCOPED_TRACE(dual_fns[i].first);
    const Dual d = dual_fns[i].second(make_dual(x, u), make_dual(y, u * 0.5));
    const auto [fx, ju] = jvp(var_fns[i], {Variable(x), Variable(y)}, {Variable(u), Variable(u * 0.5)});
    expect_close(d.primal(), fx.data(), 0, 0);
    expect_close(d.tangent(), ju.data(), 1e-14, 1e-13);
  }
}

TEST(HigherOrder, DualNumbersWithANumberOnTheLeft) {
  const Tensor x = rnd({3}, 54, 0.5, 2), u = rnd({3}, 55);
  auto f = [](const auto& a) { return (1.0 - a) * 2.0 + 3.0 / a + (0.5 + a); };
  const Dual d = f(make_dual(x, u));
  const auto [fx, ju] = jvp([&](const V& in) { return f(in[0]); }, {Variable(x)}, {Variable(u)});
  expect_close(d.primal(), fx.data(), 1e-15, 0);
  expect_close(d.tangent(), ju.data(), 1e-14, 1e-13);
}

TEST(HigherOrder, MakeDualChecksItsArguments) {
  EXPECT_THROW(make_dual(rnd({2}, 1), rnd({3}, 2)), ShapeError);
  EXPECT_THROW(make_dual(rnd({2}, 1), tensor({1, 2}, {2})), DTypeError);  // float64 beside float32
  EXPECT_THROW(make_dual(ints({1, 2}, {2}), ints({1, 2}, {2})), DTypeError);
}
