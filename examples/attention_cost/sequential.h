#pragma once
// attention_cost, part 3: the other half of the trade. Attention's T^2 work is a few large
// products that run at once; an LSTM's work grows like T but is T steps in a row, each waiting
// for the one before. And when a model generates text one token at a time, a key/value cache makes
// the next token cost O(T) (one query against T stored keys) instead of O(T^2) (the whole prefix
// again). Then the idea a fused kernel would use to tile the keys as well: the online softmax.

#include <chrono>

#include "experiment.h"

namespace attention_cost {

// One row of part 3, at sequence length T: forward + backward of one causal attention layer (its
// four projections and the fused kernel) and of one LSTM layer of the same width, batch 1; then,
// at inference, the next token at position T with a key/value cache and without one.
struct SequentialRow {
  int64_t T;
  double attention_ms, lstm_ms;   // forward + backward
  double cached_us, uncached_ms;  // the next token: with the cache (microseconds), without (ms)
};

// Milliseconds per token of `steps` one-token forwards through `attn`, after a cache filled (untimed)
// by one forward of `prefix`: the tokens land at positions prefix.size(1) ... + steps - 1. The
// median over reps, after one warm-up.
inline double cached_step_ms(const nn::MultiheadAttention& attn, const Tensor& prefix, const Tensor& next, int reps,
                             int steps) {
  NoGradGuard no_grad;
  nn::KVCache cache;
  std::vector<double> ms;
  for (int r = 0; r <= reps; ++r) {  // the first is a warm-up
    cache.clear();
    attn(Variable(prefix), {.is_causal = true, .cache = &cache});
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) attn(Variable(next), {.is_causal = true, .cache = &cache});
    if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return example::median(ms) / steps;
}

inline std::vector<SequentialRow> measure_sequential(const Config& c) {
  Generator g(c.seed);
  const int64_t d = c.dim;
  nn::MultiheadAttention attn(d, c.heads, {}, g);
  nn::LSTM lstm(d, d, {.batch_first = true}, g);
  std::vector<SequentialRow> rows;
  for (int64_t T = 64; T <= c.max_len; T *= 2) {
    SequentialRow r{T, 0, 0, 0, 0};
    Variable x(randn({1, T, d}, g), true);
    r.attention_ms = median_ms(c.reps, [&] { sum(attn(x, {.is_causal = true}).output).backward(); });
    r.lstm_ms = median_ms(c.reps, [&] { sum(std::get<0>(lstm(x))).backward(); });
    const Tensor prefix = x.data().narrow(1, 0, T - 1).contiguous(), next = x.data().narrow(1, T - 1, 1).contiguous();
    r.cached_us = 1000 * cached_step_ms(attn, prefix, next, c.reps, 16);
    NoGradGuard no_grad;
    r.uncached_ms = median_ms(c.reps, [&] { attn(Variable(x.data()), {.is_causal = true}); });
    rows.push_back(r);
  }
  return rows;
}

// How much a time grows per doubling of T, over the last `n` doublings of the measured range (the
// geometric mean of the ratios).
inline double per_doubling(const std::vector<SequentialRow>& rows, double SequentialRow::*m, size_t n = 3) {
  MG_CHECK(rows.size() >= 2, ValueError, "per_doubling: needs two lengths at least, got {}", rows.size());
  n = std::min(n, rows.size() - 1);
  return std::pow(rows.back().*m / rows[rows.size() - 1 - n].*m, 1.0 / static_cast<double>(n));
}

// The online softmax, the idea that lets a kernel tile the keys too: walk a row of scores in
// blocks, keeping only the running maximum m and the running sum l of e^(s - m); when a block
// raises the maximum, what was summed so far is rescaled by e^(m_old - m_new). The same pass, given
// values, would rescale its running output the same way; here it returns the row's probabilities,
// computed from m and l at the end, to compare with the one-pass softmax.
inline std::vector<double> online_softmax(const std::vector<double>& s, size_t block) {
  MG_CHECK(block > 0, ValueError, "online_softmax: block must be at least 1 key");
  double m = -INFINITY, l = 0;
  for (size_t b = 0; b < s.size(); b += block) {
    const size_t end = std::min(s.size(), b + block);
    double mb = -INFINITY;
    for (size_t j = b; j < end; ++j) mb = std::max(mb, s[j]);
    const double m_new = std::max(m, mb);
    l *= std::exp(m - m_new);  // the old sum, as if it had been taken against the new maximum
    for (size_t j = b; j < end; ++j) l += std::exp(s[j] - m_new);
    m = m_new;
  }
  std::vector<double> p(s.size());
  for (size_t j = 0; j < s.size(); ++j) p[j] = std::exp(s[j] - m) / l;
  return p;
}

// Part 3's table, conclusions and the online softmax's check.
inline void report_sequential(const Config& c, viz::Report& rep) {
  const std::vector<SequentialRow> rows = measure_sequential(c);
  std::string t = fmt::format(
      "\nPart 3: d = {}, batch 1, {} threads: one causal attention layer (projections + fused kernel) against one "
      "LSTM layer, forward + backward; then the next token at position T, inference\n"
      "{:>6} {:>13} {:>10} {:>14} {:>16} {:>18}\n",
      c.dim, get_num_threads(), "T", "attention ms", "LSTM ms", "LSTM steps", "next, cached us", "next, uncached ms");
  for (const SequentialRow& r : rows)
    t += fmt::format("{:>6} {:>13.2f} {:>10.2f} {:>14} {:>16.1f} {:>18.2f}\n", r.T, r.attention_ms, r.lstm_ms, r.T,
                     r.cached_us, r.uncached_ms);
  const auto slower =
      std::find_if(rows.begin(), rows.end(), [](const SequentialRow& r) { return r.attention_ms > r.lstm_ms; });
  t += fmt::format(
      "Each doubling of T multiplies the LSTM's time by {:.1f} and attention's by {:.1f} (the last three doublings). ",
      per_doubling(rows, &SequentialRow::lstm_ms), per_doubling(rows, &SequentialRow::attention_ms));
  t += slower == rows.end()
           ? fmt::format(
                 "Attention is the faster of the two at every T measured, up to {}: its work is a few large "
                 "products, the LSTM's {} steps run one after another.\n",
                 rows.back().T, rows.back().T)
           : fmt::format("Attention is the faster of the two up to T = {}, and the slower from T = {} on.\n",
                         slower == rows.begin() ? 0 : (slower - 1)->T, slower->T);
  t += fmt::format(
      "Generating the next token: with the cache its time grows by {:.1f} per doubling of T (one query against T "
      "stored keys: O(T)), without it by {:.1f} (the whole prefix again); at T = {} the cache makes it {:.0f} times "
      "faster.\n",
      per_doubling(rows, &SequentialRow::cached_us), per_doubling(rows, &SequentialRow::uncached_ms), rows.back().T,
      1000 * rows.back().uncached_ms / rows.back().cached_us);
  // the online softmax on a row of scores that rises, so that later blocks raise the maximum
  std::vector<double> s(100);
  Generator g(c.seed + 7);
  const Tensor noise = randn({100}, g, DType::Float64);
  for (size_t j = 0; j < s.size(); ++j) s[j] = 0.3 * static_cast<double>(j) + 4 * noise.data<double>()[j];
  const Tensor one_pass = softmax(from_vector<double>(s, {100}), 0);
  double diff = 0;
  for (size_t block : {1, 16, 100}) {
    const std::vector<double> p = online_softmax(s, block);
    for (size_t j = 0; j < s.size(); ++j) diff = std::max(diff, std::abs(p[j] - one_pass.data<double>()[j]));
  }
  t += fmt::format(
      "The online softmax over blocks of 1, 16 and 100 keys (the running maximum and sum, rescaled when the maximum "
      "rises) matches the one-pass softmax of a 100-key row to {:.1e}.\n",
      diff);
  fmt::print("{}", t);
  rep.add_note(t, true);
}

}  // namespace attention_cost
