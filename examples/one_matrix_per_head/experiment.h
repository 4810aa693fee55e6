#pragma once
// one_matrix_per_head, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <algorithm>
#include <cmath>

#include "../common/numbers.h"  // window_mean, median, median_ms, finite_abs_max
#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace one_matrix {
using namespace mg;
using example::median;
using example::window_mean;

struct Config {
  int64_t dim = 16;    // model width
  int64_t heads = 4;   // heads of dim/heads = 4 features
  int64_t vocab = 16;  // task: at every position, name the largest token of the sequence
  int64_t seq_len = 12;
  int64_t batch = 64;
  int steps = 400;  // AdamW steps for each model
  double lr = 1e-2;
  uint64_t seed = 0;  // first seed; seeds seed, seed+1, ..., seed+seeds-1 are run
  int seeds = 10;
  std::string out = "runs/one_matrix_per_head";
};
// Attention with an extra per-head matrix after each shared projection:
//   q_h = A_q^h (W_q x)_h,  k_h = A_k^h (W_k x)_h,  v_h = A_v^h (W_v x)_h
struct OverParamAttention : nn::Callable<OverParamAttention> {
  const int64_t heads, head_dim;
  nn::Linear w_q, w_k, w_v, w_o;
  nn::ModuleList a_q, a_k, a_v;  // heads x Linear(head_dim, head_dim, no bias)
  OverParamAttention(int64_t dim, int64_t h, Generator& g)
      : heads(h),
        head_dim(dim / h),
        w_q(dim, dim, {}, g),
        w_k(dim, dim, {}, g),
        w_v(dim, dim, {}, g),
        w_o(dim, dim, {}, g) {
    for (auto [name, l] : {std::pair{"w_q", &w_q}, {"w_k", &w_k}, {"w_v", &w_v}, {"w_o", &w_o}})
      register_module(name, *l);
    for (auto [name, list] : {std::pair{"a_q", &a_q}, {"a_k", &a_k}, {"a_v", &a_v}}) {
      register_module(name, *list);
      for (int64_t i = 0; i < h; ++i)
        list->emplace_back<nn::Linear>(head_dim, head_dim, nn::LinearOptions{.bias = false}, g);
    }
  }
  // (B, T, dim) -> (B, H, T, d): split heads, then each head through its own extra matrix.
  Variable project(const nn::Linear& w, const nn::ModuleList& a, const Variable& x) const {
    Variable p = nn::split_heads(w(x), heads);
    std::vector<Variable> per_head;
    for (int64_t h = 0; h < heads; ++h) per_head.push_back(a.at<nn::Linear>(h)(narrow(p, 1, h, 1)));
    return concat(per_head, 1);
  }
  Variable forward(const Variable& x) const {
    Variable q = project(w_q, a_q, x), k = project(w_k, a_k, x), v = project(w_v, a_v, x);
    Variable att = softmax(nn::attention_scores(q, k), -1);  // softmax(q k^T / sqrt(d_k)), as in MultiheadAttention
    return w_o(nn::merge_heads(matmul(att, v)));
  }
  std::string type_name() const override { return "OverParamAttention"; }
};

// Write the folded products into a standard MultiheadAttention:
//   rows of head h:  W[h] = A^h W[h],  b[h] = A^h b[h]
void fold_into(const OverParamAttention& over, nn::MultiheadAttention& mha) {
  NoGradGuard no_grad;
  const int64_t d = over.head_dim;
  auto fold = [&](const nn::Linear& w, const nn::ModuleList& a, nn::Linear& dst) {
    for (int64_t h = 0; h < over.heads; ++h) {
      const Tensor A = a.at<nn::Linear>(h).weight.data();  // (d, d), applied as x A^T
      dst.weight.data().narrow(0, h * d, d).copy_(matmul(A, w.weight.data().narrow(0, h * d, d)));
      dst.bias.data().narrow(0, h * d, d).copy_(matmul(A, w.bias.data().narrow(0, h * d, d)));
    }
  };
  fold(over.w_q, over.a_q, mha.w_q);
  fold(over.w_k, over.a_k, mha.w_k);
  fold(over.w_v, over.a_v, mha.w_v);
  mha.w_o.weight.data().copy_(over.w_o.weight.data());
  mha.w_o.bias.data().copy_(over.w_o.bias.data());
}

// The task model around either attention: embeddings -> attention (+ residual) -> read-out.
template <class Attention>
struct TaskModel : nn::Callable<TaskModel<Attention>> {
  nn::Embedding tok, pos;
  Attention attn;
  nn::Linear readout;
  TaskModel(const Config& c, Generator& g)
      : tok(c.vocab, c.dim, {}, g), pos(c.seq_len, c.dim, {}, g), attn(make(c, g)), readout(c.dim, c.vocab, {}, g) {
    this->register_module("tok", tok), this->register_module("pos", pos), this->register_module("attn", attn);
    this->register_module("readout", readout);
  }
  static Attention make(const Config& c, Generator& g) {
    if constexpr (std::is_same_v<Attention, nn::MultiheadAttention>)
      return Attention(c.dim, c.heads, {}, g);
    else
      return Attention(c.dim, c.heads, g);
  }
  /// (B, T) token ids -> (B, T, vocab) logits.
  Variable forward(const Tensor& ids) const {
    Variable x = tok(ids) + pos(arange(ids.size(1)));
    Variable a = [&] {
      if constexpr (std::is_same_v<Attention, nn::MultiheadAttention>)
        return attn(x).output;
      else
        return attn(x);
    }();
    return readout(x + a);
  }
  std::string type_name() const override { return "TaskModel"; }
};

// The standard model as the fold of the product model: the same embeddings and read-out, and
// each A^h W[h] folded into the one W_Q, W_K, W_V. Afterwards both compute the same function.
void start_from_fold(const TaskModel<OverParamAttention>& over, TaskModel<nn::MultiheadAttention>& standard) {
  NoGradGuard no_grad;
  standard.tok.weight.data().copy_(over.tok.weight.data());
  standard.pos.weight.data().copy_(over.pos.weight.data());
  standard.readout.weight.data().copy_(over.readout.weight.data());
  standard.readout.bias.data().copy_(over.readout.bias.data());
  fold_into(over.attn, standard.attn);
}

// A batch of the task: random tokens; the target at every position is the sequence's largest
// token. One attention layer can do it (every query puts its weight on the largest key), but
// only as sharply as its scores are apart, so the loss keeps falling through the run instead of
// reaching zero in the first hundred steps.
std::pair<Tensor, Tensor> batch(const Config& c, Generator& g) {
  Tensor ids = randint(0, c.vocab, {c.batch, c.seq_len}, g);
  Tensor largest = std::get<0>(max(ids, 1, true));  // (B, 1)
  return {ids, largest.expand({c.batch, c.seq_len}).contiguous().reshape({-1})};
}

template <class M>
double loss_on(const M& m, const Config& c, const Tensor& ids, const Tensor& targets) {
  return cross_entropy(reshape(m(ids), {-1, c.vocab}), targets).item();
}

template <class M>
std::vector<double> train(M& m, const Config& c, uint64_t data_seed, const std::string& label) {
  Generator g(data_seed);  // both models see the same batches
  optim::AdamW opt(m.parameters(), {.lr = c.lr, .weight_decay = 0});
  viz::ProgressBar bar(c.steps, label);
  std::vector<double> losses;
  for (int step = 1; step <= c.steps; ++step) {
    auto [ids, targets] = batch(c, g);
    Variable loss = cross_entropy(reshape(m(ids), {-1, c.vocab}), targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
    bar.update(step, loss.item(), -1, c.batch * c.seq_len);
  }
  bar.finish();
  return losses;
}

// Largest |standard(x) - over(x)| after folding, on random input.
double fold_difference(const Config& c, Generator& g) {
  OverParamAttention over(c.dim, c.heads, g);
  nn::MultiheadAttention mha(c.dim, c.heads, {}, g);
  fold_into(over, mha);
  NoGradGuard no_grad;
  Variable x(randn({3, c.seq_len, c.dim}, g));
  return max(abs(over(x).data() - mha(x).output.data())).item();
}

// One seed of the experiment.
struct SeedRun {
  uint64_t seed = 0;
  double start_logit_diff = 0;     // max |logits| difference of the two models at step 0
  double start_loss_standard = 0;  // loss of each on one batch at step 0
  double start_loss_product = 0;
  std::vector<double> standard, product;  // training loss at every step
};

SeedRun run_seed(const Config& c, uint64_t seed) {
  SeedRun r;
  r.seed = seed;
  Generator g(seed);
  TaskModel<OverParamAttention> product(c, g);
  TaskModel<nn::MultiheadAttention> standard(c, g);
  start_from_fold(product, standard);
  {
    NoGradGuard no_grad;
    Generator probe(seed + 1000);
    auto [ids, targets] = batch(c, probe);
    r.start_logit_diff = max(abs(standard(ids).data() - product(ids).data())).item();
    r.start_loss_standard = loss_on(standard, c, ids, targets);
    r.start_loss_product = loss_on(product, c, ids, targets);
  }
  r.standard = train(standard, c, seed + 1, fmt::format("seed {} standard    ", seed));
  r.product = train(product, c, seed + 1, fmt::format("seed {} per-head A^h", seed));
  return r;
}

// A quarter of the run, across seeds: the ratio product / standard of each seed's mean loss over
// those steps, summarised by its median and range.
struct Quarter {
  size_t from = 0, to = 0;
  std::vector<double> ratios;  // one per seed
  double median = 0, lo = 0, hi = 0;
  double standard_loss = 0;  // median over seeds of the standard model's mean loss in these steps
};

std::vector<Quarter> quarters(const std::vector<SeedRun>& runs) {
  std::vector<Quarter> out;
  const size_t n = runs.at(0).standard.size();
  for (size_t k = 0; k < 4; ++k) {
    Quarter q;
    q.from = k * n / 4 + 1, q.to = (k + 1) * n / 4;
    for (const SeedRun& r : runs)
      q.ratios.push_back(window_mean(r.product, q.from, q.to) / window_mean(r.standard, q.from, q.to));
    std::vector<double> levels;
    for (const SeedRun& r : runs) levels.push_back(window_mean(r.standard, q.from, q.to));
    q.standard_loss = median(levels);
    q.median = median(q.ratios);
    q.lo = *std::min_element(q.ratios.begin(), q.ratios.end()),
    q.hi = *std::max_element(q.ratios.begin(), q.ratios.end());
    out.push_back(q);
  }
  return out;
}

// What a quarter shows, in words, from its numbers: the product form's loss is higher in every
// seed, lower in every seed, or on different sides in different seeds.
std::string direction(const Quarter& q) {
  if (q.lo > 1) return "higher in every seed";
  if (q.hi < 1) return "lower in every seed";
  const auto above = std::count_if(q.ratios.begin(), q.ratios.end(), [](double x) { return x > 1; });
  return fmt::format("higher in {} of {} seeds, lower in {}", above, q.ratios.size(),
                     static_cast<std::ptrdiff_t>(q.ratios.size()) - above);
}

// Each step's loss averaged over the `window` steps ending there (fewer at the start), then the
// median of that over the seeds: the typical curve, without one batch's noise.
std::vector<double> median_smoothed(const std::vector<SeedRun>& runs, bool product, size_t window = 20) {
  const size_t n = runs.at(0).standard.size();
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> at;
    for (const SeedRun& r : runs) {
      const std::vector<double>& l = product ? r.product : r.standard;
      const size_t from = i + 1 > window ? i + 1 - window : 0;
      at.push_back(window_mean(l, from + 1, i + 1));
    }
    out[i] = median(at);
  }
  return out;
}

// The first step at which the two losses of one seed differ by more than 5%: where the curves
// separate. They start equal (same function, same batch); 0 if they never separate.
int separation_step(const SeedRun& r) {
  for (size_t i = 0; i < r.standard.size(); ++i)
    if (std::abs(r.product[i] / r.standard[i] - 1) > 0.05) return static_cast<int>(i + 1);
  return 0;
}

// The conclusion the run prints, computed from what it measured.
std::string conclusion(const std::vector<SeedRun>& runs, const std::vector<Quarter>& qs) {
  double start = 0;
  std::vector<int> sep;
  for (const SeedRun& r : runs) start = std::max(start, r.start_logit_diff), sep.push_back(separation_step(r));
  std::sort(sep.begin(), sep.end());
  std::string s = fmt::format(
      "At step 0 the two models compute the same function in all {} seeds (largest logit difference {:.1e}).\n",
      runs.size(), start);
  if (sep.front() == 0)
    s += "In some seed the two losses never differ by more than 5%: the curves did not separate.\n";
  else
    s += fmt::format(
        "Training then moves them apart: their losses first differ by more than 5% at step {} "
        "(median; {} to {} across seeds). The product form's mean loss is\n",
        median(std::vector<double>(sep.begin(), sep.end())), sep.front(), sep.back());
  for (const Quarter& q : qs)
    s += fmt::format("  steps {}-{}: {} (median ratio {:.2f}x)\n", q.from, q.to, direction(q), q.median);
  // After the first quarter: is one form behind in every seed, in most seeds of every quarter, or
  // neither? "Most" is stated with its counts: each later quarter's, and how many seeds ever cross.
  const auto n = static_cast<std::ptrdiff_t>(runs.size());
  const auto above = [](const Quarter& q) {
    return std::count_if(q.ratios.begin(), q.ratios.end(), [](double x) { return x > 1; });
  };
  std::ptrdiff_t lo = n, hi = 0;
  for (auto q = qs.begin() + 1; q != qs.end(); ++q) lo = std::min(lo, above(*q)), hi = std::max(hi, above(*q));
  const bool slower = 2 * lo > n, faster = 2 * hi < n;
  // seeds in which the usual direction is reversed in at least one later quarter
  std::ptrdiff_t crossing = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    bool reversed = false;
    for (auto q = qs.begin() + 1; q != qs.end(); ++q) reversed |= slower ? q->ratios[i] < 1 : q->ratios[i] > 1;
    crossing += reversed;
  }
  const auto range = [&](std::ptrdiff_t a, std::ptrdiff_t b) {
    return a == b ? fmt::format("{}", a) : fmt::format("{} to {}", a, b);
  };
  if (lo == n)
    s += fmt::format(
        "Same set of functions, different training: after the first quarter the product form trains "
        "more slowly than the standard one in every one of the {} seeds.\n",
        n);
  else if (hi == 0)
    s += fmt::format(
        "Same set of functions, different training: after the first quarter the product form trains "
        "faster than the standard one in every one of the {} seeds.\n",
        n);
  else if (slower || faster)
    s += fmt::format(
        "Same set of functions, different training: after the first quarter the product form trains {} in most "
        "seeds ({} of {} in each later quarter); in {} of the {} seeds it is {} in at least one of those quarters, "
        "so the direction is what most seeds show, not what every seed shows.\n",
        slower ? "more slowly" : "faster", slower ? range(lo, hi) : range(n - hi, n - lo), n, crossing, n,
        slower ? "ahead" : "behind");
  else
    s += "Same set of functions, different training: the curves differ, but which one is lower depends on the "
         "seed and the stage of the run.\n";
  return s;
}

}  // namespace one_matrix
