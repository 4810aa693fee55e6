// inspect::BackwardRecorder (the backward pass recorded node by node) and the page that steps
// through it (viz/backward_page.h): the recorded numbers are the engine's own, bit for bit; each
// node's contributions add up to what it received; finite differences agree; the recordings of
// examples/backward_walk show what their README says; bad calls get typed errors; and a walk with
// no recorder attached computes the same bits.
#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "examples/backward_walk/recordings.h"
#include "helpers.h"
#include "minigrad/viz/backward_page.h"

using namespace mg;
using inspect::BackwardRecorder;
using inspect::StepRecord;
using mgtest::max_abs_diff;

// The statement throws E with `text` in its message.
#define MG_EXPECT_THROW_MSG(statement, E, text) \
  EXPECT_THAT([&] { statement; }, testing::ThrowsMessage<E>(testing::HasSubstr(text)))

namespace {
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

// Every entry of a fully kept record against a tensor, bit for bit.
void expect_same_bits(const inspect::TensorRecord& r, const Tensor& t, const std::string& what) {
  ASSERT_TRUE(r.full) << what;
  ASSERT_EQ(r.shape, t.shape()) << what;
  const Tensor c = t.to(DType::Float64).contiguous();
  for (int64_t i = 0; i < c.numel(); ++i)
    EXPECT_TRUE(same_bits(r.values[static_cast<size_t>(i)], c.data<double>()[i]))
        << what << " entry " << i << ": " << r.values[static_cast<size_t>(i)] << " vs " << c.data<double>()[i];
}

const StepRecord& step_at(const inspect::WalkRecord& w, int64_t node) {
  for (const StepRecord& s : w.steps)
    if (s.node == node) return s;
  throw std::runtime_error("no step for node " + std::to_string(node));
}

// Each node's contributions, added in the order they were sent (the engine's order), give the
// bits of what it received.
void expect_contributions_add_up(const inspect::WalkRecord& w) {
  std::map<int64_t, std::vector<const inspect::TensorRecord*>> parts;
  for (const StepRecord& s : w.steps) {
    std::vector<const inspect::TensorRecord*> in = parts[s.node];
    if (s.seed) in.insert(in.begin(), &*s.seed);
    ASSERT_FALSE(in.empty()) << "node " << s.node << " ran with nothing sent to it";
    if (s.arrived.full)
      for (size_t i = 0; i < s.arrived.values.size(); ++i) {
        double sum = in[0]->values[i];
        for (size_t k = 1; k < in.size(); ++k) sum += in[k]->values[i];
        EXPECT_TRUE(same_bits(sum, s.arrived.values[i])) << "node " << s.node << " entry " << i;
      }
    for (const inspect::SendRecord& r : s.sends) parts[r.to].push_back(&r.fitted);
  }
}
}  // namespace

TEST(BackwardRecorder, MicrogradsNeuronHasTheLecturesGradients) {
  const backward_walk::Recording r = backward_walk::neuron();
  // o = tanh(n) = 0.7071; do/dn = 1 - o^2 = 0.5; the lecture's x1 -1.5, w1 1, x2 0.5, w2 0, b 0.5
  const std::map<std::string, double> want = {{"x1", -1.5}, {"w1", 1.0}, {"x2", 0.5}, {"w2", 0.0}, {"b", 0.5}};
  ASSERT_EQ(r.grads.size(), want.size());
  for (const auto& [name, g] : r.grads) EXPECT_NEAR(g.item(), want.at(name), 1e-12) << name;
  EXPECT_NEAR(r.loss, std::sqrt(0.5), 1e-12);
  ASSERT_EQ(r.walks.size(), 1u);
  const inspect::WalkRecord& w = r.walks[0];
  EXPECT_TRUE(w.completed);
  // tanh first (the root, seeded with 1), then the two adds and two muls, and the five leaves
  ASSERT_EQ(w.steps.size(), 10u);
  EXPECT_EQ(r.nodes[static_cast<size_t>(w.steps[0].node)].op, "tanh");
  ASSERT_TRUE(w.steps[0].seed);
  EXPECT_EQ(w.steps[0].seed->values, std::vector<double>{1.0});
  EXPECT_EQ(r.nodes[static_cast<size_t>(w.steps[0].node)].label, "");  // labels are read when json() runs
  // the engine's order: a node runs only after every node that used its output has sent to it
  std::set<int64_t> ran;
  for (const StepRecord& s : w.steps) {
    for (const inspect::SendRecord& send : s.sends)
      EXPECT_FALSE(ran.count(send.to)) << "sent to a node that already ran";
    ran.insert(s.node);
  }
  expect_contributions_add_up(w);
  // every op and leaf checked by finite differences, all agreeing
  int checked = 0;
  for (const StepRecord& s : w.steps)
    if (s.fd) {
      ++checked;
      EXPECT_NEAR(s.fd->engine, s.fd->numeric, 1e-8) << r.nodes[static_cast<size_t>(s.node)].op;
    }
  EXPECT_EQ(checked, 10);
  // the JSON carries the labels set after the ops ran, and the lecture's names
  const nlohmann::json j = nlohmann::json::parse(r.json);
  std::set<std::string> labels;
  for (const auto& n : j["nodes"]) labels.insert(n["label"].get<std::string>());
  for (const char* l : {"o", "n", "x1*w1", "x2*w2", "x1*w1 + x2*w2", "x1", "x2", "w1", "w2", "b"})
    EXPECT_TRUE(labels.count(l)) << l;
}

TEST(BackwardRecorder, RecordedGradientsAreTheEnginesBits) {
  // hand_attention's head, recorded, against the same head run again with retain_grad on each
  // named intermediate: what arrived at each node is the gradient of its output, bit for bit
  const backward_walk::HeadSetup s = backward_walk::head_setup();
  BackwardRecorder rec({.names = s.head->named_parameters()});
  const Variable L = backward_walk::head_loss(s);
  L.backward();
  rec.detach();

  s.head->zero_grad();
  std::map<std::string, Variable> kept;
  const Variable x(s.X);
  Variable Q = s.head->w_q(x), K = s.head->w_k(x);
  Variable S = matmul(Q, transpose(K, 1, 2)) / std::sqrt(2.0);
  Variable P = softmax(S, -1), logP = log(P);
  for (auto& [name, v] : std::map<std::string, Variable*>{{"Q", &Q}, {"K", &K}, {"S", &S}, {"P", &P}, {"log P", &logP}})
    v->retain_grad(), kept[name] = *v;
  const Variable L2 = -sum(logP * Variable(s.onehot_b)) / 4.0;
  L2.backward();
  ASSERT_TRUE(same_bits(L.item(), L2.item()));

  const inspect::WalkRecord& w = rec.walks().at(0);
  const nlohmann::json j = nlohmann::json::parse(rec.json());
  size_t compared = 0;
  for (const auto& n : j["nodes"]) {
    const std::string label = n["label"];
    const int64_t id = n["id"];
    if (kept.count(label)) expect_same_bits(step_at(w, id).arrived, kept[label].grad(), label), ++compared;
  }
  EXPECT_EQ(compared, kept.size());  // every named intermediate was found by its label
  for (const auto& [name, p] : s.head->named_parameters()) {
    const StepRecord& leaf = step_at(w, rec.id_of(p));
    ASSERT_TRUE(leaf.leaf_grad) << name;
    expect_same_bits(*leaf.leaf_grad, p.grad(), name);
  }
  expect_contributions_add_up(w);
  // the JSON holds the same bits (17 significant digits)
  for (const auto& st : j["walks"][0]["steps"]) {
    const StepRecord& rs = step_at(w, st["node"].get<int64_t>());
    for (size_t i = 0; i < rs.arrived.values.size(); ++i)
      EXPECT_TRUE(same_bits(st["arrived"]["values"][i].get<double>(), rs.arrived.values[i]));
  }
}

TEST(BackwardRecorder, HandAttentionsHeadShowsDocs05sNumbersAtTheirNodes) {
  // docs/05-attention.md's lines hold at every seed; its printed numbers are seed 0's
  for (const uint64_t seed : {0, 1, 2}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const backward_walk::Recording r = backward_walk::attention_head(seed);
    // dL/dW_Q by hand (hand_attention's trace_backward, docs/05-attention.md's table) is the
    // transpose of w_q.weight's gradient in the recording
    const hand_attention::BackwardTrace t = hand_attention::trace_backward({.seed = seed});
    Tensor dWQ;
    for (const auto& [name, g] : r.grads)
      if (name == "w_q.weight") dWQ = g.transpose(0, 1);
    ASSERT_TRUE(dWQ.defined());
    EXPECT_LE(max_abs_diff(dWQ, t.by_hand), 1e-14) << dWQ << t.by_hand;
    if (seed == 0) EXPECT_NEAR(dWQ.at({0, 0}), 0.25876628, 5e-9);  // the number docs/05 prints
    // docs/05's lines at their nodes: dP = -(1/T) onehot_b / P arrives at log's input, dS at softmax's
    const inspect::WalkRecord& w = r.walks.at(0);
    const inspect::NodeRecord *log_node = nullptr, *softmax_node = nullptr;
    for (const inspect::NodeRecord& n : r.nodes) {
      if (n.op == "log") log_node = &n;
      if (n.op == "softmax") softmax_node = &n;
    }
    ASSERT_TRUE(log_node && softmax_node);
    const std::vector<double>& P = softmax_node->value->values;  // (1, 4, 4)
    const StepRecord& at_log = step_at(w, log_node->id);
    ASSERT_EQ(at_log.sends.size(), 1u);
    const std::vector<double>& dP = at_log.sends[0].fitted.values;
    const StepRecord& at_softmax = step_at(w, softmax_node->id);
    const std::vector<double>& dS = at_softmax.sends.at(0).fitted.values;
    for (int i = 0; i < 4; ++i) {
      double row = 0;
      for (int j = 0; j < 4; ++j) row += dP[i * 4 + j] * P[i * 4 + j];
      for (int j = 0; j < 4; ++j) {
        EXPECT_NEAR(dP[i * 4 + j], j == 2 ? -0.25 / P[i * 4 + 2] : 0.0, 1e-15);
        EXPECT_NEAR(dS[i * 4 + j], P[i * 4 + j] * (dP[i * 4 + j] - row), 1e-15);
        EXPECT_NEAR(dS[i * 4 + j], (P[i * 4 + j] - (j == 2)) / 4, 1e-15);  // docs/05: dS = (P - onehot_b) / T
      }
    }
    EXPECT_FALSE(softmax_node->rule.empty());
    EXPECT_NE(softmax_node->rule.find("dx = y * (dy - sum(dy * y, dim))"), std::string::npos) << softmax_node->rule;
    EXPECT_EQ(softmax_node->where, "autograd/ops/nn_functional.cpp:softmax");
    // every node the forward made was checked by finite differences, except the views
    int checked = 0, views = 0;
    for (const StepRecord& s : w.steps) {
      const inspect::NodeRecord& n = r.nodes[static_cast<size_t>(s.node)];
      if (n.view) {
        ++views;
        EXPECT_FALSE(s.fd) << n.op;
        continue;
      }
      ASSERT_TRUE(s.fd) << n.op;
      ++checked;
      EXPECT_NEAR(s.fd->engine, s.fd->numeric, 1e-7 * std::max(1.0, std::abs(s.fd->engine))) << n.op;
    }
    EXPECT_EQ(views, 1);  // transpose(K)
    EXPECT_GE(checked, 10);
  }
}

TEST(BackwardRecorder, GptBlockShowsTheResidualPathsTheMaskAndTheTiedEmbedding) {
  // what examples/backward_walk/README.md says of recording 3, at three seeds
  for (const uint64_t seed : {0, 1, 2}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const backward_walk::Recording r = backward_walk::gpt_block(seed);
    const inspect::WalkRecord& w = r.walks.at(0);
    std::map<int64_t, int> sent_to;
    for (const StepRecord& s : w.steps)
      for (const inspect::SendRecord& send : s.sends) ++sent_to[send.to];
    // tied embeddings: tok.weight receives two contributions (the embedding lookup and the head)
    const inspect::NodeRecord* tok = nullptr;
    for (const inspect::NodeRecord& n : r.nodes)
      if (n.op == "leaf" && n.label == "tok.weight") tok = &n;
    ASSERT_TRUE(tok);
    EXPECT_EQ(sent_to[tok->id], 2);
    // the residual stream: each block input (the embeddings' sum, and x + attention) is read by the
    // layer norm and by the residual add, so two contributions meet there
    int residual_meets = 0;
    for (const StepRecord& s : w.steps) {
      const inspect::NodeRecord& n = r.nodes[static_cast<size_t>(s.node)];
      if (n.op == "add" && n.out_shape == Shape{1, 6, 16} && sent_to[s.node] == 2) ++residual_meets;
    }
    EXPECT_GE(residual_meets, 2);
    // the causal mask: the masked scores get gradient 0 from the softmax, exactly
    int masked_checked = 0;
    for (const StepRecord& s : w.steps) {
      const inspect::NodeRecord& n = r.nodes[static_cast<size_t>(s.node)];
      if (n.op != "softmax") continue;
      const inspect::TensorRecord& in = r.nodes[static_cast<size_t>(n.inputs.at(0).from)].value.value();
      const inspect::TensorRecord& dS = s.sends.at(0).fitted;
      ASSERT_TRUE(in.full && dS.full);
      for (size_t i = 0; i < dS.values.size(); ++i)
        if (std::isinf(in.values[i])) {
          EXPECT_EQ(dS.values[i], 0.0);
          ++masked_checked;
        }
    }
    EXPECT_EQ(masked_checked, 2 * 15);  // 2 heads x the 15 entries above the diagonal of a 6 x 6 map
    // layer norm's rule has its three terms
    int layer_norms = 0;
    for (const inspect::NodeRecord& n : r.nodes)
      if (n.op == "layer_norm") {
        EXPECT_NE(n.rule.find("g - mean(g) - xhat * mean(g * xhat)"), std::string::npos);
        ++layer_norms;
      }
    EXPECT_EQ(layer_norms, 3);  // ln_1, ln_2 and ln_f
    // finite differences agree wherever they ran
    int checked = 0;
    for (const StepRecord& s : w.steps)
      if (s.fd) {
        ++checked;
        EXPECT_NEAR(s.fd->engine, s.fd->numeric, 1e-6 * std::max(1.0, std::abs(s.fd->engine)))
            << r.nodes[static_cast<size_t>(s.node)].op;
      }
    EXPECT_GE(checked, 20);
    expect_contributions_add_up(w);
  }
}

TEST(BackwardRecorder, SecondDerivativeRecordsBothWalks) {
  const backward_walk::Recording r = backward_walk::second_derivative();
  ASSERT_EQ(r.walks.size(), 2u);
  EXPECT_TRUE(r.walks[0].create_graph);
  EXPECT_FALSE(r.walks[1].create_graph);
  EXPECT_TRUE(r.walks[0].completed && r.walks[1].completed);
  // w.grad after walk 2 is column 0 of the Hessian: compare with second_order's hessian_by_columns
  const second_order::LogReg d = second_order::make_logreg();
  const Tensor w0 = tensor({0.5, -0.25, 0.1}, {3, 1}).to(DType::Float64);
  const Tensor H = second_order::hessian_by_columns(
      [&](const VariableList& p) { return second_order::logreg_loss(p[0], d); }, {Variable(w0, true)});
  ASSERT_EQ(r.grads.size(), 1u);
  EXPECT_LE(max_abs_diff(r.grads[0].second.reshape({3}), H.narrow(1, 0, 1).reshape({3})), 1e-14);
  // walk 2 runs through nodes walk 1 recorded
  int backward_ops = 0;
  for (const StepRecord& s : r.walks[1].steps)
    backward_ops += r.nodes[static_cast<size_t>(s.node)].forward_index >
                    r.nodes[static_cast<size_t>(r.walks[0].steps[0].node)].forward_index;
  EXPECT_GE(backward_ops, 3);
  // finite differences on both walks: walk 2's moves entries of walk 1's recorded ops, and of w
  for (const inspect::WalkRecord& w : r.walks) {
    int checked = 0;
    for (const StepRecord& s : w.steps)
      if (s.fd) {
        ++checked;
        EXPECT_NEAR(s.fd->engine, s.fd->numeric, 1e-7 * std::max(1.0, std::abs(s.fd->engine)))
            << r.nodes[static_cast<size_t>(s.node)].op;
      }
    EXPECT_GE(checked, 5);
  }
  const StepRecord& w_in_walk2 = r.walks[1].steps.back();
  ASSERT_TRUE(w_in_walk2.fd);  // the leaf: d g0 / dw, a row of the Hessian
}

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

TEST(BackwardRecorder, NothingChangesWithoutOrWithARecorder) {
  // no recorder: no observer; the same model's gradients with a recorder attached are the same bits
  EXPECT_EQ(graph_observer(), nullptr);
  auto grads = [](bool recording) {
    const backward_walk::GptSetup s = backward_walk::gpt_setup();
    std::optional<BackwardRecorder> rec;
    if (recording) rec.emplace();
    backward_walk::gpt_loss(s).backward();
    std::vector<Tensor> g;
    for (const auto& [name, p] : s.model->named_parameters()) g.push_back(p.grad().clone());
    return g;
  };
  const std::vector<Tensor> off = grads(false), on = grads(true);
  EXPECT_EQ(graph_observer(), nullptr);
  ASSERT_EQ(off.size(), on.size());
  for (size_t i = 0; i < off.size(); ++i) EXPECT_EQ(max_abs_diff(off[i], on[i]), 0.0) << i;
  // a variable used twice, a hook that changes a gradient, mg::grad with create_graph and a second walk
  auto second = [](bool recording) {
    const Variable x(from_vector<double>({0.3, -1.2, 2.0}, {3}), true);
    std::optional<BackwardRecorder> rec;
    if (recording) rec.emplace();
    Variable y = tanh(x) * x + x;
    y.register_hook([](const Tensor&) { return Tensor(); });  // under create_graph a hook may only look
    const Variable g = grad({sum(y * y)}, {x}, {.create_graph = true})[0];
    sum(g * g).backward();
    Variable y2 = tanh(x) * x + x;
    y2.register_hook([](const Tensor& dy) { return dy * 3.0; });  // in a plain backward it may replace
    sum(y2 * y2).backward();
    return std::pair<Tensor, Tensor>{g.data().clone(), x.grad().clone()};
  };
  const auto [g_off, x_off] = second(false);
  const auto [g_on, x_on] = second(true);
  EXPECT_EQ(max_abs_diff(g_off, g_on), 0.0);
  EXPECT_EQ(max_abs_diff(x_off, x_on), 0.0);
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
