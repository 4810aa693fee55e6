#pragma once
// where_weights_come_from: what a run prints and draws, with the captions.
#include "experiment.h"

namespace where_weights {

void report_learned(viz::Report& rep, Model& m, const RunResult& r, const Config& c, Generator& g) {
  // Before, after and the change, the first two on one shared colour scale so that colours compare.
  std::vector<std::string> features;
  for (int64_t i = 0; i < c.dim; ++i) features.push_back(std::to_string(i));
  auto heat = [&](const Tensor& t, const std::string& title, double range) {
    return viz::heatmap_svg(t, {.title = title,
                                .row_labels = features,
                                .col_labels = features,
                                .row_title = "output feature (row of weight)",
                                .col_title = "input feature (column)",
                                .diverging = true,
                                .vmin = -range,
                                .vmax = range,
                                .annotate = 0,
                                .cell = 18});
  };
  auto absmax = [](const Tensor& t) { return max(abs(t)).item(); };
  Generator probe(c.seed + 13);
  RankOne change_q;
  for (auto [name, w0, l] :
       {std::tuple{"W_Q", r.w_q0, &m.attn.w_q}, {"W_K", r.w_k0, &m.attn.w_k}, {"W_V", r.w_v0, &m.attn.w_v}}) {
    const Tensor w1 = l->weight.data(), dw = w1 - w0;
    const double range = std::max(absmax(w0), absmax(w1));
    rep.add_svg(
        fmt::format("{}_init.svg", name), heat(w0, fmt::format("{} at initialisation", name), range),
        fmt::format("{} before training: Xavier-uniform random numbers (colour scale shared with the next picture).",
                    name));
    rep.add_svg(fmt::format("{}_trained.svg", name), heat(w1, fmt::format("{} after training", name), range),
                fmt::format("{} after {} AdamW steps: the same matrix, moved by its gradients.", name, c.steps));
    const RankOne r1 = rank_one(dw, mean(m.embed(make_batch(c, probe, 256).ids).data().reshape({-1, c.dim}), {0}));
    rep.add_svg(
        fmt::format("{}_change.svg", name), heat(dw, fmt::format("{}: after minus before", name), absmax(dw)),
        fmt::format("What training changed in {0} (largest change {1:.2f}; the largest initial entry was {2:.2f}). "
                    "{3:.0f}% of the change is one outer product u v^T, which is why it looks striped: every row is "
                    "nearly a multiple of v, every column of u. v, the input direction, has |cosine| {4:.2f} with the "
                    "mean input vector.",
                    name, absmax(dw), absmax(w0), 100 * r1.share, r1.cos_mean_input));
    if (std::string(name) == "W_Q") change_q = r1;
  }
  const std::string stripes = fmt::format(
      "W_Q's change: {:.0f}% of it is one outer product u v^T (its largest singular value squared over the total); "
      "v has |cosine| {:.2f} with the mean input vector.\n",
      100 * change_q.share, change_q.cos_mean_input);
  fmt::print("\n{}", stripes);
  rep.add_note(stripes, true);
  // The QK circuit: what the scores are made of. x = tok[i] + pos[p], so a score is a sum of
  // token-token, token-position, position-token and position-position terms (and bias terms);
  // W_Q alone is unreadable, these products are not.
  {
    NoGradGuard no_grad;
    const Tensor Wq = m.attn.w_q.weight.data(), Wk = m.attn.w_k.weight.data();
    const double scale = 1 / std::sqrt(static_cast<double>(c.dim));
    auto circuit = [&](const Tensor& A, const Tensor& B) {  // (A Wq^T)(B Wk^T)^T / sqrt(d)
      return matmul(matmul(A, Wq.transpose(0, 1)), matmul(B, Wk.transpose(0, 1)).transpose(0, 1)) * scale;
    };
    const Tensor E = m.tok.weight.data(), P = m.pos.weight.data();
    std::vector<std::string> toks, poss;
    for (int64_t i = 0; i < c.vocab; ++i) toks.push_back(std::to_string(i));
    for (int64_t i = 0; i < c.seq_len; ++i) poss.push_back(std::to_string(i));
    const Tensor pp = circuit(P, P), tt = circuit(E, E).contiguous();
    int64_t low_col = 0;  // the key token with the most negative entry, named in the caption
    for (int64_t i = 0; i < tt.numel(); ++i)
      if (tt.data<float>()[i] < tt.data<float>()[low_col]) low_col = i;
    low_col %= c.vocab;
    rep.add_svg(
        "qk_positions.svg",
        viz::heatmap_svg(pp, {.title = "QK circuit, positions: P W_Q^T W_K P^T / sqrt(d)",
                              .row_labels = poss,
                              .col_labels = poss,
                              .row_title = "query position",
                              .col_title = "key position",
                              .diverging = true}),
        "The learned QK circuit over positions: every query position scores key position 0 highest, "
        "which is where the answer (the first token) is. This is what W_Q and W_K learned, read through the embeddings.");
    const KeyZeroLeads leads = key0_leads(m, c);
    std::string table =
        "What makes key position 0 win: each term's lead at key 0 over the other keys' mean, per query position\n"
        "(score units, before softmax; mean over 256 sequences; the terms add up to the whole score):\n";
    table += fmt::format("  {:<20}", "query position");
    for (int64_t t = 0; t < c.seq_len; ++t) table += fmt::format("{:>7}", t);
    auto row = [&](const std::string& name, const std::vector<double>& v, int decimals = 2) {
      table += fmt::format("\n  {:<20}", name);
      for (double x : v) table += fmt::format("{:>7.{}f}", x, decimals);
    };
    for (const auto& [name, lead] : leads.terms) row(name, lead);
    row("whole score", leads.whole);
    row("weight on key 0", leads.weight_on_0, 4);
    table += "\nDuring training, after step:";
    for (const auto& [step, at] : r.leads_at) {
      row(fmt::format("{:>3}: position term", step), at.terms.at(0).second);
      row("     weight on key 0", at.weight_on_0, 4);
    }
    const auto [lo, hi] = std::minmax_element(leads.whole.begin(), leads.whole.end());
    const auto [plo, phi] = std::minmax_element(leads.terms[0].second.begin(), leads.terms[0].second.end());
    table += fmt::format(
        "\nEvery query position's whole score puts key 0 ahead by {:.1f} to {:.1f}; the position term alone gives "
        "{:.1f} (query {}) to {:.1f} (query {}).\n",
        *lo, *hi, *plo, plo - leads.terms[0].second.begin(), *phi, phi - leads.terms[0].second.begin());
    fmt::print("\n{}", table);
    rep.add_note(table, true);
    rep.add_svg(
        "qk_tokens.svg",
        viz::heatmap_svg(tt, {.title = "QK circuit, tokens: E W_Q^T W_K E^T / sqrt(d)",
                              .row_labels = toks,
                              .col_labels = toks,
                              .row_title = "query token",
                              .col_title = "key token",
                              .diverging = true}),
        fmt::format(
            "The same product over the token embeddings: what the token identities alone add to a score. It is one "
            "of four terms (with position-position and the two token-position cross terms, plus biases), so no one "
            "picture is the whole score: key token {0}'s negative column does not stop a query from finding a "
            "first token {0}, because the cross terms make up for it (test accuracy {1:.1f}%).",
            low_col, 100 * r.test_accuracy));
  }
  rep.add_text("graph.dot", r.graph_dot,
               "The recorded graph of the first loss (Graphviz DOT), after its backward: the embeddings and "
               "attn.w_q/w_k/w_v/w_o.weight are leaves (blue boxes), each with the norm of the gradient it received.");
  if (std::system("command -v dot > /dev/null 2>&1") == 0 &&
      std::system(("dot -Tsvg " + rep.path("graph.dot") + " -o " + rep.path("graph.svg")).c_str()) == 0)
    rep.add_image("graph.svg",
                  "The same graph rendered by Graphviz: follow any parameter box up to the loss. W_Q, W_K and W_V "
                  "enter as three separate leaves, each through its own linear op, then matmul, softmax, matmul.");
  std::string table = "Gradient norms after the first backward pass: one backward reaches every weight.\n";
  // A norm under 1e-6 of the largest is float32 rounding, not a measurement: its digits differ from
  // one CPU's arithmetic to another's, so it is printed as ~0, not as a number.
  double largest = 0;
  for (auto& [name, n] : r.first_grad_norms) largest = std::max(largest, n);
  bool key_bias_zero = false;
  double key_bias = 0;
  for (auto& [name, n] : r.first_grad_norms) {
    const bool rounding = n < 1e-6 * largest;
    if (name == "attn.w_k.bias") key_bias_zero = rounding, key_bias = n;
    table += rounding ? fmt::format("  {:<22} ~0 (rounding)\n", name) : fmt::format("  {:<22} {:.3e}\n", name, n);
  }
  table += key_bias_zero
               ? "(attn.w_k.bias gets ~0, under 1e-6 of the largest, and always will: a key bias adds the same\n"
                 " q.b_k to every score of a query's row, and softmax ignores a constant added to a row.)\n"
               : fmt::format(
                     "(attn.w_k.bias's gradient is {:.1e} of the largest: not ~0 as softmax's rows "
                     "would make it)\n",
                     key_bias / largest);
  fmt::print("\n{}", table);
  rep.add_note(table, true);
  const double diff = embedding_vs_onehot(m, c, g);
  const ContextResult ctx = static_vs_contextual(m, c);
  const std::string facts = fmt::format(
      "The embedding is a Linear layer on one-hot rows: max |embedding(ids) - one_hot(ids) @ W| = {}\n"
      "Static vs contextual, token 3 at position 4 in two sequences with different first tokens:\n"
      "  cosine of its embedding rows          {:.4f}  (a table lookup: always the same row)\n"
      "  cosine of its value vectors x W_V     {:.4f}  (an activation, but of this position's input only)\n"
      "  cosine of its vectors after attention {:.4f}  (they carry what attention gathered)\n",
      diff, ctx.embedding_cosine, ctx.value_cosine, ctx.contextual_cosine);
  fmt::print("{}", facts);
  rep.add_note(facts, true);
  inspect::AttentionCapture cap(m);
  m(make_batch(c, g, 1).ids);
  rep.add_svg(
      "attention.svg",
      viz::heatmap_svg(
          cap.at("attn").weights.reshape({c.seq_len, c.seq_len}),
          {.title = "Learned attention on one sequence", .row_title = "query position", .col_title = "key position"}),
      "Every query has learned to look at position 0, where the answer is.");
}

// The three variants side by side: final and test loss, test accuracy, loss curves.
void report_ablation(viz::Report& rep, const std::vector<RunResult>& results, const Config& c) {
  std::string table =
      fmt::format("{:<32} {:>12} {:>12} {:>10}\n", "W_Q, W_K, W_V", "final loss", "test loss", "test acc");
  std::vector<viz::Series> series;
  int k = 0;
  for (Variant v : {Variant::Learned, Variant::Identity, Variant::FrozenRandom}) {
    const RunResult& r = results[k++];
    table += fmt::format("{:<32} {:>12.4f} {:>12.4f} {:>9.1f}%\n", variant_name(v), r.final_loss, r.test_loss,
                         100 * r.test_accuracy);
    series.push_back(viz::Series::over_steps(variant_name(v), r.losses));
  }
  fmt::print("\nAblation (same data, same initial weights, {} steps each):\n{}", c.steps, table);
  rep.add_note(
      "Ablation: the same model trained with learned, identity, and frozen random W_Q/W_K/W_V. With Q = K = V = X "
      "the score of query i on key j is x_i . x_j, the same as j's on i: the scores are symmetric, so the "
      "embeddings alone must make position 0 attractive to every query while still saying which token sits "
      "where. (A query's best key need not be itself: x_i . x_j can exceed x_i . x_i.) Frozen "
      "random matrices are a fixed, invertible change of basis: the embeddings and W_O, still learned, can adapt "
      "around them. Learned projections give the model the most freedom.",
      false);
  rep.add_note(table, true);
  rep.add_svg(
      "ablation_loss.svg",
      viz::line_chart_svg(
          series, {.title = "Training loss by variant", .x_label = "step", .y_label = "cross-entropy", .log_y = true}),
      "Loss curves of the three variants.");
}

// The ablation over seeds, as a table per variant and the conclusion computed from it: how often
// each variant reaches 100% test accuracy, its accuracy range, its median final loss, and in how
// many seeds learned projections end with the lowest training loss of the three.
std::string ablation_seed_table(const std::vector<AblationRow>& rows) {
  const int n = static_cast<int>(rows.size());
  std::string t =
      fmt::format("{:<32} {:>12} {:>18} {:>18}\n", "W_Q, W_K, W_V", "100% in", "test acc range", "median final loss");
  std::vector<int> perfect(3, 0);
  std::vector<std::string> stalled;  // the identity's seeds below 100%
  for (int k = 0; k < 3; ++k) {
    double lo = 1, hi = 0;
    std::vector<double> losses;
    for (const AblationRow& r : rows) {
      const double a = r.runs[k].test_accuracy;
      lo = std::min(lo, a), hi = std::max(hi, a), perfect[k] += a >= 0.9995;
      losses.push_back(r.runs[k].final_loss);
      if (k == 1 && a < 0.9995) stalled.push_back(std::to_string(r.seed));
    }
    t += fmt::format("{:<32} {:>6} of {:<3} {:>8.1f}% - {:.1f}% {:>18.4f}\n", variant_name(static_cast<Variant>(k)),
                     perfect[k], n, 100 * lo, 100 * hi, example::median(losses));
  }
  int learned_lowest = 0;
  for (const AblationRow& r : rows)
    learned_lowest += r.runs[0].final_loss <= std::min(r.runs[1].final_loss, r.runs[2].final_loss);
  t += fmt::format("Learned projections end with the lowest training loss of the three in {} of {} seeds.\n",
                   learned_lowest, n);
  if (perfect[1] == n)
    t += fmt::format(
        "Fixed identity reaches 100% test accuracy in all {} seeds: symmetric scores do not stop this "
        "task.\n",
        n);
  else if (perfect[1] == 0)
    t += fmt::format("Fixed identity stays below 100% test accuracy in all {} seeds.\n", n);
  else
    t += fmt::format(
        "Fixed identity reaches 100% test accuracy in {} of {} seeds and stays below it in {} (seed{} {}): symmetric "
        "scores do not rule the task out, but some runs stall.\n",
        perfect[1], n, n - perfect[1], stalled.size() == 1 ? "" : "s", fmt::join(stalled, ", "));
  return t;
}

// What the co-occurrence table shows, computed from it: for each objective, how much closer the
// pairs moved than the control (tokens of different pairs) did, without and with weight decay.
std::string cooccurrence_conclusion(const CooccurrenceResult& first0, const CooccurrenceResult& next0,
                                    const CooccurrenceResult& first1, const CooccurrenceResult& next1) {
  auto gain = [](const CooccurrenceResult& r) { return (r.after - r.before) - (r.other_after - r.other_before); };
  std::string s = fmt::format(
      "Change in cosine, the pairs' minus the control's:\n"
      "  name the first token {:+.3f} without weight decay, {:+.3f} with; predict the next token {:+.3f}, {:+.3f}\n",
      gain(first0), gain(first1), gain(next0), gain(next1));
  // co-occurrence alone, in each setting: closer (> +0.02), apart (< -0.02), or about unmoved
  auto moved = [](double g) { return g > 0.02 ? 1 : g < -0.02 ? -1 : 0; };
  const int without = moved(gain(first0)), with = moved(gain(first1));
  auto in_words = [](int m) { return m > 0 ? "closer" : m < 0 ? "further apart" : "hardly at all"; };
  s += without == with ? fmt::format(
                             "Co-occurrence alone moves a pair {} with and without weight decay, when the task "
                             "must tell the two apart; ",
                             in_words(without))
                       : fmt::format(
                             "Co-occurrence alone moves a pair {} without weight decay and {} with it, when the "
                             "task must tell the two apart; ",
                             in_words(without), in_words(with));
  const bool further = gain(next0) > gain(first0) && gain(next1) > gain(first1);
  s += further ? fmt::format(
                     "an objective that rewards treating them alike moves them further in both settings, to "
                     "{:+.3f} with weight decay (which removes the random parts no objective uses).\n",
                     gain(next1))
               : "an objective that rewards treating them alike does not move them further in both settings.\n";
  return s;
}

void report_cooccurrence(viz::Report& rep, const Config& c) {
  std::string table = fmt::format(
      "Tokens 0-1, 2-3, 4-5, 6-7 appear together (a sequence is 90% one pair). Mean embedding cosine of the pairs,\n"
      "and of tokens from different pairs (the control):\n"
      "  {:<48} {:>12} {:>7} {:>7} {:>15} {:>7}\n",
      "objective (same data)", "weight decay", "before", "after", "control before", "after");
  std::vector<CooccurrenceResult> rs;
  for (double wd : {0.0, 1.0})
    for (Objective o : {Objective::FirstToken, Objective::NextToken}) {
      const CooccurrenceResult r = cooccurrence(c, o, c.steps, wd);
      rs.push_back(r);
      table += fmt::format("  {:<48} {:>12} {:>7.3f} {:>7.3f} {:>15.3f} {:>7.3f}\n",
                           o == Objective::FirstToken ? "name the first token (must tell 0 from 1)"
                                                      : "predict the next token (0 and 1 predict alike)",
                           wd, r.before, r.after, r.other_before, r.other_after);
    }
  table += cooccurrence_conclusion(rs[0], rs[1], rs[2], rs[3]);
  fmt::print("\n{}", table);
  rep.add_note(
      "Do tokens that co-occur get similar embeddings? Nothing in self-attention makes them so; the objective "
      "decides. The same co-occurrence data trains four models:",
      false);
  rep.add_note(table, true);
}

}  // namespace where_weights
