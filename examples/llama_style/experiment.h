#pragma once
// llama_style, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "../char_gpt/text_data.h"  // the text, its split and batches, shared with char_gpt
#include "../common/numbers.h"      // window_mean, median, median_ms, finite_abs_max
#include "minigrad/minigrad.h"
#include "minigrad/viz/explorer.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/terminal.h"

namespace llama_style {
using namespace mg;
using example::median;

struct Config {
  std::string data;      // text file; empty: the fortunes corpus
  int64_t context = 64;  // characters of context (char_gpt's)
  int64_t dim = 128;     // model width
  int64_t heads = 4;     // query heads
  int64_t layers = 4;    // blocks
  int64_t batch = 32;    // windows per step
  int steps = 600;       // AdamW steps
  double lr = 3e-3;      // peak learning rate
  int seeds = 1;         // independent runs of every variant (different weights and batches)
  bool ablate = true;    // also the LLaMA-style model with one change undone at a time
  bool tie = false;      // every model's head shares the token embedding's matrix
  int64_t every = 30;    // telemetry every N steps (the first seed's LLaMA-style run)
  uint64_t seed = 0;     // the first seed
  std::string out = "runs/llama_style";
};

// One architecture: which of GPT-2's parts it has swapped for LLaMA's.
struct Arch {
  std::string name;
  bool rms_norm = true;  // RMSNorm; false: LayerNorm
  bool rope = true;      // rotary embedding in attention; false: learned position vectors
  bool swiglu = true;    // SwiGLU MLP; false: Linear, GELU, Linear
  bool bias = false;     // biases on every Linear
  bool grouped = true;   // half as many key/value heads; false: one per query head
  std::string undone;    // for an ablation: the LLaMA part it undoes
};

Arch gpt2_style() { return {"GPT-2 style", false, false, false, true, false, ""}; }
Arch llama() { return {"LLaMA style", true, true, true, false, true, ""}; }
// The LLaMA-style model with one part turned back into GPT-2's.
std::vector<Arch> ablations() {
  std::vector<Arch> v;
  Arch a = llama();
  a.rms_norm = false, a.name = "LLaMA, LayerNorm", a.undone = "RMSNorm";
  v.push_back(a);
  a = llama(), a.rope = false, a.name = "LLaMA, learned positions", a.undone = "rotary positions";
  v.push_back(a);
  a = llama(), a.swiglu = false, a.name = "LLaMA, GELU MLP", a.undone = "SwiGLU";
  v.push_back(a);
  a = llama(), a.grouped = false, a.name = "LLaMA, K/V per head", a.undone = "grouped-query attention";
  v.push_back(a);
  a = llama(), a.bias = true, a.name = "LLaMA, with biases", a.undone = "no biases";
  v.push_back(a);
  return v;
}

// ---------------------------------------------------------------- the model

// The model is models::Decoder (models/decoder.h): every part chooses between GPT-2's and LLaMA's.
using Decoder = models::Decoder;
using Block = models::DecoderBlock;

// Architecture `a` at the example's sizes, with an MLP `hidden` wide.
models::DecoderOptions decoder_options(const Arch& a, const Config& c, int64_t hidden) {
  return {.d_model = c.dim,
          .nhead = c.heads,
          .num_layers = c.layers,
          .context = c.context,
          .hidden = hidden,
          .rms_norm = a.rms_norm,
          .rope = a.rope,
          .swiglu = a.swiglu,
          .bias = a.bias,
          .grouped = a.grouped,
          .tie_weights = c.tie};
}
// That model, its weights drawn from gen (made where the caller puts it: no move).
Decoder decoder(int64_t vocab, const Arch& a, const Config& c, int64_t hidden, Generator& gen) {
  return Decoder(vocab, decoder_options(a, c, hidden), gen);
}

// The MLP width that gives `a` the parameter count `target`: the count grows linearly with the
// width, so two trial widths give the slope. Rounded to a multiple of 8.
int64_t matching_hidden(int64_t vocab, const Arch& a, const Config& c, int64_t target) {
  Generator g(0);
  const int64_t p8 = decoder(vocab, a, c, 8, g).num_parameters(), p16 = decoder(vocab, a, c, 16, g).num_parameters();
  const double per_unit = static_cast<double>(p16 - p8) / 8;
  const double h = 8 + static_cast<double>(target - p8) / per_unit;
  MG_CHECK(h >= 8, ValueError,
           "llama_style: the {} model has more parameters than the GPT-2-style one at any MLP width", a.name);
  return std::max<int64_t>(8, static_cast<int64_t>(std::lround(h / 8)) * 8);
}

// ---------------------------------------------------------------- training and measuring

using char_text::Data;

Variable loss_on(const Decoder& m, const Tensor& x, const Tensor& y) {
  return cross_entropy(reshape(m(x), {-1, m.head.out_features}), y.reshape({-1}));
}

double val_loss(const Decoder& m, const Data& d, const Config& c, uint64_t seed) {
  NoGradGuard no_grad;
  double s = 0;
  for (const auto& [x, y] : char_text::val_batches(d, c.batch, c.context, seed)) s += loss_on(m, x, y).item();
  return s / 8;
}

// What one run measured.
struct Run {
  std::string arch;
  uint64_t seed = 0;
  int64_t params = 0, hidden = 0;
  double val_loss = 0, ms_per_step = 0;
  double step_mb = 0;    // the most memory a training step held (weights, activations, gradients, AdamW)
  int64_t kv_bytes = 0;  // KV cache per generated token, float32
  std::string explorer;  // the explorer page, for the run that recorded one
};

constexpr int kWarmup = 5;  // steps left out of the time per step

// Trains `a` for c.steps AdamW steps on char_gpt's batches of `seed`, as char_gpt trains.
Run train_one(const Arch& a, int64_t hidden, const Data& d, const Config& c, uint64_t seed, bool record) {
  Generator g(seed);
  Decoder m = decoder(d.vocab.size(), a, c, hidden, g);
  optim::AdamW opt(m.parameters(), {.lr = c.lr});
  optim::WarmupCosineLR sched(opt, std::max(1, c.steps / 20), c.steps, 0.1);
  Run r{a.name, seed, m.num_parameters(), hidden};
  const int64_t kv_heads = a.grouped ? c.heads / 2 : c.heads;
  r.kv_bytes = 2 * c.layers * kv_heads * (c.dim / c.heads) * 4;
  std::optional<inspect::Telemetry> tel;
  if (record) {
    const int64_t T = std::min<int64_t>(c.context, 64);
    MG_CHECK(static_cast<int64_t>(d.val.size()) >= 4 * T, ValueError, "llama_style: the validation text is too short");
    const Tensor probe = from_vector(std::vector<int64_t>(d.val.begin(), d.val.begin() + 4 * T), {4, T});
    std::vector<std::string> labels;
    for (int64_t t = 0; t < T; ++t) labels.push_back(char_text::label(d.vocab.chars[probe.data<int64_t>()[t]]));
    const Decoder* model = &m;
    tel.emplace(
        m, [model](const Tensor& ids) { (*model)(ids); },
        inspect::TelemetryOptions{
            .vocab = d.vocab.size(),
            .probe = probe,
            .tokens = labels,
            .pattern_length = 32,
            .every = c.every,
            .scores = {.induction_batch = 4, .logits = [model](const Tensor& ids) { return (*model)(ids); }}});
  }
  viz::ProgressBar bar(c.steps, a.name);
  double train_ms = 0;
  for (int64_t step = 1; step <= c.steps; ++step) {
    auto [x, y] = char_text::train_batch(d, c.batch, c.context, seed, step);
    if (step == 2) reset_peak_memory_stats();  // step 1 creates AdamW's moments; step 2 is a steady one
    const auto t0 = std::chrono::steady_clock::now();
    Variable loss = loss_on(m, x, y);
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(m.parameters(), 1.0);
    opt.step();
    sched.step();
    if (step > kWarmup || c.steps <= kWarmup)  // the first steps fill the allocator's cache
      train_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (step == 2) r.step_mb = static_cast<double>(max_memory_allocated()) / 1e6;
    const double l = loss.item();
    if (tel && tel->due(step)) tel->record(step, l);
    bar.update(step, l, -1, c.batch * c.context);
  }
  bar.finish();
  r.ms_per_step = train_ms / static_cast<double>(c.steps > kWarmup ? c.steps - kWarmup : c.steps);
  r.val_loss = val_loss(m, d, c, c.seed);  // the same validation windows for every run
  if (tel) {
    const std::string json = tel->json({{"example", "llama_style"}, {"model", a.name}});
    viz::write_file(c.out + "/telemetry.json", json);
    r.explorer = viz::write_explorer(c.out + "/explorer.html", "llama_style: a LLaMA-style decoder", json);
  }
  return r;
}

// ---------------------------------------------------------------- the comparison

// Every run of one architecture, summarised.
struct Summary {
  Arch arch;
  std::vector<Run> runs;
  double loss() const {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(r.val_loss);
    return median(v);
  }
  double ms() const {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(r.ms_per_step);
    return median(v);
  }
};

// The largest change of one architecture's validation loss between seeds (0 with one seed): how
// far apart two runs of the same model land, the yardstick for calling a difference real.
double seed_spread(const std::vector<Summary>& all) {
  double spread = 0;
  for (const Summary& s : all) {
    double lo = INFINITY, hi = -INFINITY;
    for (const Run& r : s.runs) lo = std::min(lo, r.val_loss), hi = std::max(hi, r.val_loss);
    if (s.runs.size() > 1) spread = std::max(spread, hi - lo);
  }
  return spread;
}

std::string table(const std::vector<Summary>& all) {
  std::string s = fmt::format("{:<26} {:>9} {:>7} {:>9} {:>9} {:>10} {:>12}\n", "model", "params", "MLP", "val loss",
                              "ms/step", "step MB", "KV B/token");
  for (const Summary& x : all) {
    const Run& r = x.runs.front();
    s += fmt::format("{:<26} {:>9} {:>7} {:>9.4f} {:>9.1f} {:>10.1f} {:>12}\n", x.arch.name, r.params, r.hidden,
                     x.loss(), x.ms(), r.step_mb, r.kv_bytes);
  }
  return s;
}

// In how many seeds `b` ended lower than `a`. Run k of every model trains on the same batches and
// is validated on the same windows, so each seed is one paired comparison.
int lower_in(const Summary& a, const Summary& b) {
  int n = 0;
  for (size_t k = 0; k < std::min(a.runs.size(), b.runs.size()); ++k) n += b.runs[k].val_loss < a.runs[k].val_loss;
  return n;
}

// The sentences the run backs: all[0] is GPT-2 style, all[1] LLaMA style, the rest ablations.
std::vector<std::string> conclusions(const std::vector<Summary>& all, int seeds) {
  std::vector<std::string> out;
  const double spread = seed_spread(all);
  const std::string yardstick =
      seeds > 1 ? fmt::format("the largest gap between two seeds of one model is {:.4f}", spread)
                : "with one seed there is no yardstick for noise: run --seeds 3 before trusting a small gap";
  out.push_back(yardstick);
  auto verdict = [&](double diff) {  // diff > 0: the second is better
    if (seeds > 1 && std::abs(diff) <= spread) return std::string("within the seed-to-seed spread");
    return std::string(diff > 0 ? "lower" : "higher");
  };
  const double g = all[0].loss(), l = all[1].loss();
  out.push_back(fmt::format(
      "LLaMA style vs GPT-2 style at {} vs {} parameters: validation loss {:.4f} vs {:.4f} ({}; lower in {} of {} seeds)",
      all[1].runs.front().params, all[0].runs.front().params, l, g,
      verdict(g - l) == "lower"    ? "LLaMA style lower"
      : verdict(g - l) == "higher" ? "LLaMA style higher"
                                   : "within the seed-to-seed spread",
      lower_in(all[0], all[1]), seeds));
  out.push_back(fmt::format("grouped-query attention keeps {} bytes of keys and values per token, GPT-2 style {}",
                            all[1].runs.front().kv_bytes, all[0].runs.front().kv_bytes));
  for (size_t i = 2; i < all.size(); ++i) {
    const double diff = all[i].loss() - l;  // > 0: undoing the part hurt, so the part helped
    std::string what;
    if (seeds > 1 && std::abs(diff) <= spread)
      what = "no difference beyond the seed-to-seed spread";
    else
      what = diff > 0 ? "the part helped" : "the part hurt";
    out.push_back(fmt::format("undoing {}: validation loss {:+.4f} ({}; higher in {} of {} seeds)", all[i].arch.undone,
                              diff, what, lower_in(all[i], all[1]), seeds));
  }
  return out;
}

// Train every architecture of `archs` (GPT-2 style first: its parameter count is the one the
// others match) on c.seeds seeds.
std::vector<Summary> compare(const Data& d, const Config& c, const std::vector<Arch>& archs) {
  MG_CHECK(!archs.empty() && archs[0].name == "GPT-2 style", ValueError,
           "llama_style::compare: the first architecture must be GPT-2 style, whose parameter count the others match");
  const int64_t vocab = d.vocab.size();
  Generator g0(0);
  const int64_t target = decoder(vocab, archs[0], c, 4 * c.dim, g0).num_parameters();
  std::vector<Summary> all;
  for (const Arch& a : archs) {
    const int64_t hidden = a.name == "GPT-2 style" ? 4 * c.dim : matching_hidden(vocab, a, c, target);
    Summary s{a, {}};
    for (int k = 0; k < c.seeds; ++k)
      s.runs.push_back(
          train_one(a, hidden, d, c, c.seed + static_cast<uint64_t>(k), a.name == "LLaMA style" && k == 0));
    all.push_back(std::move(s));
  }
  return all;
}

// The run the program makes: both designs, then (c.ablate) every ablation.
std::vector<Summary> compare(const Data& d, const Config& c) {
  std::vector<Arch> archs{gpt2_style(), llama()};
  if (c.ablate)
    for (const Arch& a : ablations()) archs.push_back(a);
  return compare(d, c, archs);
}

}  // namespace llama_style
