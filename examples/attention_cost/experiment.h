#pragma once
// attention_cost, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <algorithm>
#include <chrono>
#include <cmath>

#include "../common/numbers.h"  // window_mean, median, median_ms, finite_abs_max
#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace attention_cost {
using namespace mg;
using example::median_ms;

struct Config {
  // part 1
  int64_t dim = 128;       // model width d
  int64_t heads = 4;       // heads of d / heads features
  int64_t max_len = 4096;  // T = 64, 128, ..., max_len
  int reps = 5;            // timed repetitions per measurement (the median is kept), after one warm-up
  // part 2
  int64_t vocab = 16;
  int64_t seq_len = 48;
  std::vector<int64_t> distances = {1, 2, 4, 8, 16, 32};
  int64_t width = 64;    // the attention model's width
  int64_t hidden = 128;  // the LSTM's hidden size
  int64_t window = 4;    // local attention: each query sees itself and the `window` keys before it
  int64_t batch = 32;
  int steps = 300;  // Adam steps per model and distance
  double lr = 3e-3;
  uint64_t seed = 0;
  int part = 0;  // 1, 2 or 3: run only that part; 0: all
  std::string out = "runs/attention_cost";
};

// ---- part 1: time and memory against T ---------------------------------------------------

/// Forward FLOPs of the four projections and of attention (Q K^T and weights V) for T tokens.
double projection_flops(int64_t T, int64_t d) { return 8.0 * static_cast<double>(T) * static_cast<double>(d * d); }
double attention_flops(int64_t T, int64_t d) {
  return 4.0 * static_cast<double>(T) * static_cast<double>(T) * static_cast<double>(d);
}

// Bytes held at the peak of f() beyond what was held before it.
template <class F>
size_t peak_bytes(F&& f) {
  const size_t before = memory_allocated();
  reset_peak_memory_stats();
  f();
  return max_memory_allocated() - before;
}

// softmax(q k^T / sqrt(d)) v written out: the (T, T) scores and weights are tensors of the graph.
Variable composed_attention(const Variable& q, const Variable& k, const Variable& v) {
  const double scale = 1 / std::sqrt(static_cast<double>(q.size(-1)));
  return matmul(softmax(matmul(q, transpose(k, -2, -1)) * scale, -1), v);
}

struct CostRow {
  int64_t T;
  double projections_ms, mlp_ms, fused_ms, composed_ms;  // forward + backward
  size_t fused_bytes, composed_bytes;                    // peak memory of attention's forward + backward
};

std::vector<CostRow> measure_costs(const Config& c) {
  Generator g(c.seed);
  const int64_t d = c.dim, dh = d / c.heads;
  nn::Linear w_q(d, d, {}, g), w_k(d, d, {}, g), w_v(d, d, {}, g), w_o(d, d, {}, g);
  nn::Linear up(d, 4 * d, {}, g), down(4 * d, d, {}, g);
  std::vector<CostRow> rows;
  for (int64_t T = 64; T <= c.max_len; T *= 2) {
    CostRow r{T, 0, 0, 0, 0, 0, 0};
    Variable x(randn({1, T, d}, g), true);
    r.projections_ms = median_ms(c.reps, [&] { sum(w_q(x) + w_k(x) + w_v(x) + w_o(x)).backward(); });
    r.mlp_ms = median_ms(c.reps, [&] { sum(down(gelu(up(x)))).backward(); });
    Variable q(randn({1, c.heads, T, dh}, g), true), k(randn({1, c.heads, T, dh}, g), true),
        v(randn({1, c.heads, T, dh}, g), true);
    auto fused = [&] { sum(scaled_dot_product_attention(q, k, v)).backward(); };
    auto composed = [&] { sum(composed_attention(q, k, v)).backward(); };
    r.fused_ms = median_ms(c.reps, fused);
    r.composed_ms = median_ms(c.reps, composed);
    for (Variable* p : {&q, &k, &v}) p->zero_grad();
    r.fused_bytes = peak_bytes(fused);
    for (Variable* p : {&q, &k, &v}) p->zero_grad();
    r.composed_bytes = peak_bytes(composed);
    rows.push_back(r);
  }
  return rows;
}

// The T at which attention's time first reaches `other`'s, interpolated between measured T on
// log axes; 0 if it never does in the measured range.
double crossover(const std::vector<CostRow>& rows, double CostRow::*attention, const std::vector<double>& other) {
  for (size_t i = 1; i < rows.size(); ++i) {
    const double a0 = std::log(rows[i - 1].*attention / other[i - 1]), a1 = std::log(rows[i].*attention / other[i]);
    if (a0 < 0 && a1 >= 0) {
      const double f = -a0 / (a1 - a0);
      return std::exp(std::log(static_cast<double>(rows[i - 1].T)) * (1 - f) +
                      std::log(static_cast<double>(rows[i].T)) * f);
    }
    if (i == 1 && a0 >= 0) return static_cast<double>(rows[0].T);
  }
  return 0;
}

// ---- part 2: copying from k positions back ------------------------------------------------

// The banded causal mask of local attention (T, T), true where a query may not look: query t
// sees keys t - r .. t, itself and the r before it.
Tensor band_mask(int64_t T, int64_t r) {
  Tensor m = empty({T, T}, DType::Bool);
  bool* p = m.data<bool>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < T; ++j) p[t * T + j] = j > t || j < t - r;
  return m;
}

// ids (B, T) -> logits (B, T, vocab), causal: position t sees tokens 0..t, or with a window r
// only t - r .. t (local attention). One head per layer, one or two layers, each with a residual
// connection.
struct AttentionCopier : nn::Callable<AttentionCopier> {
  nn::Embedding tok, pos;
  nn::MultiheadAttention attn;
  std::shared_ptr<nn::MultiheadAttention> attn2;  // the second layer, or null
  nn::Linear readout;
  int64_t window;  // 0: full causal attention
  AttentionCopier(const Config& c, Generator& g, int64_t window = 0, bool two_layers = false)
      : tok(c.vocab, c.width, {}, g),
        pos(c.seq_len, c.width, {}, g),
        attn(c.width, 1, {}, g),
        attn2(two_layers ? std::make_shared<nn::MultiheadAttention>(c.width, 1, nn::MultiheadAttentionOptions{}, g)
                         : nullptr),
        readout(c.width, c.vocab, {}, g),
        window(window) {
    register_module("tok", tok), register_module("pos", pos), register_module("attn", attn);
    if (attn2) register_module("attn2", *attn2);
    register_module("readout", readout);
  }
  Variable forward(const Tensor& ids) const {
    Variable x = tok(ids) + pos(arange(ids.size(1)));
    const nn::AttentionForwardOptions mask =
        window > 0 ? nn::AttentionForwardOptions{.attn_mask = band_mask(ids.size(1), window)}
                   : nn::AttentionForwardOptions{.is_causal = true};
    x = x + attn(x, mask).output;
    if (attn2) x = x + (*attn2)(x, mask).output;
    return readout(x);
  }
  std::string type_name() const override { return "AttentionCopier"; }
};

struct LSTMCopier : nn::Callable<LSTMCopier> {
  nn::Embedding tok;
  nn::LSTM lstm;
  nn::Linear readout;
  LSTMCopier(const Config& c, Generator& g)
      : tok(c.vocab, c.width, {}, g),
        lstm(c.width, c.hidden, {.batch_first = true}, g),
        readout(c.hidden, c.vocab, {}, g) {
    register_module("tok", tok), register_module("lstm", lstm), register_module("readout", readout);
  }
  Variable forward(const Tensor& ids) const { return readout(std::get<0>(lstm(tok(ids)))); }
  std::string type_name() const override { return "LSTMCopier"; }
};

// Random tokens; the target at position t >= k is the token at t - k (positions t < k have none).
std::pair<Tensor, Tensor> copy_batch(const Config& c, int64_t k, Generator& g, int64_t n) {
  Tensor ids = randint(0, c.vocab, {n, c.seq_len}, g);
  return {ids, ids.narrow(1, 0, c.seq_len - k).contiguous().reshape({-1})};
}

template <class M>
Variable copy_logits(const M& m, const Config& c, int64_t k, const Tensor& ids) {
  return reshape(narrow(m(ids), 1, k, c.seq_len - k), {-1, c.vocab});  // the positions that have a target
}

// Train a fresh model to copy from k back; its accuracy on 512 fresh sequences.
template <class M, class... Args>
double train_copier(const Config& c, int64_t k, const std::string& label, Args... args) {
  Generator g(c.seed);
  M m(c, g, args...);
  Generator data(c.seed + 100 + static_cast<uint64_t>(k));  // the same batches for both models
  optim::Adam opt(m.parameters(), {.lr = c.lr});
  viz::ProgressBar bar(c.steps, label);
  for (int step = 1; step <= c.steps; ++step) {
    auto [ids, targets] = copy_batch(c, k, data, c.batch);
    Variable loss = cross_entropy(copy_logits(m, c, k, ids), targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
    bar.update(step, loss.item(), -1, c.batch * c.seq_len);
  }
  bar.finish();
  NoGradGuard no_grad;
  Generator test(c.seed + 1000 + static_cast<uint64_t>(k));
  auto [ids, targets] = copy_batch(c, k, test, 512);
  return mean(eq(argmax(copy_logits(m, c, k, ids).data(), -1), targets).to(DType::Float32)).item();
}

struct CopyRow {
  int64_t k;
  double attention, lstm;             // accuracy
  double local1 = NAN, local2 = NAN;  // local attention (window c.window), one and two layers; NaN: not run
};

// Which models copy_at_distance trains: all four (the example), or a part of them (the tests).
enum class CopyModels { All, FullAndLSTM, LocalOnly };

std::vector<CopyRow> copy_at_distance(const Config& c, CopyModels which = CopyModels::All) {
  std::vector<CopyRow> rows;
  for (int64_t k : c.distances) {
    CopyRow r{k, NAN, NAN};
    if (which != CopyModels::LocalOnly) {
      r.attention = train_copier<AttentionCopier>(c, k, fmt::format("attention, k = {:<3}", k));
      r.lstm = train_copier<LSTMCopier>(c, k, fmt::format("LSTM,      k = {:<3}", k));
    }
    if (which != CopyModels::FullAndLSTM) {
      r.local1 = train_copier<AttentionCopier>(c, k, fmt::format("local x1,  k = {:<3}", k), c.window, false);
      r.local2 = train_copier<AttentionCopier>(c, k, fmt::format("local x2,  k = {:<3}", k), c.window, true);
    }
    rows.push_back(r);
  }
  return rows;
}

// The largest k of the rows up to which accuracy (a member) stays at or above 90%, 0 if none.
int64_t reach(const std::vector<CopyRow>& rows, double CopyRow::*acc) {
  int64_t k = 0;
  for (const CopyRow& r : rows) {
    if (!(r.*acc >= 0.9)) break;
    k = r.k;
  }
  return k;
}

// Part 1's table, conclusions and chart.
void report_costs(const Config& c, viz::Report& rep) {
  const std::vector<CostRow> rows = measure_costs(c);
  fmt::print("Part 1: d = {}, {} heads, batch 1, forward + backward, median of {} runs, {} threads\n", c.dim, c.heads,
             c.reps, get_num_threads());
  std::string t1 =
      fmt::format("{:>6} {:>14} {:>10} {:>12} {:>14} {:>16} {:>16} {:>14}\n", "T", "projections ms", "MLP ms",
                  "fused ms", "composed ms", "fused memory", "composed memory", "attn/proj FLOPs");
  std::vector<double> Ts, proj, block, fused, composed, lin, quad;
  for (const CostRow& r : rows) {
    t1 += fmt::format("{:>6} {:>14.2f} {:>10.2f} {:>12.2f} {:>14.2f} {:>13.1f} MB {:>13.1f} MB {:>14.2f}\n", r.T,
                      r.projections_ms, r.mlp_ms, r.fused_ms, r.composed_ms, r.fused_bytes / 1e6,
                      r.composed_bytes / 1e6, attention_flops(r.T, c.dim) / projection_flops(r.T, c.dim));
    Ts.push_back(static_cast<double>(r.T));
    proj.push_back(r.projections_ms), block.push_back(r.projections_ms + r.mlp_ms);
    fused.push_back(r.fused_ms), composed.push_back(r.composed_ms);
  }
  // slope guides through the first projections point (slope 1) and the first fused point (slope 2)
  for (double T : Ts) lin.push_back(proj[0] * T / Ts[0]), quad.push_back(fused[0] * T * T / (Ts[0] * Ts[0]));
  const double x_proj = crossover(rows, &CostRow::fused_ms, proj), x_block = crossover(rows, &CostRow::fused_ms, block);
  const CostRow& last = rows.back();
  const double tt_bytes = 4.0 * static_cast<double>(c.heads) * static_cast<double>(last.T * last.T);
  t1 += fmt::format(
      "By FLOPs attention equals the projections at T = 2d = {} and the projections plus the MLP at T = 6d = {}.\n"
      "Measured (fused attention): it passes the projections at T = {}, and projections plus MLP at T = {}.\n"
      "Each doubling of T multiplies attention's time by {:.1f} (fused) and the projections' by {:.1f}, over the last "
      "three doublings.\n"
      "The composed path holds the (T, T) matrices: at T = {} one (H, T, T) float32 tensor is {:.0f} MB, and its peak "
      "is {:.0f} MB against {:.1f} MB fused.\n",
      2 * c.dim, 6 * c.dim, x_proj > 0 ? fmt::format("{:.0f}", x_proj) : "beyond the measured range",
      x_block > 0 ? fmt::format("{:.0f}", x_block) : "beyond the measured range",
      std::pow(rows.back().fused_ms / rows[rows.size() - 4].fused_ms, 1.0 / 3),
      std::pow(rows.back().projections_ms / rows[rows.size() - 4].projections_ms, 1.0 / 3), last.T, tt_bytes / 1e6,
      last.composed_bytes / 1e6, last.fused_bytes / 1e6);
  fmt::print("{}", t1);
  rep.add_note(t1, true);
  rep.add_svg(
      "cost.svg",
      viz::line_chart_svg(
          {{"attention, fused", Ts, fused},
           {"attention, composed", Ts, composed},
           {"4 projections", Ts, proj},
           {"4 projections + MLP", Ts, block},
           {"slope 1 (time ~ T)", Ts, lin, true},
           {"slope 2 (time ~ T^2)", Ts, quad, true}},
          {.title = fmt::format("Forward + backward time against T (d = {})", c.dim),
           .x_label = "T (tokens)",
           .y_label = "ms",
           .log_y = true,
           .log_x = true,
           .markers = {{2.0 * static_cast<double>(c.dim), "T = 2d"}, {6.0 * static_cast<double>(c.dim), "T = 6d"}}}),
      "Log-log: the projections follow slope 1, attention bends to slope 2. The dashed lines mark where attention's "
      "FLOPs equal the projections' (T = 2d) and the projections' plus a 4d MLP's (T = 6d).");
}

// Part 2's table, conclusion and chart.
void report_copying(const Config& c, viz::Report& rep) {
  const std::vector<CopyRow> copy = copy_at_distance(c);
  std::string t2 = fmt::format(
      "\nPart 2: copy the token k positions back ({} tokens over {}, {} Adam steps each, the same batches for all)\n"
      "{:>4} {:>22} {:>22} {:>20} {:>20}\n",
      c.seq_len, c.vocab, c.steps, "k", fmt::format("attention (d {})", c.width),
      fmt::format("LSTM (hidden {})", c.hidden), fmt::format("local r={}, 1 layer", c.window),
      fmt::format("local r={}, 2 layers", c.window));
  std::vector<double> ks, acc_a, acc_l, acc_1, acc_2;
  for (const CopyRow& r : copy) {
    t2 += fmt::format("{:>4} {:>21.1f}% {:>21.1f}% {:>19.1f}% {:>19.1f}%\n", r.k, 100 * r.attention, 100 * r.lstm,
                      100 * r.local1, 100 * r.local2);
    ks.push_back(static_cast<double>(r.k)), acc_a.push_back(100 * r.attention), acc_l.push_back(100 * r.lstm);
    acc_1.push_back(100 * r.local1), acc_2.push_back(100 * r.local2);
  }
  const auto worst_a = std::min_element(acc_a.begin(), acc_a.end());
  const auto first_l = std::find_if(copy.begin(), copy.end(), [](const CopyRow& r) { return r.lstm < 0.9; });
  const double chance = 100.0 / static_cast<double>(c.vocab);  // a guess among the vocab's tokens
  // "at least 100.0%" reads as a bound that cannot be passed: say "100.0% at every k" when it is
  t2 += fmt::format("Attention's accuracy is {}{:.1f}% at every k; ",
                    fmt::format("{:.1f}", *worst_a) == "100.0" ? "" : "at least ", *worst_a);
  t2 += first_l == copy.end() ? "the LSTM's stays above 90% at every k measured"
                              : fmt::format("the LSTM's falls below 90% from k = {} (to {:.1f}% at k = {})", first_l->k,
                                            100 * copy.back().lstm, copy.back().k);
  t2 += fmt::format(". Chance, a guess among {} tokens, is {:.1f}%.\n", c.vocab, chance);
  const auto beyond = [&](int64_t from, double CopyRow::*acc) {  // the best accuracy past k = from
    double best = 0;
    for (const CopyRow& r : copy)
      if (r.k > from) best = std::max(best, r.*acc);
    return best;
  };
  const int64_t reach1 = reach(copy, &CopyRow::local1), reach2 = reach(copy, &CopyRow::local2);
  t2 += fmt::format(
      "Local attention (each query sees itself and the {} keys before it): one layer copies at 90% or better up to "
      "k = {}, and at most {:.1f}% beyond; two layers up to k = {}, at most {:.1f}% beyond. Each layer moves a token at "
      "most {} positions, so k needs about k / {} layers.\n",
      c.window, reach1, 100 * beyond(reach1, &CopyRow::local1), reach2, 100 * beyond(reach2, &CopyRow::local2),
      c.window, c.window);
  fmt::print("{}", t2);
  rep.add_note(t2, true);
  rep.add_svg(
      "copy.svg",
      viz::line_chart_svg({{"attention", ks, acc_a},
                           {"LSTM", ks, acc_l},
                           {fmt::format("local r = {}, 1 layer", c.window), ks, acc_1},
                           {fmt::format("local r = {}, 2 layers", c.window), ks, acc_2},
                           {"chance", ks, std::vector<double>(ks.size(), chance), true}},
                          {.title = "Copy the token k positions back: accuracy against k",
                           .x_label = "k",
                           .y_label = "accuracy (%)",
                           .log_x = true}),
      fmt::format("One attention layer reaches t - k in one step for any k; the LSTM must carry the token "
                  "through k steps of its state; local attention with a window of {} reaches {} positions per layer. "
                  "Dashed: chance, 1 in {} ({:.1f}%).",
                  c.window, c.window, c.vocab, chance));
}

}  // namespace attention_cost
