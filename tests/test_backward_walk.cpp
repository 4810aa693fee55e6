// examples/backward_walk's recordings (inspect::BackwardRecorder): the recorded numbers are the
// engine's own, bit for bit; each node's contributions add up to what it received; finite
// differences agree; each recording shows what the example's README says, at three seeds where
// weights are drawn; and a walk with no recorder attached computes the same bits.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backward_helpers.h"
#include "examples/backward_walk/recordings.h"
#include "helpers.h"

using namespace mg;
using inspect::BackwardRecorder;
using inspect::StepRecord;
using mgtest::max_abs_diff;
using namespace backward_tests;

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
