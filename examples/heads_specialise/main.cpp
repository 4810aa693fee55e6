// heads_specialise: "Why several heads? Do they learn different things?"
//
// The task needs two look-ups at once: at position t, output the pair (x_{t-1}, x_0) -- the
// previous token and the first token -- as one class out of vocab^2. One head can look at one
// place; two heads can split the work. After training we *measure* where each head looks
// (its mean attention on position t-1 and on position 0) and remove each head in turn
// (head_mask) to see which half of the answer breaks. The heads start from different random
// weights, which is what lets them end up with different jobs.
#include <cmath>

#include <CLI/CLI.hpp>

#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace heads_specialise {
using namespace mg;

struct Config {
  int64_t vocab = 6;     // tokens 0..vocab-1; the answer has vocab^2 classes
  int64_t seq_len = 8;   // tokens per sequence
  int64_t dim = 32;      // model width (2 heads of 16)
  int64_t hidden = 128;  // MLP width after attention
  int64_t batch = 64;    // sequences per step
  int steps = 1500;      // AdamW steps
  double lr = 3e-3;      // AdamW learning rate
  uint64_t seed = 0;
  std::string out = "runs/heads_specialise";
};

// ids (B, T) -> logits (B, T, vocab^2)
struct Model : nn::Module {
  nn::Embedding tok, pos;
  nn::MultiheadAttention attn;
  nn::Linear fc, out;
  Model(const Config& c, Generator& g)
      : tok(c.vocab, c.dim, {}, g), pos(c.seq_len, c.dim, {}, g), attn(c.dim, 2, {}, g), fc(c.dim, c.hidden, {}, g),
        out(c.hidden, c.vocab * c.vocab, {}, g) {
    register_module("tok", tok);
    register_module("pos", pos);
    register_module("attn", attn);
    register_module("fc", fc);
    register_module("out", out);
  }
  Variable forward(const Tensor& ids, const Tensor& head_mask = Tensor()) const {
    Variable x = tok.forward(ids) + pos.forward(arange(ids.size(1)));
    nn::AttentionForwardOptions m;
    m.is_causal = true;
    m.head_mask = head_mask;
    Variable h = attn.forward(x, m).output;  // only what the heads gathered: no residual shortcut
    return out.forward(relu(fc.forward(h)));
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
  Variable logits = narrow(m.forward(b.ids), 1, 1, c.seq_len - 1);  // positions 1..T-1
  return cross_entropy(reshape(logits, {-1, c.vocab * c.vocab}), b.targets.reshape({-1}));
}

struct HalfAccuracy {
  double prev, first, both;  // was the x_{t-1} half right, the x_0 half, the whole pair
};
HalfAccuracy evaluate(const Model& m, const Batch& b, const Config& c, const Tensor& head_mask = Tensor()) {
  NoGradGuard no_grad;
  Tensor pred = argmax(m.forward(b.ids, head_mask).data().narrow(1, 1, c.seq_len - 1), -1);
  const std::vector<int64_t> p = pred.to_vector<int64_t>(), t = b.targets.to_vector<int64_t>();
  double prev = 0, first = 0, both = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    prev += p[i] / c.vocab == t[i] / c.vocab, first += p[i] % c.vocab == t[i] % c.vocab, both += p[i] == t[i];
  }
  const double n = static_cast<double>(p.size());
  return {prev / n, first / n, both / n};
}

struct HeadRoles {
  double on_prev[2], on_first[2];  // mean attention weight on t-1 and on 0, per head, over t >= 2
  Tensor example[2];               // (T, T) attention of each head on one sequence
};
HeadRoles measure_heads(Model& m, const Batch& b, const Config& c) {
  NoGradGuard no_grad;
  nn::AttentionCapture cap(m);
  m.forward(b.ids);
  const Tensor w = cap.at("attn").weights;  // (B, 2, T, T)
  HeadRoles r;
  for (int64_t h = 0; h < 2; ++h) {
    double prev = 0, first = 0;
    int64_t count = 0;
    for (int64_t t = 2; t < c.seq_len; ++t) {
      prev += mean(w.narrow(1, h, 1).narrow(2, t, 1).narrow(3, t - 1, 1)).item();
      first += mean(w.narrow(1, h, 1).narrow(2, t, 1).narrow(3, 0, 1)).item();
      ++count;
    }
    r.on_prev[h] = prev / count, r.on_first[h] = first / count;
    r.example[h] = w.narrow(0, 0, 1).narrow(1, h, 1).reshape({c.seq_len, c.seq_len}).contiguous();
  }
  return r;
}

std::vector<double> train(Model& m, const Config& c, Generator& g) {
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
    bar.update(step, loss.item(), -1, c.batch * c.seq_len);
  }
  bar.finish();
  return losses;
}

}  // namespace heads_specialise

#ifndef MG_EXAMPLE_NO_MAIN
int main(int argc, char** argv) {
  using namespace heads_specialise;
  Config c;
  CLI::App app{"heads_specialise: two heads learn two different look-ups"};
  app.add_option("--steps", c.steps, "training steps");
  app.add_option("--lr", c.lr, "AdamW learning rate");
  app.add_option("--seed", c.seed, "random seed");
  app.add_option("--out", c.out, "output folder");
  CLI11_PARSE(app, argc, argv);

  Generator g(c.seed);
  Model m(c, g);
  std::printf("task: at position t, output (x_{t-1}, x_0) as one of %lld classes\n", static_cast<long long>(c.vocab * c.vocab));
  const std::vector<double> losses = train(m, c, g);
  const Batch test = make_batch(c, g, 512);
  const HalfAccuracy full = evaluate(m, test, c);
  const HeadRoles roles = measure_heads(m, test, c);

  viz::Report rep(c.out, "heads_specialise: two heads, two jobs",
                  "At position t the model must output the previous token and the first token. Each head can look at one place.");
  std::string t1 = fmt::format("{:<8} {:>22} {:>22}\n", "head", "attention on t-1", "attention on position 0");
  for (int h = 0; h < 2; ++h) t1 += fmt::format("head {:<3} {:>22.3f} {:>22.3f}\n", h, roles.on_prev[h], roles.on_first[h]);
  std::string t2 = fmt::format("{:<18} {:>16} {:>16} {:>12}\n", "heads used", "x_{t-1} correct", "x_0 correct", "both");
  t2 += fmt::format("{:<18} {:>15.1f}% {:>15.1f}% {:>11.1f}%\n", "both", 100 * full.prev, 100 * full.first, 100 * full.both);
  for (int h = 0; h < 2; ++h) {
    const HalfAccuracy a = evaluate(m, test, c, from_vector<float>({h == 0 ? 0.f : 1.f, h == 1 ? 0.f : 1.f}, {2}));
    t2 += fmt::format("{:<18} {:>15.1f}% {:>15.1f}% {:>11.1f}%\n", fmt::format("head {} removed", h), 100 * a.prev, 100 * a.first,
                      100 * a.both);
  }
  std::printf("\nWhere each head looks (mean over positions t >= 2 of 512 test sequences):\n%s", t1.c_str());
  std::printf("\nHead ablation (chance for one half is %.1f%%):\n%s", 100.0 / c.vocab, t2.c_str());
  rep.add_note("Where each head looks, measured:", false);
  rep.add_note(t1, true);
  rep.add_note("Remove one head (its output multiplied by 0 before W_O) and see which half of the answer breaks:", false);
  rep.add_note(t2, true);
  std::vector<std::string> pos;
  for (int64_t i = 0; i < c.seq_len; ++i) pos.push_back(std::to_string(i));
  for (int h = 0; h < 2; ++h) {
    std::printf("\nhead %d on one test sequence (rows: query position, cols: key position)\n%s", h,
                viz::terminal_heatmap(roles.example[h], pos, pos).c_str());
    rep.add_svg(fmt::format("head{}.svg", h),
                viz::heatmap_svg(roles.example[h], {.title = fmt::format("Head {}", h), .row_labels = pos, .col_labels = pos,
                                                    .row_title = "query position", .col_title = "key position"}),
                fmt::format("Head {} on a test sequence: mean attention {:.2f} on the previous token, {:.2f} on the first.", h,
                            roles.on_prev[h], roles.on_first[h]));
  }
  rep.add_svg("loss.svg", viz::line_chart_svg({viz::Series::over_steps("train loss", losses)}, "Training loss", "step", "cross-entropy", true), "Loss.");
  std::printf("\npictures: %s\n", rep.write_index().c_str());
  return full.both >= 0.95 ? 0 : 1;
}
#endif
