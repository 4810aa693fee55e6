// heads_specialise: "Why several heads? Do they learn different things?"
//
// At position t the model must output the pair (x_{t-1}, x_0) -- the previous token and the
// first token -- as one class out of vocab^2. Three runs of the same model and data:
//   1. two heads: after training we *measure* where each head looks (its mean attention on
//      position t-1 and on position 0) and remove each head in turn (head_mask) to see which
//      half of the answer breaks. Each head does one look-up.
//   2. one head (the control): it solves the task too, by splitting its attention between t-1 and
//      position 0 (a softmax can put weight on two places). Two heads do not make the task
//      possible; they divide cleanly what one head does by splitting.
//   3. two heads started identical (head 1's rows of W_Q, W_K, W_V and its columns of W_O copied
//      from head 0): they receive identical gradients, stay identical and split the same way.
//      Heads differ because random initialisation breaks the symmetry between them.
// Every run records its heads while it trains (inspect::Telemetry); the two-head run's recording
// becomes runs/heads_specialise/explorer.html, where a slider moves over the training steps.
#include <cmath>

#include <CLI/CLI.hpp>

#include "../common/cli.h"      // add_run_options: --gemm, --seed, --out, --threads
#include "../common/numbers.h"  // window_mean, median, median_ms, finite_abs_max
#include "minigrad/minigrad.h"
#include "minigrad/viz/explorer.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace heads_specialise {
using namespace mg;

struct Config {
  int64_t vocab = 6;     // tokens 0..vocab-1; the answer has vocab^2 classes
  int64_t seq_len = 8;   // tokens per sequence
  int64_t dim = 32;      // model width (2 heads of 16, or 1 head of 32)
  int64_t heads = 2;     // attention heads
  int64_t hidden = 128;  // MLP width after attention
  int64_t batch = 64;    // sequences per step
  int steps = 1500;      // AdamW steps
  double lr = 3e-3;      // AdamW learning rate
  int64_t every = 50;    // telemetry every this many steps, and every 5 of the first 100 (where the heads settle)
  uint64_t seed = 0;
  std::string out = "runs/heads_specialise";
};

// ids (B, T) -> logits (B, T, vocab^2)
struct Model : nn::Callable<Model> {
  nn::Embedding tok, pos;
  nn::MultiheadAttention attn;
  nn::Linear fc, out;
  Model(const Config& c, Generator& g)
      : tok(c.vocab, c.dim, {}, g),
        pos(c.seq_len, c.dim, {}, g),
        attn(c.dim, c.heads, {}, g),
        fc(c.dim, c.hidden, {}, g),
        out(c.hidden, c.vocab * c.vocab, {}, g) {
    register_module("tok", tok);
    register_module("pos", pos);
    register_module("attn", attn);
    register_module("fc", fc);
    register_module("out", out);
  }
  Variable forward(const Tensor& ids, const Tensor& head_mask = Tensor()) const {
    Variable x = tok(ids) + pos(arange(ids.size(1)));
    nn::AttentionForwardOptions m;
    m.is_causal = true;
    m.head_mask = head_mask;
    Variable h = attn(x, m).output;  // only what the heads gathered: no residual shortcut
    return out(relu(fc(h)));
  }
  std::string type_name() const override { return "Model"; }
};

struct Batch {
  Tensor ids, targets;  // targets (B, T-1): vocab * x_{t-1} + x_0 for t = 1..T-1
};
Batch make_batch(const Config& c, Generator& g, int64_t n) {
  Tensor ids = randint(0, c.vocab, {n, c.seq_len}, g);
  Tensor prev = ids.narrow(1, 0, c.seq_len - 1), first = ids.narrow(1, 0, 1);
  return {ids, (prev * static_cast<double>(c.vocab) + first).contiguous()};
}

Variable loss_of(const Model& m, const Batch& b, const Config& c) {
  Variable logits = narrow(m(b.ids), 1, 1, c.seq_len - 1);  // positions 1..T-1
  return cross_entropy(reshape(logits, {-1, c.vocab * c.vocab}), b.targets.reshape({-1}));
}

struct HalfAccuracy {
  double prev, first, both;  // was the x_{t-1} half right, the x_0 half, the whole pair
};
HalfAccuracy evaluate(const Model& m, const Batch& b, const Config& c, const Tensor& head_mask = Tensor()) {
  NoGradGuard no_grad;
  Tensor pred = argmax(m(b.ids, head_mask).data().narrow(1, 1, c.seq_len - 1), -1);
  const std::vector<int64_t> p = pred.to_vector<int64_t>(), t = b.targets.to_vector<int64_t>();
  double prev = 0, first = 0, both = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    prev += p[i] / c.vocab == t[i] / c.vocab, first += p[i] % c.vocab == t[i] % c.vocab, both += p[i] == t[i];
  }
  const double n = static_cast<double>(p.size());
  return {prev / n, first / n, both / n};
}

// Give head 1 exactly head 0's weights: its rows of W_Q, W_K, W_V (and their biases) and its
// columns of W_O. The two heads then compute the same thing and receive the same gradients.
void make_heads_identical(Model& m) {
  NoGradGuard no_grad;
  const int64_t d = m.attn.head_dim;
  for (nn::Linear* l : {&m.attn.w_q, &m.attn.w_k, &m.attn.w_v}) {
    l->weight.data().narrow(0, d, d).copy_(l->weight.data().narrow(0, 0, d));
    l->bias.data().narrow(0, d, d).copy_(l->bias.data().narrow(0, 0, d));
  }
  Tensor w_o = m.attn.w_o.weight.data();
  w_o.narrow(1, d, d).copy_(w_o.narrow(1, 0, d));
}

// The largest difference between head 0's and head 1's rows of W_Q (0: the heads are identical).
double head_difference(const Model& m) {
  const int64_t d = m.attn.head_dim;
  const Tensor w = m.attn.w_q.weight.data();
  return max(abs(w.narrow(0, 0, d) - w.narrow(0, d, d))).item();
}

struct HeadRoles {
  std::vector<double> on_prev, on_first;  // mean attention weight on t-1 and on 0, per head, over t >= 2
  std::vector<Tensor> example;            // (T, T) attention weights of each head on one sequence
  std::vector<Tensor> example_scores;     // (T, T) its scores before softmax (-inf above the diagonal)
  std::vector<Tensor> mean;               // (T, T) attention weights averaged over the whole batch
  std::vector<std::string> tokens;        // the one sequence, "x0=3", "x1=5", ...
};
HeadRoles measure_heads(Model& m, const Batch& b, const Config& c) {
  NoGradGuard no_grad;
  inspect::AttentionCapture cap(m);
  m(b.ids);
  const Tensor w = cap.at("attn").weights, sc = cap.at("attn").scores;  // (B, H, T, T)
  HeadRoles r;
  const Tensor row = b.ids.narrow(0, 0, 1).contiguous();
  for (int64_t t = 0; t < c.seq_len; ++t) r.tokens.push_back(fmt::format("x{}={}", t, row.data<int64_t>()[t]));
  for (int64_t h = 0; h < c.heads; ++h) {
    double prev = 0, first = 0;
    int64_t count = 0;
    for (int64_t t = 2; t < c.seq_len; ++t) {
      prev += mean(w.narrow(1, h, 1).narrow(2, t, 1).narrow(3, t - 1, 1)).item();
      first += mean(w.narrow(1, h, 1).narrow(2, t, 1).narrow(3, 0, 1)).item();
      ++count;
    }
    r.on_prev.push_back(prev / count), r.on_first.push_back(first / count);
    r.example.push_back(w.narrow(0, 0, 1).narrow(1, h, 1).reshape({c.seq_len, c.seq_len}).contiguous());
    r.example_scores.push_back(sc.narrow(0, 0, 1).narrow(1, h, 1).reshape({c.seq_len, c.seq_len}).contiguous());
    r.mean.push_back(mean(w.narrow(1, h, 1), {0, 1}));
  }
  return r;
}

// The probe the telemetry watches: 8 sequences from a generator of their own (the training's is
// untouched), and row 0's labels "x0=3", "x1=5", ...: the task's names for the position and its token.
Tensor telemetry_probe(const Config& c) {
  Generator g(c.seed + 99);
  return make_batch(c, g, 8).ids;
}
std::vector<std::string> token_labels(const Tensor& probe) {
  std::vector<std::string> out;
  const Tensor row = probe.narrow(0, 0, 1).contiguous();
  for (int64_t t = 0; t < row.numel(); ++t) out.push_back(fmt::format("x{}={}", t, row.data<int64_t>()[t]));
  return out;
}

std::vector<double> train(Model& m, const Config& c, Generator& g, inspect::Telemetry& tel) {
  optim::AdamW opt(m.parameters(), {.lr = c.lr});
  viz::ProgressBar bar(c.steps, "train");
  std::vector<double> losses;
  for (int step = 1; step <= c.steps; ++step) {
    Batch b = make_batch(c, g, c.batch);
    Variable loss = loss_of(m, b, c);
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
    if (tel.due(step) || (step <= 100 && step % 5 == 0)) tel.record(step, loss.item());  // densely while it learns
    bar.update(step, loss.item(), -1, c.batch * c.seq_len);
  }
  bar.finish();
  return losses;
}

// The three runs of the experiment, on the same data from the same seed.
enum class Variant { TwoHeads, OneHead, IdenticalStart };
const char* variant_name(Variant v) {
  return v == Variant::TwoHeads  ? "two heads"
         : v == Variant::OneHead ? "one head (control)"
                                 : "two heads, identical start";
}

struct RunResult {
  HalfAccuracy full;                  // on the test batch, all heads in use
  std::vector<HalfAccuracy> ablated;  // head h removed (two-head runs)
  HeadRoles roles;
  std::vector<double> losses;
  double head_diff_start = 0, head_diff_end = 0;  // max |W_Q head 0 - head 1| before / after training
  std::vector<inspect::TelemetryRecord> records;  // step 1, every 5 up to 100, every c.every
  std::string telemetry_json;                     // the same, as inspect::Telemetry writes it
};

RunResult run(Config c, Variant v, int64_t test_size = 512) {
  c.heads = v == Variant::OneHead ? 1 : 2;
  Generator g(c.seed);  // W_Q, W_K, W_V, W_O are (dim, dim) for any head count: the same initial numbers
  Model m(c, g);
  if (v == Variant::IdenticalStart) make_heads_identical(m);
  RunResult r;
  if (c.heads == 2) r.head_diff_start = head_difference(m);
  const Tensor probe = telemetry_probe(c);
  inspect::Telemetry tel(
      m, [&](const Tensor& ids) { m(ids); },
      {.vocab = c.vocab, .probe = probe, .tokens = token_labels(probe), .pattern_length = c.seq_len, .every = c.every});
  r.losses = train(m, c, g, tel);
  r.records = tel.records();
  r.telemetry_json =
      tel.json({{"example", "heads_specialise"}, {"run", variant_name(v)}, {"steps", std::to_string(c.steps)}});
  if (c.heads == 2) r.head_diff_end = head_difference(m);
  const Batch test = make_batch(c, g, test_size);
  r.full = evaluate(m, test, c);
  r.roles = measure_heads(m, test, c);
  if (c.heads == 2)
    for (int h = 0; h < 2; ++h)
      r.ablated.push_back(evaluate(m, test, c, from_vector<float>({h == 0 ? 0.f : 1.f, h == 1 ? 0.f : 1.f}, {2})));
  return r;
}

// OUT/telemetry.json and OUT/explorer.html (viz/explorer.h) of one run; returns the page's path.
std::string save_explorer(const Config& c, const RunResult& r, const std::string& title) {
  viz::write_file(c.out + "/telemetry.json", r.telemetry_json);
  return viz::write_explorer(c.out + "/explorer.html", title, r.telemetry_json);
}

}  // namespace heads_specialise

#ifndef MG_EXAMPLE_NO_MAIN
int main(int argc, char** argv) {
  using namespace heads_specialise;
  Config c;
  CLI::App app{"heads_specialise: why several heads, and why they differ"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--steps", c.steps, "training steps");
  app.add_option("--lr", c.lr, "AdamW learning rate");
  app.add_option("--every", c.every, "telemetry every this many steps");
  CLI11_PARSE(app, argc, argv);

  fmt::print("task: at position t, output (x_{{t-1}}, x_0) as one of {} classes\n", c.vocab * c.vocab);
  std::vector<RunResult> runs;
  for (Variant v : {Variant::TwoHeads, Variant::OneHead, Variant::IdenticalStart}) {
    fmt::print("\n-- {} --\n", variant_name(v));
    runs.push_back(run(c, v));
  }
  const RunResult &two = runs[0], &one = runs[1], &same = runs[2];

  viz::Report rep(
      c.out, "heads_specialise: why several heads, and why they differ",
      "At position t the model must output the previous token and the first token. The same model is trained "
      "three times on the same data: with two heads, with one head, and with two heads that start identical.");
  std::string t1 = fmt::format("{:<28} {:>6} {:>10} {:>18} {:>24}\n", "run", "head", "accuracy", "attention on t-1",
                               "attention on position 0");
  for (size_t k = 0; k < runs.size(); ++k)
    for (size_t h = 0; h < runs[k].roles.on_prev.size(); ++h)
      t1 += fmt::format("{:<28} {:>6} {:>9.1f}% {:>18.3f} {:>24.3f}\n",
                        h == 0 ? variant_name(static_cast<Variant>(k)) : "", h, 100 * runs[k].full.both,
                        runs[k].roles.on_prev[h], runs[k].roles.on_first[h]);
  std::string t2 = fmt::format("{:<18} {:>16} {:>16} {:>12}\n", "heads used", "x_{t-1} correct", "x_0 correct", "both");
  auto row = [](const std::string& name, const HalfAccuracy& a) {
    return fmt::format("{:<18} {:>15.1f}% {:>15.1f}% {:>11.1f}%\n", name, 100 * a.prev, 100 * a.first, 100 * a.both);
  };
  t2 += row("both", two.full);
  for (int h = 0; h < 2; ++h) t2 += row(fmt::format("head {} removed", h), two.ablated[h]);
  const std::string t3 = fmt::format(
      "identical start: max |W_Q head 0 - head 1| = {:.1e} before training, {:.1e} after {} steps\n"
      "random start:    max |W_Q head 0 - head 1| = {:.2f} before training, {:.2f} after {} steps\n",
      same.head_diff_start, same.head_diff_end, c.steps, two.head_diff_start, two.head_diff_end, c.steps);
  fmt::print("\nWhere each head looks (mean over positions t >= 2 of 512 test sequences):\n{}", t1);
  fmt::print(
      "\nHead ablation in the two-head run (chance for one half is {:.1f}%; at t = 1 the previous token *is*\n"
      "the first token, so a model that keeps only the x_0 head still gets 1 of the 7 positions right):\n{}",
      100.0 / c.vocab, t2);
  fmt::print("\nWhy do the heads differ?\n{}", t3);
  rep.add_note(
      "Where each head looks, measured. One head already solves the task by splitting its attention between "
      "t-1 and position 0; two heads divide that work cleanly, one look-up each. Two heads that start identical "
      "stay identical and split the same way as the single head.",
      false);
  rep.add_note(t1, true);
  rep.add_note(
      "Remove one head of the two-head run (its output multiplied by 0 before W_O) and see which half of the "
      "answer breaks:",
      false);
  rep.add_note(t2, true);
  rep.add_note(
      "Why do heads differ? Identical heads receive identical gradients, so nothing can ever pull them apart: "
      "the random initialisation is what breaks the symmetry.",
      false);
  rep.add_note(t3, true);
  std::vector<std::string> pos;
  for (int64_t i = 0; i < c.seq_len; ++i) pos.push_back(std::to_string(i));
  // Weights on one shared scale, [0, 1]; scores (before softmax) in diverging colours, the masked
  // future hatched grey, both heads on one scale. The one sequence is labelled with its tokens.
  const std::vector<std::string>& toks = two.roles.tokens;
  auto weights_map = [&](const std::string& file, const Tensor& w, const std::string& title,
                         const std::vector<std::string>& labels, const std::string& caption) {
    rep.add_svg(file,
                viz::heatmap_svg(w, {.title = title,
                                     .row_labels = labels,
                                     .col_labels = labels,
                                     .row_title = "query",
                                     .col_title = "key",
                                     .vmin = 0,
                                     .vmax = 1}),
                caption);
  };
  double score_range = 0;  // one colour scale for both heads' scores
  for (int h = 0; h < 2; ++h) score_range = std::max(score_range, example::finite_abs_max(two.roles.example_scores[h]));
  for (int h = 0; h < 2; ++h) {
    fmt::print("\ntwo heads, head {} on one test sequence: scores before softmax (masked: the future)\n{}", h,
               viz::terminal_heatmap(two.roles.example_scores[h], toks, toks));
    fmt::print("two heads, head {} on the same sequence: weights after softmax\n{}", h,
               viz::terminal_heatmap(two.roles.example[h], toks, toks));
    rep.add_svg(fmt::format("head{}_scores.svg", h),
                viz::heatmap_svg(two.roles.example_scores[h], {.title = fmt::format("Head {}: scores, one sequence", h),
                                                               .row_labels = toks,
                                                               .col_labels = toks,
                                                               .row_title = "query",
                                                               .col_title = "key",
                                                               .diverging = true,
                                                               .vmin = -score_range,
                                                               .vmax = score_range}),
                fmt::format("Two-head run, head {}, one test sequence (its tokens on both axes): the scores "
                            "q.k / sqrt(d_k) before softmax; hatched grey: the future, masked. Both heads on one "
                            "colour scale.",
                            h));
    weights_map(fmt::format("head{}.svg", h), two.roles.example[h], fmt::format("Head {}: weights, one sequence", h),
                toks,
                fmt::format("The same sequence after softmax: head {} puts {:.2f} of its weight on the previous token "
                            "and {:.2f} on the first, on average over the test set.",
                            h, two.roles.on_prev[h], two.roles.on_first[h]));
    weights_map(fmt::format("head{}_mean.svg", h), two.roles.mean[h], fmt::format("Head {}: weights, mean of 512", h),
                pos,
                fmt::format("Head {}'s weights averaged over the 512 test sequences (positions on the axes, since "
                            "the tokens differ): the pattern does not depend on which tokens are there.",
                            h));
  }
  fmt::print("\none head, on the same test sequence\n{}", viz::terminal_heatmap(one.roles.example[0], pos, pos));
  weights_map("one_head.svg", one.roles.example[0], "One head: weights, one sequence", toks,
              fmt::format("The one-head control on the same sequence: it splits its attention, {:.2f} on the previous "
                          "token and {:.2f} on the first (means over the test set).",
                          one.roles.on_prev[0], one.roles.on_first[0]));
  for (int h = 0; h < 2; ++h)
    weights_map(fmt::format("identical_head{}.svg", h), same.roles.example[h],
                fmt::format("Identical start: head {}, one sequence", h), toks,
                fmt::format("Two heads that started identical, head {}, on the same sequence: {:.2f} on the previous "
                            "token, {:.2f} on the first, like the single head.",
                            h, same.roles.on_prev[h], same.roles.on_first[h]));
  std::vector<viz::Series> curves;
  for (size_t k = 0; k < runs.size(); ++k)
    curves.push_back(viz::Series::over_steps(variant_name(static_cast<Variant>(k)), runs[k].losses));
  rep.add_svg("loss.svg",
              viz::line_chart_svg(
                  curves, {.title = "Training loss", .x_label = "step", .y_label = "cross-entropy", .log_y = true}),
              "Loss of the three runs: all three solve the task.");
  fmt::print("\npictures: {}\n", rep.write_index());
  fmt::print("explorer: {}\n", save_explorer(c, two, "heads_specialise: two heads"));
  // What the explorer's slider shows over the first steps, as numbers: each head's mean weight on
  // t - 1 and on position 0 in the recorded probe.
  fmt::print("the explorer's records (two heads; head: on t-1 / on position 0):\n");
  for (const inspect::TelemetryRecord& rec : two.records)
    if (rec.step == 1 || rec.step == 20 || rec.step == 40 || rec.step == 50) {
      fmt::print("  step {:>3}:", rec.step);
      for (const inspect::HeadScore& h : rec.heads)
        fmt::print("  head {} {:.2f} / {:.2f}", h.head, h.previous_token, h.first_token);
      fmt::print("\n");
    }
  return two.full.both >= 0.95 && one.full.both >= 0.95 ? 0 : 1;
}
#endif
