#pragma once
// backward_walk, the recordings: four backward passes recorded node by node by
// inspect::BackwardRecorder, each checked by finite differences, for the page viz::backward_html
// draws. The tests include it; main.cpp writes the pages.
//   1. micrograd's neuron, o = tanh(x1 w1 + x2 w2 + b), with its lecture's numbers;
//   2. hand_attention's head on A A B A: the loss through softmax's Jacobian to dS, then to W_Q, W_K;
//   3. one GPT block (models::GPT, char_gpt's model) on a short text, tied embeddings;
//   4. second_order's Hessian column: a backward with create_graph, then a backward through it.
// Every model is float64, so finite differences agree with the engine to about 1e-9. The seed
// draws the initial weights of 2 and 3 (seed 0: hand_attention's, and docs/05-attention.md's numbers);
// 1 and 4 are fixed by their formulas.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "../hand_attention/experiment.h"
#include "../second_order/experiment.h"
#include "minigrad/inspect/backward_recorder.h"
#include "minigrad/minigrad.h"

namespace backward_walk {
using namespace mg;

/// One recording and what the page and the README say about it.
struct Recording {
  std::string file;   // page name in the output folder: "neuron.html"
  std::string title;  // the page's title
  std::string json;   // inspect::BackwardRecorder::json
  std::vector<inspect::NodeRecord> nodes;
  std::vector<inspect::WalkRecord> walks;
  std::vector<std::pair<std::string, Tensor>> grads;  // the leaves' .grad() after the walk, by name
  double loss = 0;
};

// Record `loss_fn`'s forward and backward, run finite differences on walk 0, and keep it all.
inline Recording record(const std::string& file, const std::string& title,
                        const std::vector<std::pair<std::string, Variable>>& names,
                        const std::function<Variable()>& loss_fn, const std::map<std::string, std::string>& meta) {
  inspect::BackwardRecorder rec({.names = names});
  const Variable loss = loss_fn();
  loss.backward();
  rec.detach();
  rec.check_with_finite_differences(loss_fn);
  Recording r{file, title, rec.json(meta), rec.nodes(), rec.walks(), {}, loss.item()};
  for (const auto& [name, v] : names)
    if (v.grad().defined()) r.grads.emplace_back(name, v.grad().clone());
  return r;
}

// ---- 1. micrograd's neuron --------------------------------------------------------------------
// x1 = 2, x2 = 0, w1 = -3, w2 = 1, b = 6.8813735870195432 (so that n = 0.8814 and o = tanh n = 0.7071);
// backward from o gives x1 -1.5, w1 1, x2 0.5, w2 0, b 0.5, as in the lecture.
inline Recording neuron() {
  auto scalar = [](double v) { return Variable(scalar_tensor(v, DType::Float64), true); };
  const Variable x1 = scalar(2.0), x2 = scalar(0.0), w1 = scalar(-3.0), w2 = scalar(1.0),
                 b = scalar(6.8813735870195432);
  auto o = [=] {
    Variable x1w1 = x1 * w1, x2w2 = x2 * w2;
    x1w1.set_name("x1*w1"), x2w2.set_name("x2*w2");
    Variable sum = x1w1 + x2w2;
    sum.set_name("x1*w1 + x2*w2");
    Variable n = sum + b;
    n.set_name("n");
    Variable out = tanh(n);
    out.set_name("o");
    return out;
  };
  return record("neuron.html", "micrograd's neuron: o = tanh(x1 w1 + x2 w2 + b), stepped backward",
                {{"x1", x1}, {"x2", x2}, {"w1", w1}, {"w2", w2}, {"b", b}}, o,
                {{"example", "backward_walk 1: micrograd's neuron"},
                 {"compare with",
                  "micrograd's lecture: o.grad 1, n.grad 0.5, x1.grad -1.5, w1.grad 1, x2.grad 0.5, "
                  "w2.grad 0"}});
}

// ---- 2. hand_attention's head ----------------------------------------------------------------
// The head of examples/hand_attention at its seed-0 initialisation, on A A B A, with the loss
// written as docs/05-attention.md's lines: S = Q K^T / sqrt(2), P = softmax(S), L = -(1/T) sum_t
// log P[t, b]. (hand_attention's training computes the same L with cross_entropy, one fused node.)
struct HeadSetup {
  std::shared_ptr<hand_attention::Head> head;
  Tensor X, onehot_b;  // (1, 4, 2) one-hot tokens, (1, 4, 4) the B's column
};

inline HeadSetup head_setup(uint64_t seed = 0) {
  Generator g(seed);  // seed 0: the initial W_Q, W_K of hand_attention's trace_backward and train
  HeadSetup s{std::make_shared<hand_attention::Head>(g), {}, {}};
  s.head->to(DType::Float64);
  const int64_t T = 4;
  s.X = tensor({1, 0, 1, 0, 0, 1, 1, 0}, {1, T, hand_attention::kDim}).to(DType::Float64);  // A A B A
  s.onehot_b = one_hot(full({1, T}, 2, DType::Int64), T).to(DType::Float64);                // the B is at 2
  return s;
}

inline Variable head_loss(const HeadSetup& s) {
  const Variable x(s.X);
  Variable Q = s.head->w_q(x), K = s.head->w_k(x);
  Q.set_name("Q"), K.set_name("K");
  Variable S = matmul(Q, transpose(K, 1, 2)) / std::sqrt(static_cast<double>(hand_attention::kDim));
  S.set_name("S");
  Variable P = softmax(S, -1);
  P.set_name("P");
  Variable logP = log(P);
  logP.set_name("log P");
  Variable L = -sum(logP * Variable(s.onehot_b)) / static_cast<double>(s.X.size(1));
  L.set_name("L");
  return L;
}

inline Recording attention_head(uint64_t seed = 0) {
  const HeadSetup s = head_setup(seed);
  return record("attention_head.html", "hand_attention's head: from the loss to W_Q and W_K",
                s.head->named_parameters(), [&] { return head_loss(s); },
                {{"example", fmt::format("backward_walk 2: hand_attention's head (seed {}) on A A B A", seed)},
                 {"compare with",
                  "docs/05-attention.md: dP = -(1/T) onehot_b / P at log P, dS = P * (dP - rowsum(dP * P)) at softmax, "
                  "dW_Q at w_q.weight (which holds W_Q^T, so its .grad is dW_Q transposed)"}});
}

// ---- 3. one GPT block ------------------------------------------------------------------------
// models::GPT, the model char_gpt trains, cut to one block of width 16 with 2 heads, its head tied
// to the token embedding (GPT-2's tying, so the two uses' gradients meet in one parameter), on
// a 6-character window of a short text. forward_outputs with output_attentions runs the composed
// attention, so the causal mask and the softmax are nodes of their own.
struct GptSetup {
  std::shared_ptr<models::GPT> model;
  Tensor x, y;  // (1, T) ids and the next characters
  std::string text;
};

inline GptSetup gpt_setup(uint64_t seed = 0) {
  const std::string text = "to be or not to be";
  std::string chars = text;
  std::sort(chars.begin(), chars.end());
  chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
  const int64_t T = 6, V = static_cast<int64_t>(chars.size());
  Generator g(seed);
  GptSetup s{std::make_shared<models::GPT>(
                 V, T, models::GPTOptions{.d_model = 16, .nhead = 2, .num_layers = 1, .tie_weights = true}, g),
             {},
             {},
             text.substr(0, T + 1)};
  s.model->to(DType::Float64);
  s.model->eval();
  std::vector<int64_t> ids;
  for (char c : s.text) ids.push_back(static_cast<int64_t>(chars.find(c)));
  s.x = from_vector(std::vector<int64_t>(ids.begin(), ids.begin() + T), {1, T});
  s.y = from_vector(std::vector<int64_t>(ids.begin() + 1, ids.end()), {T});
  return s;
}

inline Variable gpt_loss(const GptSetup& s) {
  const models::GPTOutput out = s.model->forward_outputs(s.x, {.output_attentions = true});
  Variable loss = cross_entropy(reshape(out.logits, {-1, s.model->head.out_features}), s.y);
  loss.set_name("loss");
  return loss;
}

inline Recording gpt_block(uint64_t seed = 0) {
  const GptSetup s = gpt_setup(seed);
  return record(
      "gpt_block.html", "One GPT block (char_gpt's model) on \"" + s.text.substr(0, 6) + "\"",
      s.model->named_parameters(), [&] { return gpt_loss(s); },
      {{"example",
        fmt::format("backward_walk 3: one GPT block, width 16, 2 heads, tied embeddings, 6 characters, seed {}", seed)},
       {"look for",
        "the residual stream's two paths adding at each block input; layer_norm's rule with its three "
        "terms; the masked scores, whose gradient is 0; tok.weight, where the embedding and the head meet"}});
}

// ---- 4. a second derivative ------------------------------------------------------------------
// second_order's logistic regression (its Newton part): g = dL/dw with create_graph (walk 1, whose
// rules are recorded as ops), then the backward of g[0] (walk 2), which leaves column 0 of the
// Hessian in w.grad(): what hessian_by_columns computes one column at a time.
inline Recording second_derivative() {
  const second_order::LogReg d = second_order::make_logreg();
  const Variable w(tensor({0.5, -0.25, 0.1}, {3, 1}).to(DType::Float64), true);
  inspect::BackwardRecorder rec({.names = {{"w", w}}});
  Variable loss = second_order::logreg_loss(w, d);
  loss.set_name("loss");
  const Variable g = grad({loss}, {w}, {.create_graph = true})[0];
  Variable g0 = sum(narrow(g, 0, 0, 1));
  g0.set_name("dL/dw[0]");
  g0.backward();
  rec.detach();
  rec.check_with_finite_differences([&] { return second_order::logreg_loss(w, d); });
  // walk 2's "forward" is the first gradient itself: every op before g0, walk 1's included
  rec.check_with_finite_differences(
      [&] {
        const Variable l = second_order::logreg_loss(w, d);
        return sum(narrow(grad({l}, {w}, {.create_graph = true})[0], 0, 0, 1));
      },
      1e-6, 1);
  Recording r{"second_derivative.html",
              "A second derivative: the backward of a gradient (create_graph)",
              rec.json({{"example", "backward_walk 4: second_order's logistic regression, one Hessian column"},
                        {"look for",
                         "walk 1 computes dL/dw and records its own ops; walk 2 runs backward through "
                         "them: w.grad() is then column 0 of the Hessian"}}),
              rec.nodes(),
              rec.walks(),
              {{"w", w.grad().clone()}},
              loss.item()};
  return r;
}

}  // namespace backward_walk
