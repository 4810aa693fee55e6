// inspect::BackwardRecorder's mechanics on small graphs: broadcasting undone and hooks, every
// layout (offset, transposed, stride 0, zero-size, summarised), typed errors for bad use, nested
// walks and a bound reached inside one, the rules compiled in from docs/03, and the page's data.
// The recordings of examples/backward_walk are checked in test_backward_walk.cpp.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backward_helpers.h"
#include "helpers.h"
#include "minigrad/inspect/backward_recorder.h"
#include "minigrad/viz/backward_page.h"

using namespace mg;
using inspect::BackwardRecorder;
using inspect::StepRecord;
using mgtest::max_abs_diff;
using namespace backward_tests;

TEST(BackwardRecorder, BroadcastUndoneAndHooksAreShown) {
  const Variable a(from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}), true);
  const Variable bias(from_vector<double>({0.5, -1, 2}, {3}), true);
  BackwardRecorder rec({.names = {{"a", a}, {"bias", bias}}});
  Variable y = a + bias;  // bias broadcast over 2 rows
  y.register_hook([](const Tensor& g) { return g * 2.0; });
  const Variable loss = sum(y * y);
  loss.backward();
  rec.detach();
  const inspect::WalkRecord& w = rec.walks().at(0);
  const StepRecord& add = step_at(w, rec.id_of(y));
  EXPECT_EQ(add.hooks, 1);
  ASSERT_TRUE(add.after_hooks);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(add.after_hooks->values[i], 2 * add.arrived.values[i]);
  const inspect::SendRecord* to_bias = nullptr;
  for (const inspect::SendRecord& s : add.sends)
    if (s.to == rec.id_of(bias)) to_bias = &s;
  ASSERT_TRUE(to_bias);
  EXPECT_TRUE(to_bias->broadcast_undone);
  EXPECT_EQ(to_bias->returned.shape, (Shape{2, 3}));
  EXPECT_EQ(to_bias->fitted.shape, (Shape{3}));
  for (size_t j = 0; j < 3; ++j)
    EXPECT_EQ(to_bias->fitted.values[j], to_bias->returned.values[j] + to_bias->returned.values[3 + j]);
  expect_same_bits(*step_at(w, rec.id_of(bias)).leaf_grad, bias.grad(), "bias.grad");
}

TEST(BackwardRecorder, AnyLayoutIsRecordedAsItsValuesAndViewsAreNotPerturbed) {
  // a transposed, offset and stride-0 input, a zero-size branch, and a large tensor summarised
  const Tensor base = arange(0, 24, 1, DType::Float64).reshape({4, 6}) * 0.25;
  const Variable w(base, true);
  const Variable c(from_vector<double>({1.5, -2.0, 0.5, 3.0}, {4, 1}), true);
  const Variable big(full({40, 50}, 0.01, DType::Float64), true);
  const Variable empty(zeros({0, 3}, DType::Float64), true);
  const Variable strided(arange(0, 6, 1, DType::Float64).reshape({2, 3}).transpose(0, 1) * 0.5, true);  // (3, 2)
  BackwardRecorder rec({.full_values = 64, .heatmap_size = 8, .top_entries = 3});
  auto loss_fn = [&] {
    const Variable t = transpose(narrow(w, 1, 1, 4), 0, 1);  // (4, 4): an offset, transposed view
    const Variable e = expand(c, {4, 4});                    // stride 0
    return sum(t * e) + sum(big * big) + sum(empty) +
           sum(tanh(strided) * Variable(from_vector<double>({1, -2, 3, -4, 5, -6}, {3, 2})));
  };
  const Variable loss = loss_fn();
  loss.backward();
  rec.detach();
  rec.check_with_finite_differences(loss_fn);
  for (const inspect::NodeRecord& n : rec.nodes()) {
    if (n.op == "transpose" || n.op == "expand" || n.op == "slice") EXPECT_TRUE(n.view) << n.op;
    if (n.op == "transpose") {  // its output's values, as a contiguous copy reads them
      expect_same_bits(*n.value, base.narrow(1, 1, 4).transpose(0, 1), "transpose's output");
    }
  }
  const inspect::WalkRecord& wr = rec.walks().at(0);
  const StepRecord& big_leaf = step_at(wr, rec.id_of(big));
  EXPECT_FALSE(big_leaf.arrived.full);  // 2000 entries > 64: summarised
  EXPECT_EQ(big_leaf.arrived.heat_rows, 8);
  EXPECT_EQ(big_leaf.arrived.heat_cols, 8);
  EXPECT_EQ(big_leaf.arrived.top.size(), 3u);
  EXPECT_NEAR(big_leaf.arrived.norm, 0.02 * std::sqrt(2000.0), 1e-12);
  EXPECT_NEAR(big_leaf.arrived.heatmap[0], 0.02, 1e-15);
  const StepRecord& empty_leaf = step_at(wr, rec.id_of(empty));
  EXPECT_EQ(empty_leaf.arrived.shape, (Shape{0, 3}));
  EXPECT_TRUE(empty_leaf.arrived.full && empty_leaf.arrived.values.empty());
  EXPECT_FALSE(empty_leaf.fd);  // no entry to move
  for (const StepRecord& s : wr.steps) {
    const inspect::NodeRecord& n = rec.nodes()[static_cast<size_t>(s.node)];
    if (n.view) EXPECT_FALSE(s.fd) << n.op;
    if (s.fd) EXPECT_NEAR(s.fd->engine, s.fd->numeric, 1e-7) << n.op << " " << n.label;
  }
  const StepRecord& strided_leaf = step_at(wr, rec.id_of(strided));
  ASSERT_TRUE(strided_leaf.fd);  // moved through its strides, and put back
  EXPECT_NEAR(strided_leaf.fd->engine, strided_leaf.fd->numeric, 1e-8);
  // w's gradient through the offset transposed view and the broadcast: c's entries in columns 1..4
  const StepRecord& w_leaf = step_at(wr, rec.id_of(w));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_EQ(w_leaf.arrived.values[static_cast<size_t>(i * 6 + j)],
                j >= 1 && j <= 4 ? c.data().at({j - 1, 0}) : 0.0);
}

TEST(BackwardRecorder, BadUseGetsTypedErrors) {
  const Variable x(from_vector<double>({0.1, 0.2, 0.3}, {3}), true);
  {  // past the node bound: the op that would exceed it throws, naming the bound
    BackwardRecorder rec({.max_nodes = 3});
    Variable y = x;
    MG_EXPECT_THROW_MSG(
        {
          for (int i = 0; i < 5; ++i) y = tanh(y);
        },
        ValueError, "max_nodes");
  }
  EXPECT_EQ(graph_observer(), nullptr);
  {  // past the numbers bound
    BackwardRecorder rec({.max_numbers = 10});
    MG_EXPECT_THROW_MSG(tanh(Variable(zeros({4, 4}, DType::Float64), true)), ValueError, "max_numbers");
  }
  {  // two recorders on one thread
    BackwardRecorder rec;
    MG_EXPECT_THROW_MSG(BackwardRecorder{}, StateError, "already attached");
  }
  EXPECT_EQ(graph_observer(), nullptr);
  {  // a node whose rule throws: the error reaches the caller, the walk is marked unfinished
    struct Broken : Function {
      std::string name() const override { return "broken"; }
      Tensor forward(FunctionCtx&, const std::vector<Tensor>& in) override { return in[0] * 2.0; }
      std::vector<Tensor> backward(FunctionCtx&, const Tensor&) override {
        throw ValueError("broken: this rule always fails");
      }
    };
    BackwardRecorder rec;
    const Variable loss = sum(apply_function<Broken>({tanh(x)}));
    MG_EXPECT_THROW_MSG(loss.backward(), ValueError, "always fails");
    rec.detach();
    ASSERT_EQ(rec.walks().size(), 1u);
    EXPECT_FALSE(rec.walks()[0].completed);
  }
  {  // a freed graph: the second backward is the engine's StateError, recorded as unfinished
    BackwardRecorder rec;
    const Variable loss = sum(tanh(x) * 3.0);
    loss.backward();
    MG_EXPECT_THROW_MSG(loss.backward(), StateError, "second time");
    rec.detach();
    ASSERT_EQ(rec.walks().size(), 2u);
    EXPECT_TRUE(rec.walks()[0].completed);
    EXPECT_FALSE(rec.walks()[1].completed);
    // finite differences: a loss function that is not the recorded forward, and a float32 one
    MG_EXPECT_THROW_MSG(rec.check_with_finite_differences([&] { return sum(tanh(x) * 4.0); }), ValueError,
                        "same forward");
    MG_EXPECT_THROW_MSG(rec.check_with_finite_differences([&] { return sum(x * 3.0); }), ValueError, "same forward");
    MG_EXPECT_THROW_MSG(rec.check_with_finite_differences([&] { return sum(tanh(x) * 3.0); }, -1.0), ValueError, "eps");
    MG_EXPECT_THROW_MSG(rec.check_with_finite_differences([&] { return sum(tanh(x) * 3.0); }, 1e-6, 5), ValueError,
                        "walk 5");
  }
  {
    BackwardRecorder rec;
    MG_EXPECT_THROW_MSG(rec.check_with_finite_differences([&] { return sum(x); }), StateError, "detach");
  }
  {  // float32 forward
    const Variable x32(from_vector<float>({0.1f, 0.2f}, {2}), true);
    BackwardRecorder rec;
    const Variable loss = sum(tanh(x32));
    loss.backward();
    rec.detach();
    MG_EXPECT_THROW_MSG(rec.check_with_finite_differences([&] { return sum(tanh(x32)); }), ValueError, "float64");
  }
  {
    BackwardRecorder rec;
    MG_EXPECT_THROW_MSG(rec.id_of(x), ValueError, "not recorded");
  }
  MG_EXPECT_THROW_MSG(BackwardRecorder({.heatmap_size = 0}), ValueError, "heatmap_size");
  MG_EXPECT_THROW_MSG(viz::backward_html("t", "{\"format\": \"minigrad-telemetry-1\"}"), ValueError,
                      "minigrad-backward-1");
  EXPECT_EQ(graph_observer(), nullptr);
}

TEST(BackwardRecorder, NestedWalksAndABoundInsideAWalkLeaveTheEngineAsItWas) {
  const Variable x(from_vector<double>({0.5, -0.25}, {2}), true), z(from_vector<double>({1.0, 2.0}, {2}), true);
  {  // a hook that runs a backward of its own: two walks, the inner one inside the outer
    BackwardRecorder rec;
    Variable y = tanh(x) * 2.0;
    y.register_hook([&](const Tensor&) {
      sum(tanh(z)).backward();
      return Tensor();
    });
    sum(y).backward();
    rec.detach();
    ASSERT_EQ(rec.walks().size(), 2u);
    EXPECT_TRUE(rec.walks()[0].completed && rec.walks()[1].completed);
    EXPECT_EQ(rec.walks()[0].steps.size(), 4u);  // sum, mul, tanh, x's leaf
    EXPECT_EQ(rec.walks()[1].steps.size(), 3u);  // sum, tanh, z's leaf
    expect_same_bits(*step_at(rec.walks()[0], rec.id_of(x)).leaf_grad, x.grad(), "x.grad");
    expect_same_bits(*step_at(rec.walks()[1], rec.id_of(z)).leaf_grad, z.grad(), "z.grad");
  }
  {  // past max_nodes inside a walk: the walk runs to its end unrecorded; json() says why
    x.zero_grad();
    BackwardRecorder rec({.max_nodes = 4});
    const Variable loss = sum(tanh(tanh(tanh(x))));  // 4 ops: within the bound
    loss.backward();                                 // 4 ops and a leaf: one node past it
    rec.detach();
    const Tensor want =
        (1 - tanh(tanh(tanh(x.data()))).pow(2)) * (1 - tanh(tanh(x.data())).pow(2)) * (1 - tanh(x.data()).pow(2));
    EXPECT_LE(max_abs_diff(x.grad(), want), 1e-15);  // the engine finished the walk
    EXPECT_FALSE(rec.walks().at(0).completed);
    MG_EXPECT_THROW_MSG(rec.json(), ValueError, "max_nodes");
    MG_EXPECT_THROW_MSG(rec.check_with_finite_differences([&] { return sum(tanh(tanh(tanh(x)))); }), ValueError,
                        "cut short");
  }
  EXPECT_EQ(graph_observer(), nullptr);
}

TEST(BackwardRecorder, EveryOpInDocs03HasItsRuleCompiledIn) {
  const std::vector<std::string> ops = inspect::ops_with_rules();
  EXPECT_GE(ops.size(), 100u);
  for (const std::string& op : ops) {
    const auto [rule, where] = inspect::derivative_rule(op);
    EXPECT_FALSE(rule.empty()) << op << ": no comment above " << where;
    EXPECT_EQ(where.rfind("autograd/ops/", 0), 0u) << op;
  }
  EXPECT_EQ(inspect::derivative_rule("tanh").first, "y = tanh x           dx = dy * (1 - y^2)");
  EXPECT_EQ(inspect::derivative_rule("no_such_op").first, "");
}

TEST(BackwardPage, PageHoldsTheRecordingAndItsScript) {
  const Variable x(from_vector<double>({1.0, 2.0}, {2}), true);
  BackwardRecorder rec({.names = {{"</script><!-- x", x}}});
  sum(tanh(x)).backward();
  rec.detach();
  const std::string json = rec.json();
  ASSERT_NE(json.find("</script><!-- x"), std::string::npos);
  const std::string html = viz::backward_html("a <neuron>", json);
  EXPECT_NE(html.find("<title>a &lt;neuron&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("minigrad-backward-1"), std::string::npos);
  EXPECT_NE(html.find("id=\"selftest\""), std::string::npos);
  // the label's "</script" does not end the data early: every '<' of the JSON is written \u003c
  const size_t data = html.find("id=\"data\">");
  const size_t end = html.find("</script>", data);
  EXPECT_EQ(html.substr(data, end - data).find('<'), std::string::npos);
  EXPECT_NE(html.substr(data, end - data).find("\\u003c/script>\\u003c!-- x"), std::string::npos);
}
