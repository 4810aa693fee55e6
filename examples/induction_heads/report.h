#pragma once
// induction_heads: the tables a run prints and its pictures with their captions.
#include "experiment.h"

namespace induction_heads {

// ---- report ------------------------------------------------------------------------------
std::string score_table(const inspect::TelemetryRecord& end) {
  std::string s = fmt::format("{:<8} {:>4} {:>14} {:>11} {:>10} {:>8}   {}\n", "layer", "head", "previous-token",
                              "first-token", "induction", "copying", "label");
  for (const inspect::HeadScore& h : end.heads)
    s += fmt::format("{:<8} {:>4} {:>14.3f} {:>11.3f} {:>10.3f} {:>8.2f}   {}\n", h.layer, h.head, h.previous_token,
                     h.first_token, h.induction, h.copying, h.label);
  return s;
}

std::string progress_table(const RunResult& r, const Config& c) {
  std::string s = fmt::format("{:>6} {:>9} {:>10} {:>22} {:>22}\n", "step", "loss", "ICL score",
                              "best previous-token L0", fmt::format("best induction L{}", c.layers - 1));
  const size_t n = r.records.size(), stride = std::max<size_t>(1, n / 12);
  for (size_t i = 0; i < n; i += stride) {
    const inspect::TelemetryRecord& rec = r.records[i];
    double prev = 0, ind = 0;
    for (const inspect::HeadScore& h : rec.heads) {
      if (h.layer == "attn0") prev = std::max(prev, h.previous_token);
      if (h.layer == fmt::format("attn{}", c.layers - 1)) ind = std::max(ind, h.induction);
    }
    s += fmt::format("{:>6} {:>9.4f} {:>10.3f} {:>22.3f} {:>22.3f}{}\n", rec.step, rec.loss, rec.icl.score, prev, ind,
                     rec.step == r.phase_step ? "   <- phase change" : "");
  }
  return s;
}

void report(viz::Report& rep, const Config& c, const RunResult& two, const RunResult& one,
            const std::vector<Ablation>& ab, const Circuits& circ, const HeadMaps& maps) {
  auto steps_of = [](const RunResult& r) {
    std::vector<double> x;
    for (auto& rec : r.records) x.push_back(static_cast<double>(rec.step));
    return x;
  };
  auto series = [&](const RunResult& r, const std::string& name, auto get) {
    std::vector<double> y;
    for (auto& rec : r.records) y.push_back(get(rec));
    return viz::Series{name, steps_of(r), y};
  };
  const std::vector<viz::Marker> phase = {{static_cast<double>(two.phase_step), "phase change"}};
  rep.add_svg(
      "loss.svg",
      viz::line_chart_svg(
          {series(two, "2 layers: loss", [](auto& r) { return r.loss; }),
           series(one, "1 layer: loss", [](auto& r) { return r.loss; })},
          {.title = "Training loss (all positions)", .x_label = "step", .y_label = "cross-entropy", .markers = phase}),
      "The 2-layer model's loss sits on a plateau, then drops: the phase change. Most tokens are random, so the loss "
      "cannot go below about log(vocab) on them; the drop is the repeated spans becoming predictable.");
  rep.add_svg(
      "icl.svg",
      viz::line_chart_svg({series(two, "2 layers", [](auto& r) { return r.icl.score; }),
                           series(one, "1 layer", [](auto& r) { return r.icl.score; })},
                          {.title = "In-context learning score (loss on the 2nd copy - loss on the 1st)",
                           .x_label = "step",
                           .y_label = "nats",
                           .markers = phase}),
      "The in-context learning score jumps at the same steps in the 2-layer model; the 1-layer model never gets there.");
  const std::string last = fmt::format("attn{}", c.layers - 1);
  std::vector<viz::Series> prev, ind;
  for (int64_t h = 0; h < c.heads; ++h) {
    prev.push_back(
        series(two, fmt::format("head {}", h), [&](auto& r) { return score_of(r, "attn0", h).previous_token; }));
    ind.push_back(series(two, fmt::format("head {}", h), [&](auto& r) { return score_of(r, last, h).induction; }));
  }
  rep.add_svg("previous_token_scores.svg",
              viz::line_chart_svg(prev, {.title = "Layer 0: previous-token score of each head",
                                         .x_label = "step",
                                         .y_label = "attention on t - 1",
                                         .markers = phase}),
              "Mean attention from position t to t - 1 on the probe, per head of layer 0.");
  rep.add_svg(
      "induction_scores.svg",
      viz::line_chart_svg(ind, {.title = fmt::format("Layer {}: induction score of each head", c.layers - 1),
                                .x_label = "step",
                                .y_label = "attention on the token after the earlier copy",
                                .markers = phase}),
      "On a random span repeated twice: mean attention from each token of the 2nd copy to the position after the "
      "same token in the 1st copy, per head of the last layer.");
  {  // the induction head before and after softmax, on one repeated sequence and on average
    const double range = example::finite_abs_max(maps.scores);
    const std::string name = fmt::format("{} head {}", two.induction_head.layer, two.induction_head.head);
    const int64_t n = c.seq_len / 2;
    rep.add_svg("induction_head_scores.svg",
                viz::heatmap_svg(maps.scores, {.title = fmt::format("{}: scores, one sequence", name),
                                               .row_labels = maps.tokens,
                                               .col_labels = maps.tokens,
                                               .row_title = "query token",
                                               .col_title = "key token",
                                               .diverging = true,
                                               .vmin = -range,
                                               .vmax = range,
                                               .annotate = 0,
                                               .cell = 12}),
                fmt::format("The induction head's scores before softmax on one sequence of {0} random tokens repeated "
                            "twice (its tokens on both axes; hatched grey: the masked future). In the second copy "
                            "each query's highest score is {1} positions back, on the token after the earlier copy "
                            "of its own token: the stripe below the diagonal.",
                            n, n - 1));
    rep.add_svg("induction_head_weights.svg",
                viz::heatmap_svg(maps.weights, {.title = fmt::format("{}: weights, the same sequence", name),
                                                .row_labels = maps.tokens,
                                                .col_labels = maps.tokens,
                                                .row_title = "query token",
                                                .col_title = "key token",
                                                .vmin = 0,
                                                .vmax = 1,
                                                .annotate = 0,
                                                .cell = 12}),
                "The same sequence after softmax: the stripe takes nearly all of each row's weight in the second "
                "copy; in the first copy, where nothing repeats yet, the weight goes elsewhere.");
    std::vector<std::string> pos;
    for (int64_t t = 0; t < 2 * n; ++t) pos.push_back(std::to_string(t));
    rep.add_svg("induction_head_mean.svg",
                viz::heatmap_svg(maps.mean, {.title = fmt::format("{}: weights, mean of 64 sequences", name),
                                             .row_labels = pos,
                                             .col_labels = pos,
                                             .row_title = "query position",
                                             .col_title = "key position",
                                             .vmin = 0,
                                             .vmax = 1,
                                             .annotate = 0,
                                             .cell = 12}),
                "Averaged over 64 such sequences (positions on the axes): the stripe is where the repeat puts it, "
                "whatever the tokens.");
  }
  rep.add_note(progress_table(two, c), true);
  rep.add_note(score_table(two.records.back()), true);
  std::string t = fmt::format("{:<40} {:>14} {:>14} {:>20}\n", "removed (head_mask)", "span accuracy", "span loss",
                              "induction score");
  for (const Ablation& a : ab)
    t += fmt::format("{:<40} {:>13.1f}% {:>14.3f} {:>20.3f}\n", a.removed, 100 * a.span.accuracy, a.span.loss,
                     a.induction);
  rep.add_note(t, true);
  const int64_t V = c.vocab;
  std::vector<std::string> toks;
  for (int64_t i = 0; i < V; ++i) toks.push_back(std::to_string(i));
  rep.add_svg(
      "ov_circuit.svg",
      viz::heatmap_svg(
          circ.ov, {.title = fmt::format("OV circuit of {} head {}", two.induction_head.layer, two.induction_head.head),
                    .row_labels = toks,
                    .col_labels = toks,
                    .row_title = "token attended to",
                    .col_title = "logit raised",
                    .diverging = true,
                    .annotate = 0,
                    .cell = 12}),
      fmt::format(
          "E W_V^T W_O^T W_U^T of the induction head: attending to token i raises logit j by this much (direct path). "
          "The diagonal dominates in {:.0f}% of rows: it copies.",
          100 * circ.ov_diagonal));
  rep.add_svg(
      "ov_layer.svg",
      viz::heatmap_svg(circ.ov_layer,
                       {.title = fmt::format("OV circuit of all of {} (sum over heads)", two.induction_head.layer),
                        .row_labels = toks,
                        .col_labels = toks,
                        .row_title = "token attended to",
                        .col_title = "logit raised",
                        .diverging = true,
                        .annotate = 0,
                        .cell = 12}),
      fmt::format("The same for the whole layer (E W_V^T W_O^T W_U^T with the full matrices): the heads split the "
                  "vocabulary between them; together the diagonal dominates in {:.0f}% of rows.",
                  100 * circ.ov_layer_diagonal));
  rep.add_svg(
      "qk_circuit.svg",
      viz::heatmap_svg(circ.qk, {.title = "QK circuit through the previous-token head",
                                 .row_labels = toks,
                                 .col_labels = toks,
                                 .row_title = "query token",
                                 .col_title = "token before the key",
                                 .diverging = true,
                                 .annotate = 0,
                                 .cell = 12}),
      fmt::format(
          "The induction head's query against what the previous-token head wrote into each key (K-composition). "
          "The diagonal dominates in {:.0f}% of rows: it looks for the position after an earlier copy of its own token.",
          100 * circ.qk_diagonal));
}

}  // namespace induction_heads
