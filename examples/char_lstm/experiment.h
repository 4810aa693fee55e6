#pragma once
// char_lstm, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "../char_gpt/text_data.h"  // the text, its split and batches, shared with char_gpt
#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace char_lstm {
using namespace mg;
using char_text::Data;

struct Config {
  std::string data;           // text file; empty: the fortunes corpus (as char_gpt)
  int64_t context = 64;       // characters per training window (as char_gpt)
  int64_t embed = 64;         // character embedding width
  int64_t hidden = 256;       // LSTM state size per layer
  int64_t layers = 2;         // stacked LSTM layers
  int64_t batch = 32;         // windows per step (as char_gpt)
  int steps = 600;            // AdamW steps (as char_gpt)
  double lr = 3e-3;           // peak learning rate (as char_gpt)
  int eval_every = 100;       // validation loss every N steps
  std::string prompt = "A ";  // the sample continues this text
  int sample_len = 300;       // characters to sample
  double temperature = 0.8;   // logits are divided by it
  int64_t top_k = 20;         // sample among the k most likely characters
  uint64_t seed = 0;          // initial weights, batches and sampling
  std::string out = "runs/char_lstm";
};

Data load_data(const Config& c) { return char_text::load_data(c.data, c.context, "char_lstm"); }

/// Embedding -> LSTM (batch first) -> Linear: ids (B, T) -> logits (B, T, vocab).
class CharLSTM : public nn::Callable<CharLSTM> {
 public:
  CharLSTM(int64_t vocab, const Config& c, Generator& g)
      : embed(vocab, c.embed, {}, g),
        lstm(c.embed, c.hidden, {.num_layers = c.layers, .batch_first = true}, g),
        head(c.hidden, vocab, {}, g) {
    register_module("embed", embed);
    register_module("lstm", lstm);
    register_module("head", head);
  }
  /// The state after a window: h and c, each (layers, B, hidden).
  using State = std::tuple<Variable, Variable>;
  /// ids (B, T) from `state` (none: zeros) -> logits (B, T, vocab), the last-layer outputs (B, T, hidden)
  /// and the state after the last character.
  std::tuple<Variable, Variable, State> forward(const Tensor& ids,
                                                const std::optional<State>& state = std::nullopt) const {
    auto [out, next] = lstm(embed(ids), state);  // (B, T, hidden)
    return {head(out), out, next};
  }
  std::string type_name() const override { return "CharLSTM"; }

  nn::Embedding embed;
  nn::LSTM lstm;
  nn::Linear head;
};

Variable loss_on(const CharLSTM& m, const Tensor& x, const Tensor& y) {
  return cross_entropy(reshape(std::get<0>(m(x)), {-1, m.head.out_features}), y.reshape({-1}));
}

// Each validation window starts from a zero state, as in training: the model sees at most the 64
// characters of its window, the same as char_gpt.
double val_loss(const CharLSTM& m, const Data& d, const Config& c) {
  NoGradGuard no_grad;
  double s = 0;
  for (const auto& [x, y] : char_text::val_batches(d, c.batch, c.context, c.seed)) s += loss_on(m, x, y).item();
  return s / 8;
}

struct History {
  std::vector<double> steps, losses, val_steps, val_losses;
  double tokens_per_s = 0;  // training throughput
};

// The schedule of char_gpt: AdamW, 5% warm-up then cosine to 10%, gradients clipped at norm 1.
History train(CharLSTM& m, const Data& d, const Config& c) {
  optim::AdamW opt(m.parameters(), {.lr = c.lr});
  optim::WarmupCosineLR sched(opt, std::max(1, c.steps / 20), c.steps, 0.1);
  History h;
  viz::ProgressBar bar(c.steps, "train");
  const auto start = std::chrono::steady_clock::now();
  for (int64_t step = 1; step <= c.steps; ++step) {
    auto [x, y] = char_text::train_batch(d, c.batch, c.context, c.seed, step);
    Variable loss = loss_on(m, x, y);
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(m.parameters(), 1.0);
    opt.step();
    sched.step();
    h.steps.push_back(static_cast<double>(step)), h.losses.push_back(loss.item());
    bar.update(step, loss.item(), -1, c.batch * c.context);
    if (step % c.eval_every == 0 || step == c.steps)
      h.val_steps.push_back(static_cast<double>(step)), h.val_losses.push_back(val_loss(m, d, c));
  }
  bar.finish();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  h.tokens_per_s = static_cast<double>(c.steps * c.batch * c.context) / s;
  return h;
}

struct Sample {
  std::string text;  // the prompt and what was drawn
  Tensor hidden;     // (chars, hidden): the last layer's output after each character fed in
};

// Feed the prompt, then draw one character at a time (sample_logits: logits / temperature, keep
// the top_k, softmax, draw, as GPT::generate), feeding each back in. The state carries everything: one step per
// character.
Sample sample(const CharLSTM& m, const char_text::Vocab& v, const Config& c, Generator& g) {
  MG_CHECK(!c.prompt.empty(), ValueError, "char_lstm: the prompt must have at least one character to continue");
  NoGradGuard no_grad;
  std::vector<int64_t> ids;
  for (unsigned char ch : c.prompt) ids.push_back(v.id[ch] >= 0 ? v.id[ch] : 0);
  Sample s{c.prompt, Tensor()};
  auto [logits, out, state] = m(from_vector(ids, {1, static_cast<int64_t>(ids.size())}));
  std::vector<Tensor> hidden{out.data().reshape({-1, c.hidden})};
  for (int i = 0; i < c.sample_len; ++i) {
    const Tensor last = logits.data().narrow(1, logits.size(1) - 1, 1).reshape({1, v.size()});  // (1, vocab)
    const Tensor next = sample_logits(last, c.temperature, c.top_k, g);                         // (1, 1)
    s.text += v.chars[next.to_vector<int64_t>()[0]];
    std::tie(logits, out, state) = m(next, state);
    hidden.push_back(out.data().reshape({1, c.hidden}));
  }
  s.hidden = concat(hidden, 0);
  return s;
}

// runs/char_lstm/index.html: the loss curves and the LSTM's state over the sample's first characters.
std::string write_report(const History& h, const Sample& s, const Config& c) {
  viz::Report rep(c.out, "char_lstm: a character-level LSTM on the same text as char_gpt");
  rep.add_svg("loss.svg",
              viz::line_chart_svg({{"train", h.steps, h.losses}, {"validation", h.val_steps, h.val_losses}},
                                  {.title = "Loss", .x_label = "step", .y_label = "cross-entropy"}),
              "Training loss every step and validation loss (the same windows as char_gpt's) every eval_every steps.");
  rep.add_note("Sample:\n" + s.text, true);
  const int64_t chars = std::min<int64_t>(48, s.hidden.size(0)), units = std::min<int64_t>(32, c.hidden);
  std::vector<std::string> labels;
  for (int64_t i = 0; i < chars; ++i) {
    labels.push_back(char_text::label(s.text[static_cast<size_t>(i)]));
  }
  rep.add_svg(
      "state.svg",
      viz::heatmap_svg(s.hidden.narrow(0, 0, chars).narrow(1, 0, units).transpose(0, 1).contiguous(),
                       {.title = "last LSTM layer's output h_t, first 32 units",
                        .col_labels = labels,
                        .row_title = "unit",
                        .col_title = "character read",
                        .diverging = true,
                        .vmin = -1,
                        .vmax = 1,
                        .annotate = 0,
                        .cell = 14}),
      "Everything the LSTM knows about the text so far is in its state; this is h_t (in [-1, 1]) after each "
      "character of the sample: look for units that change sharply at spaces and others that hold a value across a word.");
  return rep.write_index();
}

}  // namespace char_lstm
