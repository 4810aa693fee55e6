#pragma once
// heads_specialise, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <cmath>

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
// NudgedStart is IdenticalStart with one number of head 1's W_Q moved by 1e-6: is the symmetric
// state stable (the heads drift back together) or unstable (the difference grows)?
enum class Variant { TwoHeads, OneHead, IdenticalStart, NudgedStart };
const char* variant_name(Variant v) {
  return v == Variant::TwoHeads         ? "two heads"
         : v == Variant::OneHead        ? "one head (control)"
         : v == Variant::IdenticalStart ? "two heads, identical start"
                                        : "identical start, nudged";
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
  if (v == Variant::IdenticalStart || v == Variant::NudgedStart) make_heads_identical(m);
  if (v == Variant::NudgedStart) {
    NoGradGuard no_grad;
    Tensor w = m.attn.w_q.weight.data().narrow(0, m.attn.head_dim, 1).narrow(1, 0, 1);  // head 1's first entry
    w.copy_(w + 1e-6);
  }
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

// What a trained head of the two-head run does, from its mean weights over the test set: one
// look-up (at least 0.8 of its weight on t-1, or on position 0) or a mix of the two.
enum class Role { Previous, First, Mixed };
Role role_of(const HeadRoles& r, size_t h) {
  return r.on_prev.at(h) >= 0.8 ? Role::Previous : r.on_first.at(h) >= 0.8 ? Role::First : Role::Mixed;
}
const char* role_name(Role r) { return r == Role::Previous ? "t-1" : r == Role::First ? "x_0" : "mixed"; }

// One row of the seed table: the two-head run at one seed, and where each head looked at step 20,
// the first record after the heads have started to move (the explorer's slider shows the same).
struct SeedRow {
  uint64_t seed = 0;
  double accuracy = 0;
  HeadRoles roles;
  std::vector<double> early_prev;  // each head's weight on t-1 at step 20 (the probe's records)
  std::vector<double> start_prev;  // the same at step 1, one update from the random start
  double nudged_diff = NAN;        // max |W_Q head 0 - head 1| after the NudgedStart run at this seed
  bool clean() const {
    return role_of(roles, 0) != Role::Mixed && role_of(roles, 1) != Role::Mixed &&
           role_of(roles, 0) != role_of(roles, 1);
  }
  bool swapped() const { return clean() && role_of(roles, 0) == Role::First; }
};
SeedRow seed_row(uint64_t seed, const RunResult& r, const RunResult& nudged) {
  SeedRow row{seed, r.full.both, r.roles, {}, {}, nudged.head_diff_end};
  for (const inspect::TelemetryRecord& rec : r.records)
    for (const inspect::HeadScore& h : rec.heads) {
      if (rec.step == 20) row.early_prev.push_back(h.previous_token);
      if (rec.step == 1) row.start_prev.push_back(h.previous_token);
    }
  return row;
}

// The seed table's counts: clean splits (head 0 on t-1, or the roles swapped), the rest (a head
// that mixes), and in how many clean splits the head that leaned more to t-1 at step 1 and at
// step 20 became the t-1 head.
struct SeedSummary {
  int n = 0, clean = 0, swapped = 0, mixed = 0, early_predicts = 0, start_predicts = 0;
  double min_accuracy = 1;
  double nudged_lo = INFINITY, nudged_hi = 0;  // the range of the nudged runs' final difference
  int nudged_close = 0;                        // nudged runs whose heads end within kClose of each other
  double nudged_close_hi = 0;                  // the largest difference among those
  static constexpr double kClose = 1e-3;
};
SeedSummary summarise(const std::vector<SeedRow>& rows) {
  SeedSummary s;
  for (const SeedRow& r : rows) {
    ++s.n, s.min_accuracy = std::min(s.min_accuracy, r.accuracy);
    s.nudged_lo = std::min(s.nudged_lo, r.nudged_diff), s.nudged_hi = std::max(s.nudged_hi, r.nudged_diff);
    if (r.nudged_diff <= SeedSummary::kClose)
      ++s.nudged_close, s.nudged_close_hi = std::max(s.nudged_close_hi, r.nudged_diff);
    if (!r.clean()) {
      ++s.mixed;
      continue;
    }
    ++s.clean, s.swapped += r.swapped();
    const size_t prev_head = role_of(r.roles, 0) == Role::Previous ? 0 : 1;
    if (r.early_prev.size() == 2 && r.early_prev[prev_head] > r.early_prev[1 - prev_head]) ++s.early_predicts;
    if (r.start_prev.size() == 2 && r.start_prev[prev_head] > r.start_prev[1 - prev_head]) ++s.start_predicts;
  }
  return s;
}

// Softmax's shift invariance, on a head's real scores: add a different constant to every row
// (row i gets `shift(i)`) and the weights do not change, since softmax(s + c) = softmax(s) for a
// constant c in the row. Returns the shifted scores (masked entries stay -inf) and the largest
// difference between the two sets of weights.
struct RowShift {
  Tensor shifted;       // (T, T)
  double max_diff = 0;  // max |softmax(shifted) - softmax(scores)|
};
RowShift shift_rows(const Tensor& scores) {
  const int64_t T = scores.size(0);
  std::vector<double> c(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) c[static_cast<size_t>(i)] = 3.0 * static_cast<double>(i % 3) - 3.0;  // -3, 0, +3, ...
  const Tensor s = scores.to(DType::Float64);
  const Tensor shifted = s + from_vector<double>(c, {T, 1});
  return {shifted, max(abs(softmax(shifted, -1) - softmax(s, -1))).item()};
}

// OUT/telemetry.json and OUT/explorer.html (viz/explorer.h) of one run; returns the page's path.
std::string save_explorer(const Config& c, const RunResult& r, const std::string& title) {
  viz::write_file(c.out + "/telemetry.json", r.telemetry_json);
  return viz::write_explorer(c.out + "/explorer.html", title, r.telemetry_json);
}

}  // namespace heads_specialise
