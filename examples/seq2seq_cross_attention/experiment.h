#pragma once
// seq2seq_cross_attention, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <algorithm>
#include <cmath>
#include <map>

#include "minigrad/minigrad.h"
#include "minigrad/viz/explorer.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace seq2seq {
using namespace mg;

// The decoder's vocabulary: the digits, a begin-of-sequence token <s> (first decoder input) and an
// end-of-sequence token </s> (last output).
constexpr int64_t kDigits = 10, kBos = 10, kEos = 11, kTargetVocab = 12;

// What the answer is. Reversal is positional: output t always reads source position L-1-t, the
// same for every string. Sorting is content-based: which position holds the t-th smallest digit
// depends on the digits, so the map changes from string to string.
enum class Task { Reverse, Sort };
inline const char* task_name(Task t) { return t == Task::Reverse ? "reverse" : "sort"; }

struct Config {
  int64_t length = 6;  // digits per string
  int64_t dim = 64;    // model width
  int64_t heads = 4;
  int64_t ff = 128;    // MLP width inside each layer
  int64_t layers = 1;  // encoder layers, and as many decoder layers
  Task task = Task::Reverse;
  int64_t batch = 64;
  int steps = 1200;    // AdamW steps
  double lr = 3e-3;    // peak learning rate (warm-up, then cosine decay)
  int64_t every = 50;  // telemetry every this many steps, and every 5 of the first 100 (where the map forms)
  uint64_t seed = 0;
  std::string out = "runs/seq2seq_cross_attention";
};

// nn::TransformerEncoder and nn::TransformerDecoder stacks: with --layers 2 every decoder layer's
// cross-attention reads the same memory, the encoder's final output.
struct Model : nn::Callable<Model> {
  nn::Embedding src_tok, tgt_tok, pos;
  nn::TransformerEncoder enc;
  nn::TransformerDecoder dec;
  nn::LayerNorm norm;
  nn::Linear out;
  static nn::TransformerLayerOptions layer(const Config& c) {
    return {.dim_feedforward = c.ff, .dropout = 0.0, .activation = nn::TransformerActivation::GELU, .norm_first = true};
  }
  Model(const Config& c, Generator& g)
      : src_tok(kDigits, c.dim, {}, g),
        tgt_tok(kTargetVocab, c.dim, {}, g),
        pos(c.length + 1, c.dim, {}, g),
        enc(c.dim, c.heads, c.layers, layer(c), false, g),
        dec(c.dim, c.heads, c.layers, layer(c), false, g),
        norm({c.dim}),
        out(c.dim, kTargetVocab, {}, g) {
    register_module("src_tok", src_tok), register_module("tgt_tok", tgt_tok), register_module("pos", pos);
    register_module("enc", enc), register_module("dec", dec), register_module("norm", norm),
        register_module("out", out);
  }
  Variable encode(const Tensor& src) const { return enc(src_tok(src) + pos(arange(src.size(1)))); }
  // tgt_in (B, t) starts with <s>, memory (B, L, E) -> logits (B, t, 12) for the next token at each step
  Variable decode(const Tensor& tgt_in, const Variable& memory) const {
    Variable y = tgt_tok(tgt_in) + pos(arange(tgt_in.size(1)));
    return out(norm(dec(y, memory, {.is_causal = true})));
  }
  std::string type_name() const override { return "Seq2Seq"; }
};

bool held_out(const int64_t* digits, int64_t n) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += digits[i];
  return s % 7 == 0;
}

struct Batch {
  Tensor src;              // (B, L)
  Tensor tgt_in, tgt_out;  // (B, L + 1): <s> + the answer's digits; the answer's digits + </s>
};

// The answer's digits for sources src (B, L) -> (B, L): the digits reversed, or sorted ascending.
Tensor answer(const Tensor& src, Task task) {
  const int64_t n = src.size(0), L = src.size(1);
  Tensor a = src.contiguous().clone();
  int64_t* p = a.data<int64_t>();
  for (int64_t b = 0; b < n; ++b) {
    if (task == Task::Reverse)
      std::reverse(p + b * L, p + (b + 1) * L);
    else
      std::sort(p + b * L, p + (b + 1) * L);
  }
  return a;
}

// The decoder's input under teacher forcing for sources src (B, L): <s>, then the answer's
// digits -> (B, L + 1).
Tensor decoder_input(const Tensor& src, Task task) {
  return concat({full({src.size(0), 1}, kBos, DType::Int64), answer(src, task)}, 1);
}
// Random strings from one side of the split (train: not held out; test: held out).
Batch make_batch(const Config& c, Generator& g, int64_t n, bool test) {
  const int64_t L = c.length;
  Tensor src = empty({n, L}, DType::Int64);
  int64_t* p = src.data<int64_t>();
  for (int64_t b = 0; b < n; ++b) {
    do {
      for (int64_t i = 0; i < L; ++i) p[b * L + i] = static_cast<int64_t>(g.next_u64() % kDigits);
    } while (held_out(p + b * L, L) != test);
  }
  const Tensor tgt_out = concat({answer(src, c.task), full({n, 1}, kEos, DType::Int64)}, 1);
  return {src, decoder_input(src, c.task), tgt_out};
}

std::vector<std::string> digits(const Tensor& t) {
  std::vector<std::string> out;
  for (int64_t d : t.to_vector<int64_t>()) out.push_back(d == kEos ? "</s>" : d == kBos ? "<s>" : std::to_string(d));
  return out;
}

// The decoder's cross-attention modules, one per layer: dec.layers.0.multihead_attn, ...
std::vector<std::string> cross_layers(const Config& c) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < c.layers; ++i) names.push_back(fmt::format("dec.layers.{}.multihead_attn", i));
  return names;
}

// Telemetry's forward takes one ids tensor: the source digits (B, L); the decoder reads the
// teacher-forced input made from them, as in training. The probe is 8 held-out strings from a
// generator of its own (the training's is untouched). The decoder's layers are labelled with
// the decoder's tokens (<s> and the digits written so far), the cross-attention's keys with the
// source digits.
inspect::Telemetry make_telemetry(Model& m, const Config& c) {
  Generator g(c.seed + 99);
  const Batch probe = make_batch(c, g, 8, true);
  const std::vector<std::string> src = digits(probe.src.narrow(0, 0, 1)), dec = digits(probe.tgt_in.narrow(0, 0, 1));
  inspect::TelemetryOptions o{
      .vocab = kDigits, .probe = probe.src, .tokens = src, .pattern_length = c.length + 1, .every = c.every};
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string self = fmt::format("dec.layers.{}.self_attn", i), cross = cross_layers(c)[i];
    o.query_tokens[self] = o.query_tokens[cross] = o.key_tokens[self] = dec;
    o.key_tokens[cross] = src;
  }
  Model* model = &m;
  const Task task = c.task;
  return inspect::Telemetry(
      m, [model, task](const Tensor& ids) { model->decode(decoder_input(ids, task), model->encode(ids)); }, o);
}

// Where the task needs output step t < L to read, for sources src (B, L) -> (B, L + 1, L), 1 there and
// 0 elsewhere (the </s> row is all 0). Reversal: the mirrored position L-1-t. Sorting: every
// source position holding the digit written at t (a repeated digit has several).
Tensor alignment_mask(const Tensor& src, Task task) {
  const int64_t n = src.size(0), L = src.size(1);
  const Tensor s = src.contiguous(), a = answer(src, task);
  Tensor mask = zeros({n, L + 1, L});
  float* m = mask.data<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t j = 0; j < L; ++j) {
        const bool hit =
            task == Task::Reverse ? j == L - 1 - t : s.data<int64_t>()[b * L + j] == a.data<int64_t>()[b * L + t];
        m[(b * (L + 1) + t) * L + j] = hit ? 1.0f : 0.0f;
      }
  return mask;
}

// The weight a cross-attention map w (B, L + 1, L) (heads averaged) puts where the task needs it,
// averaged over the L digit steps and the B strings.
double aligned_weight(const Tensor& w, const Tensor& mask) {
  const int64_t n = w.size(0), L = w.size(2);
  return sum(w.to(DType::Float32) * mask).item() / static_cast<double>(n * L);
}

struct TrainResult {
  std::vector<double> losses;                     // per step
  std::vector<inspect::TelemetryRecord> records;  // step 1, every 5 up to 100, every c.every
  std::string telemetry_json;                     // the same, as inspect::Telemetry writes it
  // per cross-attention layer, per record: its weight where the task needs it (probe row 0)
  std::vector<std::vector<double>> aligned;
};

TrainResult train(Model& m, const Config& c, Generator& g) {
  optim::AdamW opt(m.parameters(), {.lr = c.lr});
  optim::WarmupCosineLR sched(opt, c.steps / 20, c.steps, 0.05);
  inspect::Telemetry tel = make_telemetry(m, c);
  viz::ProgressBar bar(c.steps, "train");
  TrainResult r;
  for (int step = 1; step <= c.steps; ++step) {
    Batch b = make_batch(c, g, c.batch, false);
    Variable logits = m.decode(b.tgt_in, m.encode(b.src));  // teacher forcing
    Variable loss = cross_entropy(reshape(logits, {-1, kTargetVocab}), b.tgt_out.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(m.parameters(), 1.0);
    opt.step();
    sched.step();
    r.losses.push_back(loss.item());
    if (tel.due(step) || (step <= 100 && step % 5 == 0)) tel.record(step, loss.item());  // densely while it learns
    bar.update(step, loss.item(), -1, c.batch * c.length);
  }
  bar.finish();
  r.records = tel.records();
  r.telemetry_json = tel.json(
      {{"example", "seq2seq_cross_attention"}, {"task", task_name(c.task)}, {"length", std::to_string(c.length)}});
  Generator probe_gen(c.seed + 99);  // the telemetry's probe strings again, for the mask of row 0
  const Tensor mask = alignment_mask(make_batch(c, probe_gen, 8, true).src.narrow(0, 0, 1), c.task);
  const auto& layers = tel.layers();
  for (const std::string& name : cross_layers(c)) {
    const size_t k = static_cast<size_t>(std::find(layers.begin(), layers.end(), name) - layers.begin());
    MG_CHECK(k < layers.size(), ValueError, "seq2seq_cross_attention: the telemetry has no {}", name);
    std::vector<double> series;
    for (const inspect::TelemetryRecord& rec : r.records)
      series.push_back(aligned_weight(mean(rec.patterns[k].weights, {0}, true), mask));
    r.aligned.push_back(series);
  }
  return r;
}

// Greedy decoding of `steps` tokens from the encoder's output: feed back the most likely token,
// one step at a time.
Tensor greedy_from(const Model& m, const Variable& memory, int64_t steps) {
  NoGradGuard no_grad;
  Tensor seq = full({memory.size(0), 1}, kBos, DType::Int64);
  for (int64_t t = 0; t < steps; ++t) {
    Tensor next = argmax(m.decode(seq, memory).data().narrow(1, t, 1), -1);  // (B, 1)
    seq = concat({seq, next}, 1);
  }
  return seq.narrow(1, 1, steps).contiguous();
}

// Greedy decoding of the whole answer (L digits and </s>).
Tensor greedy(const Model& m, const Tensor& src, int64_t length) {
  NoGradGuard no_grad;
  return greedy_from(m, m.encode(src), length + 1);
}

// Fraction of rows of `pred` equal to `target` in every position.
double exact(const Tensor& pred, const Tensor& target) {
  const Tensor row_ok =
      eq(sum(eq(pred, target).to(DType::Float32), {1}), full({}, static_cast<double>(target.size(1))));
  return mean(row_ok.to(DType::Float32)).item();
}

// One cross-attention layer, measured on the 500 evaluation strings (heads averaged).
struct CrossLayer {
  std::string name;   // dec.layers.i.multihead_attn
  double aligned;     // weight where the task needs it (alignment_mask), per digit step
  double uniform;     // the same for a uniform map: the chance level (1/L for reversal)
  double positional;  // per digit step, the largest weight one fixed source position gets on average
  Tensor maps;        // (2, L + 1, L): the maps of two test strings
};

struct Evaluation {
  double exact_match;               // whole answer right (digits and </s>)
  std::vector<CrossLayer> cross;    // per decoder layer
  size_t reader = 0;                // the layer with the most aligned weight
  Tensor example_src, example_out;  // (2, L), (2, L + 1): the two strings of CrossLayer::maps
  std::string shapes;               // the shapes inside the reading layer's cross-attention (forward hooks)
  // The memory each decoder layer's cross-attention read (its keys and values), against the
  // encoder's final output: the largest difference over every layer (0: the same numbers).
  double memory_difference = NAN;
  // With 2+ layers: the largest difference between encoder layer 0's output and the final output,
  // what a decoder layer would see if it read the encoder layer at its own depth.
  double first_layer_difference = NAN;
};

Evaluation evaluate(Model& m, const Config& c, Generator& g) {
  Batch b = make_batch(c, g, 500, true);
  Tensor pred = greedy(m, b.src, c.length);
  Evaluation e;
  e.exact_match = exact(pred, b.tgt_out);
  NoGradGuard no_grad;
  inspect::AttentionCapture cap(m);
  // Forward hooks on the cross-attentions and their projections record what goes in and comes out.
  std::map<std::string, Shape> seen;
  std::vector<Tensor> read;  // per decoder layer: the cross-attention's key and value inputs
  std::vector<nn::HookHandle> hooks;
  for (size_t i = 0; i < m.dec.layers.size(); ++i)
    hooks.push_back(m.dec.layer(i).multihead_attn.register_forward_hook(
        [&read](const nn::Module&, const std::vector<Variable>& in, std::vector<Variable>&) {
          read.push_back(in[1].data()), read.push_back(in[2].data());
        }));
  Tensor first_layer;
  if (c.layers > 1)
    hooks.push_back(m.enc.layer(0).register_forward_hook(
        [&first_layer](const nn::Module&, const std::vector<Variable>&, std::vector<Variable>& out) {
          first_layer = out[0].data();
        }));
  const Variable memory = m.encode(b.src);
  m.decode(b.tgt_in, memory);
  for (auto& h : hooks) h.remove();
  e.memory_difference = 0;
  for (const Tensor& t : read)
    e.memory_difference = std::max(e.memory_difference, (t - memory.data()).abs().max().item());
  if (first_layer.defined()) e.first_layer_difference = (first_layer - memory.data()).abs().max().item();

  const Tensor mask = alignment_mask(b.src, c.task);
  const double L = static_cast<double>(c.length);
  for (const std::string& name : cross_layers(c)) {
    const Tensor w = mean(cap.at(name).weights, {1});  // (B, L + 1, L), heads averaged
    CrossLayer x{.name = name,
                 .aligned = aligned_weight(w, mask),
                 .uniform = sum(mask).item() / (static_cast<double>(b.src.size(0)) * L * L)};
    const Tensor by_position = mean(w, {0}).narrow(0, 0, c.length).max(1).first;  // (L): best fixed position per step
    x.positional = mean(by_position).item();
    x.maps = w.narrow(0, 0, 2).contiguous();
    e.cross.push_back(x);
  }
  for (size_t i = 1; i < e.cross.size(); ++i)
    if (e.cross[i].aligned > e.cross[e.reader].aligned) e.reader = i;
  e.example_src = b.src.narrow(0, 0, 2).contiguous();
  e.example_out = pred.narrow(0, 0, 2).contiguous();

  // the shapes, recorded once more on the reading layer
  nn::MultiheadAttention& x = m.dec.layer(e.reader).multihead_attn;
  hooks.push_back(
      x.register_forward_hook([&](const nn::Module&, const std::vector<Variable>& in, std::vector<Variable>& out) {
        seen["query"] = in[0].shape(), seen["key"] = in[1].shape(), seen["value"] = in[2].shape();
        seen["output"] = out[0].shape();
      }));
  for (const auto& named : {std::pair{"Q", &x.w_q}, {"K", &x.w_k}, {"V", &x.w_v}}) {
    const char* name = named.first;  // (a variable, not a binding: the hook captures it)
    hooks.push_back(named.second->register_forward_hook(
        [&seen, name](const nn::Module&, const std::vector<Variable>&, std::vector<Variable>& out) {
          seen[name] = out[0].shape();
        }));
  }
  m.decode(b.tgt_in, memory);
  for (auto& h : hooks) h.remove();
  const Tensor w4 = cap.at(e.cross[e.reader].name).weights;  // (B, H, L + 1, L)
  const int64_t H = w4.size(1), dk = c.dim / H;
  auto str = [](const Shape& s) { return shape_str(s); };
  e.shapes = fmt::format(
      "inside the decoder's cross-attention{13} (batch {0}, {1} heads of {2}):\n"
      "  query input  {3}  the decoder's stream: {4} tokens (<s> and the digits written so far)\n"
      "  key input    {5}  value input {6}  the encoder's output: {7} source digits\n"
      "  Q = w_q(query) {8}   K = w_k(key) {9}   V = w_v(value) {10}\n"
      "  per head: Q_h ({0}, {1}, {4}, {2})  K_h, V_h ({0}, {1}, {7}, {2})\n"
      "  weights = softmax(Q_h K_h^T / sqrt({2})) {11}: one row per output step, one column per source digit\n"
      "  output {12}: the decoder's length again\n",
      w4.size(0), H, dk, str(seen["query"]), seen["query"][1], str(seen["key"]), str(seen["value"]), seen["key"][1],
      str(seen["Q"]), str(seen["K"]), str(seen["V"]), str(w4.shape()), str(seen["output"]),
      c.layers > 1 ? fmt::format(" of layer {}", e.reader) : std::string());
  return e;
}

// The sentence under the table: positional (one fixed map holds the weight), content-based (the
// weight follows the digits), or neither. Only a map that has learned to look where needed (twice a
// uniform map's weight there) is called positional or content-based; a uniform map would pass
// either comparison by accident.
std::string alignment_verdict(const CrossLayer& reader) {
  const bool aligned = reader.aligned >= 2 * reader.uniform;
  const bool positional = reader.positional >= reader.aligned - 0.05;
  if (!aligned)
    return fmt::format(
        "so no layer has learned to look where the task needs: {:.3f} of the weight there, under twice a uniform "
        "map's {:.3f}\n",
        reader.aligned, reader.uniform);
  return positional ? fmt::format(
                          "so the alignment is positional: one fixed source position per output step holds {:.3f} "
                          "of the weight, as much as the task's positions ({:.3f}); the map is the same for every "
                          "string\n",
                          reader.positional, reader.aligned)
                    : fmt::format(
                          "so the alignment follows the content: the positions holding the digit written get "
                          "{:.3f} of the weight ({:.3f} for a uniform map), while the best fixed position per step "
                          "gets only {:.3f}; the map is a different permutation for every string\n",
                          reader.aligned, reader.uniform, reader.positional);
}

// Interventions on the memory the decoder reads. Pairs of held-out strings a, b:
//   swapped: a's decoder input (teacher forcing: <s> + a's answer) but b's encoder output. If
//            the decoder took its answer from its own input, it would continue a; the run measures
//            how often it follows b instead (for reversal always; for sorting less often).
//   one slot: a's encoder output with position j replaced by b's. Greedy decoding then writes
//            the answer for a with its digit j replaced by b's: for reversal exactly output
//            L-1-j changes; for sorting the new digit moves to where its value puts it.
struct Intervention {
  double swapped_follows_memory;  // predicted digits equal to b's answer (teacher-forced on a)
  double swapped_follows_input;   // ... equal to a's answer
  double slot_exact;              // greedy answers equal to the answer for a with b's digit at j
  int64_t slot;                   // j
};

Intervention intervene(const Model& m, const Config& c, Generator& g, int64_t n = 500) {
  NoGradGuard no_grad;
  Batch a = make_batch(c, g, n, true), b = make_batch(c, g, n, true);
  const Variable mem_a = m.encode(a.src), mem_b = m.encode(b.src);
  const int64_t L = c.length;
  Intervention r;
  {  // whole memory swapped, decoder input from a
    const Tensor pred = argmax(m.decode(a.tgt_in, mem_b).data(), -1).narrow(1, 0, L);  // the L digits
    r.swapped_follows_memory = mean(eq(pred, b.tgt_out.narrow(1, 0, L)).to(DType::Float32)).item();
    r.swapped_follows_input = mean(eq(pred, a.tgt_out.narrow(1, 0, L)).to(DType::Float32)).item();
  }
  {  // one memory position swapped
    r.slot = L / 2;
    Tensor patched = mem_a.data().clone();
    patched.narrow(1, r.slot, 1).copy_(mem_b.data().narrow(1, r.slot, 1));
    const Tensor pred = greedy_from(m, Variable(patched), L + 1);
    Tensor src = a.src.clone();
    src.narrow(1, r.slot, 1).copy_(b.src.narrow(1, r.slot, 1));
    r.slot_exact = exact(pred, concat({answer(src, c.task), full({n, 1}, kEos, DType::Int64)}, 1));
  }
  return r;
}

// OUT/telemetry.json and OUT/explorer.html (viz/explorer.h); returns the page's path.
std::string save_explorer(const Config& c, const TrainResult& r) {
  viz::write_file(c.out + "/telemetry.json", r.telemetry_json);
  return viz::write_explorer(
      c.out + "/explorer.html",
      fmt::format("seq2seq_cross_attention: {} digit strings", c.task == Task::Reverse ? "reversing" : "sorting"),
      r.telemetry_json);
}

}  // namespace seq2seq
