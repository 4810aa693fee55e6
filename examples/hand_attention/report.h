#pragma once
// hand_attention: what a run prints and draws, with the captions.
#include "experiment.h"

namespace hand_attention {

std::vector<std::string> labels(const Tensor& ids) {
  std::vector<std::string> out;
  for (int64_t i : ids.to_vector<int64_t>()) out.push_back(kTokens[i]);
  return out;
}

void report_hand(const HandResult& h, viz::Report& rep) {
  const std::vector<std::string> seq = {"A", "A", "B", "A"}, ab = {"A", "B"};
  auto show = [&](const char* what, const Tensor& t, const std::vector<std::string>& rows,
                  const std::vector<std::string>& cols) {
    fmt::print("{}\n{}\n", what, viz::terminal_heatmap(t, rows, cols));
  };
  show("Q = X W_Q   (every query is (0, 1): looking for B)", h.q, seq, {"d0", "d1"});
  show("K = X W_K   (A -> (10, 0), B -> (0, 10))", h.k, seq, {"d0", "d1"});
  show("scores = Q K^T", h.scores, seq, seq);
  show("attention = softmax(Q K^T), rows sum to 1", h.attn, seq, seq);
  show("attention = softmax(Q K^T / sqrt(2))", h.attn_scaled, seq, seq);
  show("output = attention V, with V = X (W_V = I): every row is ~all B", h.out, seq, {"A", "B"});
  fmt::print(
      "The scores are an n x n table: {} tokens, {} scores. At 1024 tokens it is about a million per head\n"
      "and layer, which is why attention's cost grows with the square of the context (docs/BENCHMARKS.md,\n"
      "'Context scaling').\n\n",
      h.x.size(0), h.x.size(0) * h.x.size(0));
  auto heat = [&](const Tensor& t, const std::string& title, bool diverging = false) {
    return viz::heatmap_svg(t, {.title = title,
                                .row_labels = seq,
                                .col_labels = seq,
                                .row_title = "query",
                                .col_title = "key",
                                .diverging = diverging});
  };
  rep.add_svg("hand_scores.svg", heat(h.scores, "Hand-set scores Q K^T"),
              "Scores: 10 wherever the key is the B, 0 elsewhere.");
  rep.add_svg("hand_attention.svg", heat(h.attn, "Hand-set attention, softmax(Q K^T)"),
              "Without scaling: every query puts 0.9999 of its attention on the B.");
  rep.add_svg(
      "hand_attention_scaled.svg", heat(h.attn_scaled, "Hand-set attention, softmax(Q K^T / sqrt(2))"),
      "With the 1/sqrt(d) scaling the scores shrink by 1.41 and the attention is slightly softer (0.997 on the B).");
  rep.add_svg(
      "hand_output.svg",
      viz::heatmap_svg(h.out, {.title = "Output = attention V (V = X)",
                               .row_labels = seq,
                               .col_labels = {"A", "B"},
                               .row_title = "query",
                               .col_title = "feature"}),
      "The output: each row is the attention-weighted mix of the value rows; with V = X every position now carries "
      "the B's one-hot vector, whatever its own token.");
}

void report_trace(const BackwardTrace& t, viz::Report& rep) {
  std::string s = "dL/dW_Q at initialisation on A A B A (every row's attention should be on the B):\n";
  s += fmt::format("  {:<8} {:>14} {:>14} {:>16}\n", "entry", "by hand", "autograd", "finite diff.");
  for (int64_t i = 0; i < kDim; ++i)
    for (int64_t j = 0; j < kDim; ++j)
      s += fmt::format("  W_Q[{},{}] {:>+14.8f} {:>+14.8f} {:>+16.8f}\n", i, j, t.by_hand.at({i, j}),
                       t.autograd.at({i, j}), t.numeric.at({i, j}));
  s += fmt::format("gradcheck over W_Q and W_K: {} (worst |analytic - numeric| {:.1e})\n",
                   t.gradcheck_ok ? "ok" : "FAILED", t.gradcheck_error);
  s += "No separate network updates W_Q: this gradient, from the chain rule through softmax and two matmuls,\n"
       "is all the optimizer sees.\n";
  fmt::print("{}", s);
  rep.add_note(
      "One backward pass traced by hand (dP = -onehot/(T P), dS = P * (dP - rowsum(dP * P)), "
      "dQ = dS K / sqrt(d), dW_Q = X^T dQ), against autograd and finite differences:",
      false);
  rep.add_note(s, true);
}

// The B - A gap of W_Q W_K^T at a few steps: it keeps growing.
std::string gap_table(const TrainResult& r) {
  std::string s = fmt::format("  {:>6} {:>16} {:>16} {:>10}\n", "step", "query A: B - A", "query B: B - A", "loss");
  for (size_t step : {50, 100, 200, 400, 1000, 2000})
    if (step <= r.gaps.size())
      s += fmt::format("  {:>6} {:>16.2f} {:>16.2f} {:>10.5f}\n", step, r.gaps[step - 1][0], r.gaps[step - 1][1],
                       r.losses[step - 1]);
  return s;
}

void report_learned(const HandResult& h, const TrainResult& r, const Config& c, viz::Report& rep) {
  // W_Q, W_K in the row-vector convention: rows are the input features (one per token, one-hot),
  // columns the query or key features.
  auto mat = [&](const Tensor& t, const std::string& title) {
    return viz::heatmap_svg(t, {.title = title,
                                .row_labels = kTokens,
                                .col_labels = {"d0", "d1"},
                                .row_title = "input (token)",
                                .col_title = "output feature",
                                .diverging = true});
  };
  const Tensor M_hand = matmul(h.w_q, h.w_k.transpose(0, 1)), M = matmul(r.W_Q, r.W_K.transpose(0, 1));
  // The hand-set and learned forms on one colour scale, so that their colours compare: the
  // learned gap (column B - column A) is larger than the hand-set 10.
  const double form_range = std::max(max(abs(M_hand)).item(), max(abs(M)).item());
  auto form = [&](const Tensor& t, const std::string& title) {
    return viz::heatmap_svg(t, {.title = title,
                                .row_labels = kTokens,
                                .col_labels = kTokens,
                                .row_title = "query token",
                                .col_title = "key token",
                                .diverging = true,
                                .vmin = -form_range,
                                .vmax = form_range});
  };
  fmt::print("\nW_Q W_K^T, the bilinear form (rows: query token, cols: key token)\n hand-set:\n{} learned:\n{}",
             viz::terminal_heatmap(M_hand, kTokens, kTokens), viz::terminal_heatmap(M, kTokens, kTokens));
  fmt::print("Softmax ignores a constant added to a row, so what matters is column B minus column A:\n");
  for (int64_t q = 0; q < 2; ++q)
    fmt::print("  query {}: hand {:+.2f}, learned {:+.2f}\n", kTokens[q], M_hand.at({q, 1}) - M_hand.at({q, 0}),
               M.at({q, 1}) - M.at({q, 0}));
  const std::string gaps = gap_table(r);
  fmt::print(
      "\nThe learned gap is not a target that training reaches; it keeps growing:\n{}"
      "Cross-entropy is -log(attention on the B), which is above 0 for any finite gap, so every step still\n"
      "pushes the B's score up relative to the A's; the push weakens as the loss shrinks, so the growth slows.\n",
      gaps);
  rep.add_note(
      "The learned B - A gap keeps growing: cross-entropy -log(attention on the B) is above 0 for any finite gap, so "
      "every step pushes it further (more slowly as the loss shrinks). The hand-set 10 is one point on this road.",
      false);
  rep.add_note(gaps, true);
  std::vector<double> ga, gb;
  for (auto& g2 : r.gaps) ga.push_back(g2[0]), gb.push_back(g2[1]);
  rep.add_svg("gap.svg",
              viz::line_chart_svg({viz::Series::over_steps("query A: column B - column A", ga),
                                   viz::Series::over_steps("query B: column B - column A", gb),
                                   viz::Series::over_steps("hand-set (10)", std::vector<double>(ga.size(), 10.0))},
                                  {.title = "B - A gap of the learned W_Q W_K^T", .x_label = "step", .y_label = "gap"}),
              "The gap over training: it passes the hand-set 10 and goes on growing.");
  rep.add_svg("W_Q_hand.svg", mat(h.w_q, "W_Q, set by hand"), "Hand-set W_Q: both tokens map to the query (0, 1).");
  rep.add_svg("W_K_hand.svg", mat(h.w_k, "W_K, set by hand"), "Hand-set W_K = 10 I.");
  rep.add_svg("W_Q_init.svg", mat(r.W_Q0, "W_Q at initialisation"), "W_Q before training: random numbers.");
  rep.add_svg("W_K_init.svg", mat(r.W_K0, "W_K at initialisation"), "W_K before training: random numbers.");
  rep.add_svg("W_Q_learned.svg", mat(r.W_Q, "W_Q after training"),
              "Learned W_Q: different numbers from the hand-set one...");
  rep.add_svg("W_K_learned.svg", mat(r.W_K, "W_K after training"), "...and a different W_K...");
  rep.add_svg("form_hand.svg", form(M_hand, "W_Q W_K^T, hand-set"),
              fmt::format("The bilinear form of the hand-set head: column B is 10 above column A. It shares its "
                          "colour scale with the learned form beside it (-{0:.1f} to {0:.1f}).",
                          form_range));
  rep.add_svg("form_learned.svg", form(M, "W_Q W_K^T, learned"), [&] {
    const double ga = M.at({0, 1}) - M.at({0, 0}), gb = M.at({1, 1}) - M.at({1, 0});
    const double hand = M_hand.at({0, 1}) - M_hand.at({0, 0});
    const char* vs = ga > hand && gb > hand ? "more than" : ga < hand && gb < hand ? "less than" : "around";
    return fmt::format(
        "...and the learned bilinear form has the same shape: for both query tokens, column B is "
        "above column A, by {:.1f} and {:.1f}, {} the hand-set {:.0f} (the same colour scale). "
        "Many weight settings give the same attention.",
        ga, gb, vs, hand);
  }());
  const std::vector<std::string> seq = labels(r.eval.example_ids);
  rep.add_svg("learned_attention.svg",
              viz::heatmap_svg(r.eval.example_attn, {.title = "Learned attention on a test sequence",
                                                     .row_labels = seq,
                                                     .col_labels = seq,
                                                     .row_title = "query",
                                                     .col_title = "key"}),
              "A held-out sequence: every row puts its attention on the B, like the hand-set head.");
  rep.add_svg(
      "loss.svg",
      viz::line_chart_svg({viz::Series::over_steps("train loss", r.losses)},
                          {.title = "Training loss", .x_label = "step", .y_label = "cross-entropy", .log_y = true}),
      "Loss: -log(attention on the B), averaged over every position.");
  rep.add_note(
      fmt::format("Learned from random weights in {} steps: accuracy {:.2f}%, attention on the B: mean {:.4f}, "
                  "smallest row {:.4f}.",
                  c.steps, 100 * r.eval.accuracy, r.eval.mean_mass, r.eval.min_mass));
}

}  // namespace hand_attention
