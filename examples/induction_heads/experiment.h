#pragma once
// induction_heads, the experiment: the attention-only model, the repeated-span data, training with
// telemetry, where layer 0 looks, removing heads and the induction head's circuits. The tests include
// it; main.cpp runs it and prints what it measured, report.h draws it.

#include <cmath>

#include "../common/numbers.h"  // window_mean, median, median_ms, finite_abs_max
#include "minigrad/minigrad.h"
#include "minigrad/viz/explorer.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace induction_heads {
using namespace mg;

struct Config {
  int64_t vocab = 32;    // random tokens 0..vocab-1
  int64_t seq_len = 48;  // tokens per sequence
  int64_t span_min = 8;  // the repeated span's length is drawn from [span_min, span_max]
  int64_t span_max = 24;
  int64_t dim = 64;    // residual stream width
  int64_t heads = 4;   // heads per layer
  int64_t layers = 2;  // 2: the induction circuit; 1: the control that cannot build it
  int64_t batch = 32;  // sequences per step
  int steps = 1500;    // AdamW steps
  double lr = 2e-3;    // AdamW learning rate
  int64_t every = 25;  // telemetry every this many steps
  uint64_t seed = 0;   // same seed, same run
  std::string out = "runs/induction_heads";
};

/// A ValueError naming the flag when a setting cannot make a run: a span needs 2 tokens to predict
/// one by induction, and two copies of the longest span must fit in a sequence.
inline void validate(const Config& c) {
  MG_CHECK(c.vocab >= 2, ValueError, "induction_heads: --vocab must be at least 2, got {}", c.vocab);
  MG_CHECK(c.span_min >= 2 && c.span_min <= c.span_max, ValueError,
           "induction_heads: need 2 <= --span-min <= --span-max, got {} and {}", c.span_min, c.span_max);
  MG_CHECK(c.span_max <= c.seq_len / 2, ValueError,
           "induction_heads: --span-max {} does not fit twice in --seq-len {} (at most {})", c.span_max, c.seq_len,
           c.seq_len / 2);
  MG_CHECK(c.heads >= 1 && c.dim >= c.heads && c.dim % c.heads == 0, ValueError,
           "induction_heads: --dim {} must be a positive multiple of --heads {}", c.dim, c.heads);
  MG_CHECK(c.batch >= 1 && c.steps >= 1 && c.every >= 1, ValueError,
           "induction_heads: --batch, --steps and --every must be at least 1, got {}, {} and {}", c.batch, c.steps,
           c.every);
  MG_CHECK(std::isfinite(c.lr) && c.lr > 0, ValueError, "induction_heads: --lr must be positive, got {}", c.lr);
}

// ids (B, T) -> logits (B, T, vocab): x = tok + pos; x += attn_l(x) per layer; logits = x W_U^T
struct Model : nn::Callable<Model> {
  nn::Embedding tok, pos;
  std::vector<std::unique_ptr<nn::MultiheadAttention>> attn;
  nn::Linear unembed;
  Model(const Config& c, Generator& g)
      : tok(c.vocab, c.dim, {}, g), pos(c.seq_len, c.dim, {}, g), unembed(c.dim, c.vocab, {.bias = false}, g) {
    register_module("tok", tok);
    register_module("pos", pos);
    for (int64_t l = 0; l < c.layers; ++l) {
      attn.push_back(
          std::make_unique<nn::MultiheadAttention>(c.dim, c.heads, nn::MultiheadAttentionOptions{.bias = false}, g));
      register_module(fmt::format("attn{}", l), *attn.back());
    }
    register_module("unembed", unembed);
  }
  // head_masks[l] (H) multiplies layer l's heads (0 removes one); empty: all heads.
  Variable forward(const Tensor& ids, const std::vector<Tensor>& head_masks = {}) const {
    Variable x = tok(ids) + pos(arange(ids.size(1)));
    for (size_t l = 0; l < attn.size(); ++l)
      x = x + (*attn[l])(x, {.is_causal = true, .head_mask = l < head_masks.size() ? head_masks[l] : Tensor()}).output;
    return unembed(x);
  }
  std::string type_name() const override { return "AttentionOnly"; }
};

struct Batch {
  Tensor ids;      // (B, T)
  Tensor in_span;  // (B, T) Bool: position t's *next* token is predictable (inside the second copy)
  // (B, T) Bool: position t is a key the induction head needs, one inside the first copy after its
  // first token (its previous token is the one a query in the second copy looks for)
  Tensor key_needed;
};

// Random tokens with one span of random length copied to a later random place.
Batch make_batch(const Config& c, Generator& g, int64_t n) {
  Batch b{randint(0, c.vocab, {n, c.seq_len}, g), zeros({n, c.seq_len}, DType::Bool),
          zeros({n, c.seq_len}, DType::Bool)};
  int64_t* ids = b.ids.data<int64_t>();
  bool* pred = b.in_span.data<bool>();
  bool* needed = b.key_needed.data<bool>();
  auto draw = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(g.next_u64() % static_cast<uint64_t>(hi - lo + 1));
  };
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = draw(c.span_min, c.span_max);
    const int64_t first = draw(0, c.seq_len - 2 * len);         // where the span starts
    const int64_t second = draw(first + len, c.seq_len - len);  // where its copy starts
    for (int64_t k = 0; k < len; ++k) ids[i * c.seq_len + second + k] = ids[i * c.seq_len + first + k];
    // predicting token second + k (k >= 1) from position second + k - 1 is induction
    for (int64_t k = 1; k < len; ++k) pred[i * c.seq_len + second + k - 1] = true;
    // ... by attending to first + k, whose previous token is the query's token
    for (int64_t k = 1; k < len; ++k) needed[i * c.seq_len + first + k] = true;
  }
  return b;
}

Variable loss_of(const Model& m, const Batch& b, const std::vector<Tensor>& masks = {}) {
  const int64_t T = b.ids.size(1);
  Variable logits = narrow(m(b.ids, masks), 1, 0, T - 1);
  return cross_entropy(reshape(logits, {-1, m.unembed.out_features}),
                       b.ids.narrow(1, 1, T - 1).contiguous().reshape({-1}));
}

struct SpanScore {
  double accuracy = 0;  // next-token accuracy inside the second copy
  double loss = 0;      // next-token loss there
};
SpanScore span_score(const Model& m, const Batch& b, const std::vector<Tensor>& masks = {}) {
  NoGradGuard no_grad;
  const int64_t T = b.ids.size(1), V = m.unembed.out_features;
  const Tensor logits = m(b.ids, masks).data().narrow(1, 0, T - 1).contiguous();
  const Tensor next = b.ids.narrow(1, 1, T - 1).contiguous();
  const Tensor where = b.in_span.narrow(1, 0, T - 1).contiguous();
  const Tensor nll = -gather(log_softmax(logits, -1), 2, next.unsqueeze(2)).squeeze(2);
  const Tensor hit = eq(argmax(logits, -1), next);
  const bool* w = where.data<bool>();
  const float* l = nll.data<float>();
  const bool* h = hit.data<bool>();
  double n = 0, acc = 0, loss = 0;
  for (int64_t i = 0; i < where.numel(); ++i)
    if (w[i]) n += 1, acc += h[i], loss += l[i];
  (void)V;
  return {acc / n, loss / n};
}

struct RunResult {
  std::vector<double> losses;                     // per step
  std::vector<inspect::TelemetryRecord> records;  // every c.every steps
  std::string telemetry_json;
  SpanScore final_span;
  int64_t phase_step = -1;  // the first recorded step whose ICL score is past half of its total change
  inspect::HeadScore prev_head, induction_head;  // the strongest of each kind at the end (layer 0 / last layer)
};

// The scores of head `h` of layer `l` in a record.
const inspect::HeadScore& score_of(const inspect::TelemetryRecord& r, const std::string& layer, int64_t h) {
  for (const inspect::HeadScore& s : r.heads)
    if (s.layer == layer && s.head == h) return s;
  throw ValueError(fmt::format("no head {} in {}", h, layer));
}

RunResult train(Model& m, const Config& c, Generator& g) {
  RunResult r;
  optim::AdamW opt(m.parameters(), {.lr = c.lr, .weight_decay = 0.01});
  // Telemetry: a fixed probe of the training distribution; random spans of length seq_len / 2
  // repeated twice for the induction, copying and ICL scores.
  Generator probe_gen(c.seed + 99);
  const Batch probe = make_batch(c, probe_gen, 8);
  inspect::Telemetry tel(
      m, [&](const Tensor& ids) { m(ids); },
      {.vocab = c.vocab,
       .probe = probe.ids,
       .pattern_length = c.seq_len,
       .every = c.every,
       .scores = {.induction_length = c.seq_len / 2, .logits = [&](const Tensor& ids) { return m(ids); }}});
  viz::ProgressBar bar(c.steps, fmt::format("{}-layer", c.layers));
  for (int step = 1; step <= c.steps; ++step) {
    const Batch b = make_batch(c, g, c.batch);
    Variable loss = loss_of(m, b);
    opt.zero_grad();
    loss.backward();
    opt.step();
    r.losses.push_back(loss.item());
    if (tel.due(step)) tel.record(step, loss.item());
    bar.update(step, loss.item(), -1, c.batch * c.seq_len);
  }
  bar.finish();
  r.records = tel.records();
  r.telemetry_json = tel.json({{"example", "induction_heads"}, {"layers", std::to_string(c.layers)}});
  Generator test_gen(c.seed + 1000);
  r.final_span = span_score(m, make_batch(c, test_gen, 512));
  // The phase change: where the ICL score has made half of its total move.
  const double first = r.records.front().icl.score, last = r.records.back().icl.score;
  for (const inspect::TelemetryRecord& rec : r.records)
    if (std::abs(rec.icl.score - first) >= 0.5 * std::abs(last - first)) {
      r.phase_step = rec.step;
      break;
    }
  const inspect::TelemetryRecord& end = r.records.back();
  r.prev_head = r.induction_head = end.heads.front();
  r.prev_head.previous_token = r.induction_head.induction = -1;
  for (const inspect::HeadScore& s : end.heads) {
    if (s.layer == "attn0" && s.previous_token > r.prev_head.previous_token) r.prev_head = s;
    if (s.layer == fmt::format("attn{}", c.layers - 1) && s.induction > r.induction_head.induction)
      r.induction_head = s;
  }
  return r;
}

// Where along the sequence layer 0's heads look at t - 1, beside where the induction head needs
// a key that carries its previous token. Measured on 512 fresh sequences, per query position t.
struct PositionProfile {
  std::vector<std::vector<double>> previous;  // [head][t]: mean attention weight from t to t - 1 (t >= 1)
  std::vector<double> needed;                 // [t]: fraction of sequences in which key t is needed
};

PositionProfile position_profile(Model& m, const Config& c) {
  NoGradGuard no_grad;
  Generator g(c.seed + 2000);
  const Batch b = make_batch(c, g, 512);
  inspect::AttentionCapture cap(m);
  m(b.ids);
  const Tensor w = mean(cap.at("attn0").weights, {0}).to(DType::Float64).contiguous();  // (H, T, T)
  const Tensor need = mean(b.key_needed.to(DType::Float64), {0}).contiguous();          // (T)
  const int64_t T = c.seq_len;
  PositionProfile p;
  p.previous.assign(static_cast<size_t>(c.heads), std::vector<double>(static_cast<size_t>(T), 0.0));
  for (int64_t h = 0; h < c.heads; ++h)
    for (int64_t t = 1; t < T; ++t) p.previous[h][t] = w.data<double>()[(h * T + t) * T + t - 1];
  p.needed.assign(need.data<double>(), need.data<double>() + T);
  return p;
}

// The profile in bands of 8 query positions: each layer-0 head's mean weight on t - 1, and how
// often a key in the band is one the induction head needs.
std::string profile_table(const PositionProfile& p, const Config& c) {
  const int64_t T = c.seq_len, band = 8;
  std::string s = fmt::format("  {:<26}", "query positions t");
  for (int64_t lo = 0; lo < T; lo += band)
    s += fmt::format("{:>8}", fmt::format("{}-{}", std::max<int64_t>(lo, 1), std::min(lo + band, T) - 1));
  auto row = [&](const std::string& name, const std::vector<double>& v) {
    s += fmt::format("\n  {:<26}", name);
    for (int64_t lo = 0; lo < T; lo += band) {
      double sum = 0;
      int64_t n = 0;
      for (int64_t t = std::max<int64_t>(lo, 1); t < std::min(lo + band, T); ++t) sum += v[t], ++n;
      s += fmt::format("{:>8.2f}", sum / static_cast<double>(n));
    }
  };
  for (int64_t h = 0; h < c.heads; ++h) row(fmt::format("attn0 head {}: w[t, t-1]", h), p.previous[h]);
  row("key t needed (share)", p.needed);
  return s + "\n";
}

// Where keys are needed in at least 10% of sequences, and where they are not: the mean over those
// positions of the best layer-0 head's weight on t - 1 (the best head at each t).
struct ProfileSplit {
  double where_needed = 0, elsewhere = 0;
  int64_t first_unneeded = 0;  // the first t after which no key is needed in 10% of sequences
};

ProfileSplit split_profile(const PositionProfile& p) {
  ProfileSplit r;
  double a = 0, b = 0;
  int64_t na = 0, nb = 0;
  const auto T = static_cast<int64_t>(p.needed.size());
  for (int64_t t = 1; t < T; ++t) {
    double best = 0;
    for (const auto& h : p.previous) best = std::max(best, h[t]);
    if (p.needed[t] >= 0.1)
      a += best, ++na, r.first_unneeded = t + 1;
    else
      b += best, ++nb;
  }
  r.where_needed = na ? a / static_cast<double>(na) : 0;
  r.elsewhere = nb ? b / static_cast<double>(nb) : 0;
  return r;
}

// One head's pattern on random tokens repeated twice, r_1..r_n r_1..r_n (n = seq_len / 2): its
// scores and weights on one such sequence, and its weights averaged over 64 of them.
struct HeadMaps {
  Tensor scores, weights, mean;     // (T, T) each; scores -inf where the causal mask forbids
  std::vector<std::string> tokens;  // the one sequence's tokens
};

HeadMaps head_maps(Model& m, const Config& c, const std::string& layer, int64_t head) {
  NoGradGuard no_grad;
  Generator g(c.seed + 555);
  const Tensor half = randint(0, c.vocab, {64, c.seq_len / 2}, g);
  const Tensor ids = concat({half, half}, 1);
  inspect::AttentionCapture cap(m);
  m(ids);
  const int64_t T = ids.size(1);
  const Tensor w = cap.at(layer).weights.narrow(1, head, 1), s = cap.at(layer).scores.narrow(1, head, 1);
  HeadMaps r{s.narrow(0, 0, 1).reshape({T, T}).contiguous(),
             w.narrow(0, 0, 1).reshape({T, T}).contiguous(),
             mean(w, {0, 1}),
             {}};
  for (int64_t t = 0; t < T; ++t) r.tokens.push_back(std::to_string(ids.data<int64_t>()[t]));
  return r;
}

// ---- interventions -----------------------------------------------------------------------
struct Ablation {
  std::string removed;         // which heads, in words
  std::vector<int64_t> heads;  // layer 0's heads removed
  SpanScore span;              // repeated-span accuracy and loss without it
  double induction = 0;        // the induction head's induction score without it
};

// Layer 0's heads split in two: those labelled previous-token at the end of training, and the rest.
std::vector<int64_t> layer0_heads(const RunResult& r, bool previous_token) {
  std::vector<int64_t> out;
  for (const inspect::HeadScore& s : r.records.back().heads)
    if (s.layer == "attn0" && (s.label == "previous token") == previous_token) out.push_back(s.head);
  return out;
}

std::string head_list(const std::vector<int64_t>& heads) {
  std::string s;
  for (int64_t h : heads) s += (s.empty() ? "" : ",") + std::to_string(h);
  return s;
}

// Rows: nothing removed; the strongest previous-token head; every previous-token head of layer 0;
// every other head of layer 0. Each row: span accuracy and loss on 512 fresh sequences, and the
// induction head's induction score, with those heads multiplied by 0 (head_mask).
std::vector<Ablation> ablate(Model& m, const Config& c, const RunResult& r) {
  Generator test_gen(c.seed + 1000);
  const Batch test = make_batch(c, test_gen, 512);
  Generator probe_gen(c.seed + 99);
  const Tensor probe = make_batch(c, probe_gen, 8).ids;
  const std::vector<int64_t> prev = layer0_heads(r, true), others = layer0_heads(r, false);
  std::vector<std::pair<std::string, std::vector<int64_t>>> rows = {
      {"none", {}}, {fmt::format("attn0 head {} (strongest previous-token)", r.prev_head.head), {r.prev_head.head}}};
  if (prev.size() > 1) rows.push_back({fmt::format("attn0 heads {} (all previous-token)", head_list(prev)), prev});
  if (!others.empty()) rows.push_back({fmt::format("attn0 heads {} (all the others)", head_list(others)), others});
  std::vector<Ablation> out;
  for (const auto& [name, removed] : rows) {
    std::vector<Tensor> masks;
    if (!removed.empty()) {
      Tensor mask = ones({c.heads});
      for (int64_t h : removed) mask.data<float>()[h] = 0;
      masks = {mask};
    }
    Ablation a;
    a.removed = name;
    a.heads = removed;
    a.span = span_score(m, test, masks);
    const auto scores = inspect::score_heads(m, [&](const Tensor& ids) { m(ids, masks); }, probe, c.vocab,
                                             {.induction_length = c.seq_len / 2});
    for (const inspect::HeadScore& s : scores)
      if (s.layer == r.induction_head.layer && s.head == r.induction_head.head) a.induction = s.induction;
    out.push_back(a);
  }
  return out;
}

// ---- circuits ----------------------------------------------------------------------------
// The induction head's circuits over the vocabulary, direct paths only (Elhage et al.), with
// W's as nn::Linear stores them (out, in) and E the token embedding (vocab, dim):
//   OV: E W_V^T W_O^T W_U^T  (vocab, vocab): row = the token attended to, column = the logit it
//       raises. A copying head has a dominant diagonal.
//   QK through the previous-token head (K-composition): E W_Q^T W_K (E W_V0^T W_O0^T)^T:
//       row = the query's token, column = the token *before* the key. An induction head matches
//       a query to keys whose previous token equals its own: a dominant diagonal.
//   OV of the whole last layer: the sum over its heads, E W_V^T W_O^T W_U^T with the full
//       (E, E) matrices (W_O's column blocks times W_V's row blocks, summed, is W_O W_V).
struct Circuits {
  Tensor ov, qk, ov_layer;
  double ov_diagonal = 0, qk_diagonal = 0,
         ov_layer_diagonal = 0;  // fraction of rows whose largest entry is on the diagonal
};

Tensor head_rows(const Tensor& w, int64_t h, int64_t d) {
  return w.narrow(0, h * d, d);
}  // (d, in) of an (E, in) weight

Circuits circuits(const Model& m, const RunResult& r) {
  NoGradGuard no_grad;
  const nn::MultiheadAttention& l1 = *m.attn.back();
  const nn::MultiheadAttention& l0 = *m.attn.front();
  const int64_t d = l1.head_dim, h = r.induction_head.head, p = r.prev_head.head;
  const Tensor E = m.tok.weight.data(), U = m.unembed.weight.data();  // (V, D) each
  auto t = [](const Tensor& x) { return x.transpose(0, 1); };
  // head h's value and output maps: v = x W_V[h]^T (d), out = v W_O[:, h]^T (D)
  const Tensor Wv1 = head_rows(l1.w_v.weight.data(), h, d), Wo1 = l1.w_o.weight.data().narrow(1, h * d, d);
  const Tensor Wq1 = head_rows(l1.w_q.weight.data(), h, d), Wk1 = head_rows(l1.w_k.weight.data(), h, d);
  const Tensor Wv0 = head_rows(l0.w_v.weight.data(), p, d), Wo0 = l0.w_o.weight.data().narrow(1, p * d, d);
  Circuits c;
  c.ov = matmul(matmul(matmul(E, t(Wv1)), t(Wo1)), t(U));         // (V, V)
  const Tensor prev_out = matmul(matmul(E, t(Wv0)), t(Wo0));      // what the previous-token head writes for each token
  c.qk = matmul(matmul(E, t(Wq1)), t(matmul(prev_out, t(Wk1))));  // (V, V)
  auto diag_frac = [](const Tensor& x) {
    const Tensor best = argmax(x, 1).contiguous();
    double n = 0;
    for (int64_t i = 0; i < best.numel(); ++i) n += best.data<int64_t>()[i] == i;
    return n / static_cast<double>(best.numel());
  };
  c.ov_layer = matmul(matmul(matmul(E, t(l1.w_v.weight.data())), t(l1.w_o.weight.data())), t(U));
  c.ov_diagonal = diag_frac(c.ov), c.qk_diagonal = diag_frac(c.qk), c.ov_layer_diagonal = diag_frac(c.ov_layer);
  return c;
}

}  // namespace induction_heads
