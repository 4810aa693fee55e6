// nn::Module and the basic layers: named parameters, the module tree, init, PyTorch golden
// values, gradient checks of whole modules.
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

namespace {
struct Net : nn::Callable<Net> {
  nn::Linear fc1{2, 8}, fc2{8, 3};
  nn::Dropout drop{{.p = 0.5}};
  Net() {
    register_module("fc1", fc1);
    register_module("drop", drop);
    register_module("fc2", fc2);
  }
  Variable forward(const Variable& x) const { return fc2(drop(relu(fc1(x)))); }
  std::string type_name() const override { return "Net"; }
};

struct Deep : nn::Callable<Deep> {
  nn::ModuleList blocks;
  Deep() {
    register_module("blocks", blocks);
    for (int i = 0; i < 2; ++i) blocks.emplace_back<nn::MultiheadAttention>(4, 2);
  }
  std::string type_name() const override { return "Deep"; }
};
}  // namespace

TEST(Module, NamedParametersWithDottedPaths) {
  Net net;
  std::vector<std::string> names;
  for (auto& [n, p] : net.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(net.num_parameters(), 8 * 2 + 8 + 3 * 8 + 3);
  EXPECT_EQ(net.children().size(), 3u);
  EXPECT_EQ(net.parameter("fc2.bias").shape(), (Shape{3}));
  EXPECT_THROW(net.parameter("fc3.weight"), ValueError);
  Deep deep;
  EXPECT_EQ(deep.named_parameters()[0].first, "blocks.0.w_q.weight");
  EXPECT_EQ(deep.named_parameters().back().first, "blocks.1.w_o.bias");
  EXPECT_EQ(deep.blocks.at<nn::MultiheadAttention>(1).num_heads, 2);
  EXPECT_THROW(deep.blocks.at<nn::Linear>(0), ValueError);
  EXPECT_THROW(deep.blocks.at<nn::MultiheadAttention>(2), IndexError);
}

TEST(Module, TrainEvalZeroGradApply) {
  Net net;
  EXPECT_TRUE(net.drop.is_training());
  net.eval();
  EXPECT_FALSE(net.drop.is_training());
  Variable x(ones({4, 2}));
  // eval: dropout is the identity, so two passes agree
  EXPECT_EQ(net(x).data().to_vector<float>(), net(x).data().to_vector<float>());
  sum(net(x)).backward();
  EXPECT_TRUE(net.fc1.weight.grad().defined());
  net.zero_grad();
  for (auto& p : net.parameters()) EXPECT_FALSE(p.grad().defined());
  int linears = 0;
  net.apply([&](nn::Module& m) { linears += m.type_name() == "Linear"; });
  EXPECT_EQ(linears, 2);
}

TEST(Module, SummaryShowsTreeShapesAndCounts) {
  Net net;
  const std::string s = net.summary();
  EXPECT_THAT(s, HasSubstr("Net()"));
  EXPECT_THAT(s, HasSubstr("(fc1): Linear(in_features=2, out_features=8, bias=true)"));
  EXPECT_THAT(s, HasSubstr("weight: (8, 2)"));
  EXPECT_THAT(s, HasSubstr("(drop): Dropout(p=0.5)"));
  EXPECT_THAT(s, HasSubstr("Total parameters: 51"));
}

TEST(Module, RegistrationErrors) {
  struct Bad : nn::Module {
    std::string type_name() const override { return "Bad"; }
  } m;
  m.register_parameter("w", zeros({2}));
  EXPECT_THROW(m.register_parameter("w", zeros({2})), ValueError);
  EXPECT_THROW(m.register_parameter("a.b", zeros({2})), ValueError);
  EXPECT_THROW(nn::Linear(0, 3), ValueError);
  EXPECT_THROW(nn::MultiheadAttention(6, 4), ValueError);
}

TEST(Linear, DefaultInitFollowsPyTorch) {
  // weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)): check the range and the variance b^2/3.
  Generator g(1);
  nn::Linear l(400, 300, {}, g);
  const double b = 1 / std::sqrt(400.0);
  EXPECT_LE(max(abs(l.weight.data())).item(), b);
  EXPECT_NEAR(mean(l.weight.data() * l.weight.data()).item(), b * b / 3, b * b * 0.02);
  EXPECT_LE(max(abs(l.bias.data())).item(), b);
  // same seed, same weights
  Generator g2(1);
  nn::Linear l2(400, 300, {}, g2);
  EXPECT_EQ(l.weight.data().to_vector<float>(), l2.weight.data().to_vector<float>());
}

TEST(Linear, GoldenAndGradcheck) {
  const auto& c = mgtest::golden("module_linear");
  nn::Linear l(4, 3);
  l.to(DType::Float64);
  mgtest::load_golden_params(l, c);
  Variable x(c.at("in0"), true);
  Variable y = l(x);
  expect_close(y.data(), c.at("out"), 1e-10, 1e-10);
  sum(y * Variable(c.at("gout"))).backward();
  expect_close(x.grad(), c.at("grad0"), 1e-10, 1e-10);
  mgtest::expect_param_grads(l, c, 1e-10);
  // gradcheck through the module, with respect to its parameters and input
  expect_gradcheck([&](const V& v) { return linear(v[0], v[1], v[2]); },
                   {rnd({2, 4}, 1), l.weight.data(), l.bias.data()});
}

TEST(Embedding, IsALinearLayerOnOneHotRows) {
  Generator g(3);
  nn::Embedding emb(6, 4, {}, g);
  Tensor ids = from_vector<int64_t>({2, 5, 2, 0}, {2, 2});
  Variable a = emb(ids);         // (2, 2, 4)
  Variable oh(one_hot(ids, 6));  // (2, 2, 6)
  Variable b = matmul(oh, emb.weight);
  expect_close(a.data(), b.data(), 0, 0);  // exactly the same numbers
  // and the same gradient: both backward passes give W the same update
  Tensor gout = randn({2, 2, 4}, g);
  sum(a * Variable(gout)).backward();
  const Tensor ga = emb.weight.grad().clone();
  emb.zero_grad();
  sum(b * Variable(gout)).backward();
  expect_close(ga, emb.weight.grad(), 1e-6, 0);
  // rows that no id used get no gradient; row 2 (used twice) gets the sum
  expect_values(ga.narrow(0, 3, 1), {1, 4}, {0, 0, 0, 0});
}

TEST(Embedding, Golden) {
  const auto& c = mgtest::golden("module_embedding");
  nn::Embedding emb(7, 4);
  emb.to(DType::Float64);
  mgtest::load_golden_params(emb, c);
  Variable y = emb(c.at("in0"));
  expect_close(y.data(), c.at("out"), 1e-12, 0);
  sum(y * Variable(c.at("gout"))).backward();
  mgtest::expect_param_grads(emb, c, 1e-10);
  EXPECT_THROW(emb(from_vector<int64_t>({7}, {1})), IndexError);
}

TEST(LayerNorm, GoldenAndGradcheck) {
  const auto& c = mgtest::golden("module_layer_norm");
  nn::LayerNorm ln({6});
  EXPECT_EQ(ln.weight.data().to_vector<float>(), std::vector<float>(6, 1.0f));  // PyTorch's init
  ln.to(DType::Float64);
  mgtest::load_golden_params(ln, c);
  Variable x(c.at("in0"), true);
  Variable y = ln(x);
  expect_close(y.data(), c.at("out"), 1e-10, 1e-10);
  sum(y * Variable(c.at("gout"))).backward();
  expect_close(x.grad(), c.at("grad0"), 1e-9, 1e-9);
  mgtest::expect_param_grads(ln, c, 1e-9);
}

TEST(Sequential, RunsInOrderAndNamesChildren) {
  nn::Sequential s;
  s.emplace_back<nn::Linear>(3, 5);
  s.emplace_back<nn::GELU>();
  s.emplace_back<nn::Linear>(5, 2);
  EXPECT_EQ(s.named_parameters()[2].first, "2.weight");
  Variable x(rnd({4, 3}, 2).to(DType::Float32));
  Variable expect = linear(gelu(linear(x, s.parameter("0.weight"), s.parameter("0.bias"))), s.parameter("2.weight"),
                           s.parameter("2.bias"));
  expect_close(s(x).data(), expect.data(), 0, 0);
}

TEST(Module, GradcheckOfAWholeModelThroughItsParameters) {
  Net net;
  net.eval();
  net.to(DType::Float64);
  Variable x(rnd({3, 2}, 5));
  std::vector<Variable> leaves = net.parameters();
  GradcheckResult r = gradcheck([&] { return net(x); }, leaves);
  EXPECT_TRUE(r.ok) << r.message;
  // float32 parameters are refused with a hint
  Net net32;
  EXPECT_THROW(gradcheck([&] { return net32(Variable(ones({1, 2}))); }, net32.parameters()), DTypeError);
}

TEST(Module, TheTreeHasNoCyclesAndSharedModulesCountOnce) {
  struct Holder : nn::Callable<Holder> {
    std::string type_name() const override { return "Holder"; }
    void add(const std::string& n, nn::Module& m) { register_module(n, m); }
  };
  Holder a, b;
  EXPECT_THROW(a.add("me", a), ValueError);  // once endless recursion in named_parameters
  a.add("b", b);
  EXPECT_THROW(b.add("a", a), ValueError);  // a cycle through a child
  // the same Linear registered twice: its parameters are listed once, so an optimizer takes them
  Holder h;
  nn::Linear shared(2, 2);
  h.add("first", shared);
  h.add("second", shared);
  EXPECT_EQ(h.parameters().size(), 2u);
  EXPECT_EQ(h.named_parameters()[0].first, "first.weight");
  EXPECT_NO_THROW(optim::AdamW(h.parameters()));  // once "appears in groups 0 and 0"
  EXPECT_EQ(h.num_parameters(), 6);
  EXPECT_EQ(h.named_modules().size(), 2u);
}

TEST(Module, NamesAreUniqueAcrossParametersBuffersAndModules) {
  struct M : nn::Callable<M> {
    std::string type_name() const override { return "M"; }
    using Module::register_buffer;
    using Module::register_parameter;
  } m;
  m.register_parameter("w", zeros({2}));
  try {
    m.register_buffer("w", zeros({2}));
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("register_buffer: \"w\" is already a parameter of M"));
  }
  m.register_buffer("running", zeros({2}));
  EXPECT_THROW(m.register_buffer("running", zeros({2})), ValueError);
  EXPECT_THROW(m.register_buffer("empty", Tensor()), StateError);
}

TEST(AttentionCapture, CapturesAreHooksAndTheModelMayGoFirst) {
  nn::MultiheadAttention mha(4, 2);
  {
    inspect::AttentionCapture first(mha);
    {
      inspect::AttentionCapture second(mha);  // two captures are two hooks: both see the forward
      mha(Variable(ones({1, 3, 4})));
      EXPECT_EQ(second.at("").weights.shape(), (Shape{1, 2, 3, 3}));
    }
    EXPECT_EQ(first.at("").weights.shape(), (Shape{1, 2, 3, 3}));
    EXPECT_TRUE(mha.has_forward_hooks());  // the second one's removal left the first's hook
    first.clear();
    mha(Variable(ones({1, 4, 4})));
    EXPECT_EQ(first.at("").weights.shape(), (Shape{1, 2, 4, 4}));
  }
  EXPECT_FALSE(mha.has_forward_hooks());
  // a capture that outlives its model: its destructor once wrote into the freed module
  auto model = std::make_unique<nn::MultiheadAttention>(4, 2);
  auto capture = std::make_unique<inspect::AttentionCapture>(*model);
  model.reset();
  EXPECT_NO_THROW(capture.reset());
}
