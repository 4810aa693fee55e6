#pragma once
// char_gpt, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "data_parallel.h"  // the same training on several processes (mpirun)
#include "minigrad/minigrad.h"
#include "minigrad/viz/explorer.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"
#include "text_data.h"  // the text, shared with char_lstm

namespace char_gpt {
using namespace mg;

struct Config {
  std::string data;           // text file; empty: the fortunes corpus
  int64_t context = 64;       // characters of context
  int64_t dim = 128;          // model width
  int64_t heads = 4;          // attention heads per block (dim / heads features each)
  int64_t layers = 4;         // GPT blocks
  int64_t batch = 32;         // windows of context + 1 characters per step
  int steps = 600;            // AdamW steps in total
  double lr = 3e-3;           // peak learning rate
  int eval_every = 100;       // validation loss every N steps
  int ckpt_every = 200;       // checkpoint every N steps
  int64_t every = 30;         // telemetry every N steps (and at step 1): 21 records in 600 steps
  bool resume = false;        // continue from the checkpoint in --out
  bool bf16 = false;          // bfloat16 matrix products (mg::AutocastGuard) in training and validation
  bool bf16_outputs = false;  // and bfloat16 product outputs and activations (PyTorch's autocast policy)
  int threads = 0;            // oneTBB threads; 0: the cores divided among the processes
  int rank = 0, world = 1;    // under mpirun: this process and how many (each trains on its rows of every batch)
  int stop_at = 0;            // stop after this step (as if interrupted); 0: run to --steps
  std::string prompt = "A ";  // the sample continues this text
  int sample_len = 300;       // characters to sample
  double temperature = 0.8;   // logits are divided by it: < 1 sharper, > 1 flatter
  int64_t top_k = 20;         // sample among the k most likely characters
  uint64_t seed = 0;          // initial weights, batches and sampling
  std::string out = "runs/char_gpt";  // checkpoint and pictures
};

// The text, its characters and its split, shared with char_lstm (text_data.h).
using char_text::Data;
using char_text::Vocab;
Data load_data(const Config& c) { return char_text::load_data(c.data, c.context, "char_gpt"); }

// The model is models::GPT (models/gpt.h): token + position embeddings, GPTBlocks (causal
// multi-head attention + GELU MLP, pre-LN), a final LayerNorm and a linear head.
models::GPTOptions gpt_options(const Config& c) { return {.d_model = c.dim, .nhead = c.heads, .num_layers = c.layers}; }

Variable loss_on(const models::GPT& m, const Tensor& x, const Tensor& y) {
  return cross_entropy(reshape(m(x), {-1, m.head.out_features}), y.reshape({-1}));
}

double val_loss(const models::GPT& m, const Data& d, const Config& c) {
  NoGradGuard no_grad;
  AutocastGuard guard(c.bf16, {.bfloat16_outputs = c.bf16_outputs});
  double s = 0;
  for (const auto& [x, y] : char_text::val_batches(d, c.batch, c.context, c.seed)) s += loss_on(m, x, y).item();
  return s / 8;
}

// Loss curves: training loss every step, validation loss every eval_every steps; the telemetry.
struct History {
  std::vector<double> steps, losses, val_steps, val_losses;
  std::vector<inspect::TelemetryRecord> records;  // the steps of this run (after a resume: from there on)
  std::string telemetry_json;                     // the same, as inspect::Telemetry writes it
  double seconds = 0, record_seconds = 0;         // the training loop's time, and the part spent recording
};

// B windows of T = min(context, 64) characters from the start of the validation text: the probe
// of the head scores and of the telemetry.
Tensor val_probe(const Data& d, const Config& c, int64_t B) {
  const int64_t T = std::min<int64_t>(c.context, 64);
  MG_CHECK(static_cast<int64_t>(d.val.size()) >= B * T, ValueError,
           "char_gpt: the validation text is too short to probe the heads");
  return from_vector(std::vector<int64_t>(d.val.begin(), d.val.begin() + B * T), {B, T});
}

// A character as the explorer shows it: "\n" for a newline, "␣" for a space, "\xNN" for a byte
// that is not printable ASCII (a piece of a UTF-8 character is no text of its own).
std::string explorer_label(char ch) {
  const auto u = static_cast<unsigned char>(ch);
  if (ch == '\n') return "\\n";
  if (ch == ' ') return "\u2423";
  if (u < 0x20 || u >= 0x7f) return fmt::format("\\x{:02X}", u);
  return std::string(1, ch);
}

// Telemetry on 4 windows of validation text, its first 32 characters drawn (pattern_length), and
// for the induction, copying and ICL scores 4 random spans of T / 2 characters repeated twice.
// The sizes keep a recording near one training step of work and telemetry.json a few MB.
inspect::Telemetry make_telemetry(models::GPT& m, const Data& d, const Config& c) {
  const Tensor probe = val_probe(d, c, 4);
  std::vector<std::string> labels;
  for (int64_t t = 0; t < probe.size(1); ++t) labels.push_back(explorer_label(d.vocab.chars[probe.data<int64_t>()[t]]));
  const models::GPT* model = &m;
  auto logits = [model](const Tensor& ids) { return (*model)(ids); };
  return inspect::Telemetry(m, [model](const Tensor& ids) { (*model)(ids); },
                            {.vocab = d.vocab.size(),
                             .probe = probe,
                             .tokens = labels,
                             .pattern_length = 32,
                             .every = c.every,
                             .scores = {.induction_batch = 4, .logits = logits}});
}

// Seconds from t0 to now.
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// AdamW steps start+1 ... last, with gradient clipping and the schedule; a checkpoint every
// ckpt_every steps and at the end. Each step's batch depends only on (seed, step), so a resumed
// run sees exactly the batches the uninterrupted one would have.
History train(models::GPT& m, optim::AdamW& opt, optim::WarmupCosineLR& sched, const Data& d, const Config& c,
              int64_t start, const std::string& ckpt, const std::function<double(double)>& after_backward = {}) {
  History h;
  inspect::Telemetry tel = make_telemetry(m, d, c);
  const int64_t last = c.stop_at > 0 ? std::min(c.stop_at, c.steps) : c.steps;
  viz::ProgressBar bar(last - start, "train");
  const auto loop_start = std::chrono::steady_clock::now();
  for (int64_t step = start + 1; step <= last; ++step) {
    auto [x, y] = char_text::train_batch(d, c.batch, c.context, c.seed, step);
    if (c.world > 1) {  // data parallel: this process's rows of the step's batch (the same batch everywhere)
      const int64_t rows = c.batch / c.world;
      x = x.narrow(0, c.rank * rows, rows), y = y.narrow(0, c.rank * rows, rows);
    }
    Variable loss;
    {
      // off unless --bf16; the backward runs as the forward did
      AutocastGuard guard(c.bf16, {.bfloat16_outputs = c.bf16_outputs});
      loss = loss_on(m, x, y);
    }
    opt.zero_grad();
    loss.backward();
    // under DDP: wait for the averaged gradients (and the loss averaged over the processes, to print)
    const double loss_value = after_backward ? after_backward(loss.item()) : loss.item();
    optim::clip_grad_norm_(m.parameters(), 1.0);
    opt.step();
    sched.step();
    h.steps.push_back(static_cast<double>(step)), h.losses.push_back(loss_value);
    if (c.rank == 0 && tel.due(step)) {
      const auto t0 = std::chrono::steady_clock::now();
      tel.record(step, loss_value);
      h.record_seconds += seconds_since(t0);
    }
    if (c.rank == 0) bar.update(step - start, loss_value, -1, c.batch * c.context);
    if (step % c.eval_every == 0 || step == c.steps)
      h.val_steps.push_back(static_cast<double>(step)), h.val_losses.push_back(val_loss(m, d, c));
    if (c.rank == 0 && (step % c.ckpt_every == 0 || step == last)) optim::save_checkpoint(ckpt, m, opt, step, &sched);
  }
  if (c.rank == 0) bar.finish();
  h.seconds = seconds_since(loop_start);
  h.records = tel.records();
  h.telemetry_json = tel.json({{"example", "char_gpt"},
                               {"data", c.data.empty() ? std::string("fortunes") : c.data},
                               {"layers", std::to_string(c.layers)},
                               {"heads", std::to_string(c.heads)}});
  return h;
}

// Continue `prompt` by sampling with GPT::generate (models/gpt.h): logits / temperature, keep the
// top_k, softmax, draw; each layer's keys and values are cached, so a step runs one character.
std::string sample(const models::GPT& m, const Vocab& v, const Config& c, Generator& g) {
  MG_CHECK(!c.prompt.empty(), ValueError, "char_gpt: the prompt must have at least one character to continue");
  std::vector<int64_t> ids;
  for (unsigned char ch : c.prompt) ids.push_back(v.id[ch] >= 0 ? v.id[ch] : 0);
  const Tensor out =
      m.generate(from_vector(ids, {1, static_cast<int64_t>(ids.size())}), c.sample_len, c.temperature, c.top_k, g);
  std::string text = c.prompt;
  const std::vector<int64_t> all = out.to_vector<int64_t>();
  for (size_t i = ids.size(); i < all.size(); ++i) text += v.chars[all[i]];  // the prompt, then what was drawn
  return text;
}

// What each head does, measured (inspect/head_scores.h): previous-token and first-token scores on
// validation text, and the induction score on random characters repeated twice.
std::vector<inspect::HeadScore> label_heads(const models::GPT& m, const Data& d, const Config& c) {
  const Tensor probe = val_probe(d, c, 8);
  return inspect::score_heads(
      const_cast<models::GPT&>(m), [&](const Tensor& ids) { m(ids); }, probe, d.vocab.size());
}

std::string score_table(const std::vector<inspect::HeadScore>& scores) {
  std::string s = fmt::format("{:<16} {:>4} {:>15} {:>12} {:>10}   {}\n", "layer", "head", "previous-token",
                              "first-token", "induction", "label");
  for (const inspect::HeadScore& h : scores)
    s += fmt::format("{:<16} {:>4} {:>15.3f} {:>12.3f} {:>10.3f}   {}\n", h.layer, h.head, h.previous_token,
                     h.first_token, h.induction, h.label);
  return s;
}

// runs/char_gpt/index.html: the loss curves, the sample, each head's scores, and every head's
// attention on the sample's first characters (at most 24, and no more than the context) as a
// layers x heads grid labelled by the scores.
std::string write_report(const models::GPT& m, const Data& d, const Config& c, const History& h,
                         const std::string& sampled, const std::vector<inspect::HeadScore>& scores) {
  viz::Report rep(c.out, "char_gpt: a character-level GPT",
                  "Trained on " + (c.data.empty() ? std::string("Debian's fortunes") : c.data));
  rep.add_svg("loss.svg",
              viz::line_chart_svg({{"train", h.steps, h.losses}, {"validation", h.val_steps, h.val_losses}},
                                  {.title = "Loss", .x_label = "step", .y_label = "cross-entropy"}),
              "Training and validation loss (nats per character).");
  rep.add_note("Sample:\n" + sampled, true);
  inspect::AttentionCapture cap(const_cast<models::GPT&>(m));
  const std::string shown = sampled.substr(0, std::min<size_t>({24, sampled.size(), static_cast<size_t>(c.context)}));
  std::vector<int64_t> pids;
  std::vector<std::string> labels;
  for (unsigned char ch : shown)
    pids.push_back(d.vocab.id[ch] >= 0 ? d.vocab.id[ch] : 0), labels.push_back(char_text::label(static_cast<char>(ch)));
  {
    NoGradGuard no_grad;
    m(from_vector(pids, {1, static_cast<int64_t>(pids.size())}));
  }
  rep.add_note(
      "What each head does, measured (inspect::score_heads): mean attention on the previous character and on the first "
      "one over validation text, and the induction score, the attention from a character's second occurrence to "
      "what followed its first, on random characters repeated twice. A head is labelled by its largest score "
      "if it reaches 0.3.",
      false);
  rep.add_note(score_table(scores), true);
  std::vector<std::vector<viz::Report::Figure>> grid;
  for (const std::string& name : cap.names()) {
    const Tensor w = cap.at(name).weights;  // (1, H, T, T)
    grid.emplace_back();
    for (int64_t head = 0; head < c.heads; ++head) {
      const inspect::HeadScore* s = nullptr;
      for (const inspect::HeadScore& x : scores)
        if (x.layer == name && x.head == head) s = &x;
      grid.back().push_back({fmt::format("attn_{}_head{}.svg", name, head),
                             viz::heatmap_svg(w.narrow(1, head, 1).reshape({w.size(2), w.size(3)}),
                                              {.title = fmt::format("{} head {}", name, head),
                                               .row_labels = labels,
                                               .col_labels = labels,
                                               .row_title = "query",
                                               .col_title = "key",
                                               .annotate = 0,
                                               .cell = 16}),
                             s ? fmt::format("{} head {}: {} (previous {:.2f}, first {:.2f}, induction {:.2f})", name,
                                             head, s->label, s->previous_token, s->first_token, s->induction)
                               : fmt::format("{} head {}", name, head)});
    }
  }
  rep.add_grid(
      grid,
      "Every head's causal attention over the sample's first characters: one row per layer, one column per head.");
  return rep.write_index();
}

// What the explorer shows, as numbers: the previous-token score, at every record, of the head that
// ends highest on it; the range of the in-context-learning score; what recording cost. "" when
// this run recorded nothing.
std::string explorer_summary(const History& h) {
  if (h.records.empty()) return "";
  const std::vector<inspect::HeadScore>& last = h.records.back().heads;
  size_t best = 0;
  for (size_t k = 0; k < last.size(); ++k)
    if (last[k].previous_token > last[best].previous_token) best = k;
  std::string s = fmt::format("explorer: {} head {}, previous-token score by step:", last[best].layer, last[best].head);
  for (const inspect::TelemetryRecord& r : h.records)
    s += fmt::format(" {} {:.2f}", r.step, r.heads[best].previous_token);
  double lo = INFINITY, hi = -INFINITY;
  for (const inspect::TelemetryRecord& r : h.records)
    if (std::isfinite(r.icl.score)) lo = std::min(lo, r.icl.score), hi = std::max(hi, r.icl.score);
  if (lo <= hi)
    s += fmt::format("\nexplorer: the ICL score over the {} records: from {:+.2f} to {:+.2f} nats", h.records.size(),
                     lo, hi);
  return s + fmt::format("\nexplorer: recording took {:.1f} s of the {:.1f} s of training ({:.0f}%)\n",
                         h.record_seconds, h.seconds, 100 * h.record_seconds / std::max(h.seconds, 1e-9));
}

// OUT/telemetry.json and OUT/explorer.html (viz/explorer.h); returns the page's path, or "" when
// this run trained no step (a resume at its last step).
std::string save_explorer(const Config& c, const History& h) {
  if (h.records.empty()) return "";
  viz::write_file(c.out + "/telemetry.json", h.telemetry_json);
  return viz::write_explorer(c.out + "/explorer.html", "char_gpt: a character-level GPT", h.telemetry_json);
}

}  // namespace char_gpt
