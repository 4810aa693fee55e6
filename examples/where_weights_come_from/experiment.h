#pragma once
// where_weights_come_from, the experiment: the one-head model, its variants (learned, frozen,
// identity), training, what W_Q and W_K learned, and the co-occurrence run. The tests include it;
// main.cpp runs it, report.h prints and draws what it measured.

#include <cmath>
#include <cstdlib>

#include "../common/numbers.h"  // median
#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace where_weights {
using namespace mg;

struct Config {
  int64_t vocab = 8;    // tokens 0..vocab-1
  int64_t seq_len = 8;  // tokens per sequence
  int64_t dim = 16;     // embedding width = attention width
  int64_t batch = 64;   // sequences per step
  int steps = 400;      // AdamW steps per model
  double lr = 1e-2;     // AdamW learning rate
  uint64_t seed = 0;    // same seed, same run
  std::string out = "runs/where_weights_come_from";
};

enum class Variant { Learned, Identity, FrozenRandom };
const char* variant_name(Variant v) {
  return v == Variant::Learned    ? "learned W_Q, W_K, W_V"
         : v == Variant::Identity ? "fixed identity (Q = K = V = X)"
                                  : "frozen random W_Q, W_K, W_V";
}

// ids (B, T) -> logits (B, T, vocab)
struct Model : nn::Callable<Model> {
  nn::Embedding tok, pos;
  nn::MultiheadAttention attn;
  nn::Linear readout;
  bool causal = false;  // mask the future (for next-token prediction)
  // fused = false: the composed attention path (matmul, softmax, matmul), so the recorded graph
  // shows every step and W_Q, W_K, W_V as three separate leaves.
  Model(const Config& c, Generator& g)
      : tok(c.vocab, c.dim, {}, g),
        pos(c.seq_len, c.dim, {}, g),
        attn(c.dim, 1, {.fused = false}, g),
        readout(c.dim, c.vocab, {}, g) {
    register_module("tok", tok);
    register_module("pos", pos);
    register_module("attn", attn);
    register_module("readout", readout);
  }
  Variable embed(const Tensor& ids) const { return tok(ids) + pos(arange(ids.size(1))); }
  // The contextual vectors: each position's embedding plus what it gathered by attention.
  Variable contextual(const Tensor& ids) const {
    Variable x = embed(ids);
    return x + attn(x, {.is_causal = causal}).output;
  }
  Variable forward(const Tensor& ids) const { return readout(contextual(ids)); }
  std::string type_name() const override { return "Model"; }
};

// Replace W_Q, W_K, W_V by the identity (or keep their random values) and freeze them.
void freeze_qkv(Model& m, Variant v) {
  for (nn::Linear* l : {&m.attn.w_q, &m.attn.w_k, &m.attn.w_v}) {
    if (v == Variant::Identity) {
      l->weight.data().copy_(eye(l->in_features));
      l->bias.data().fill_(0);
    }
    l->weight.set_requires_grad(false);
    l->bias.set_requires_grad(false);
  }
}

struct Batch {
  Tensor ids, targets;  // (B, T) each: the target everywhere is the first token
};
Batch make_batch(const Config& c, Generator& g, int64_t n) {
  Tensor ids = randint(0, c.vocab, {n, c.seq_len}, g);
  return {ids, ids.narrow(1, 0, 1).expand({n, c.seq_len}).contiguous()};
}

Variable loss_of(const Model& m, const Batch& b) {
  return cross_entropy(reshape(m(b.ids), {-1, m.readout.out_features}), b.targets.reshape({-1}));
}

double accuracy(const Model& m, const Batch& b) {
  NoGradGuard no_grad;
  return mean(eq(argmax(m(b.ids).data(), -1), b.targets).to(DType::Float32)).item();
}

// How close a matrix A (out, in) is to one outer product u v^T: the share of its squared norm in
// its largest singular value (power iteration on A^T A), and |cosine| between v (the input
// direction) and a given input vector.
struct RankOne {
  double share = 0, cos_mean_input = 0;
};

RankOne rank_one(const Tensor& a, const Tensor& input) {
  const Tensor A = a.to(DType::Float64), x = input.to(DType::Float64).reshape({-1, 1});
  Tensor v = ones({A.size(1), 1}, DType::Float64);
  for (int i = 0; i < 300; ++i) {
    v = matmul(A.transpose(0, 1), matmul(A, v));
    v = v * (1 / std::sqrt(sum(v * v).item()));
  }
  const Tensor u = matmul(A, v);
  return {sum(u * u).item() / sum(A * A).item(), std::abs(sum(v * x).item()) / std::sqrt(sum(x * x).item())};
}

// For each row of a (T, T) score table: column 0 minus the mean of the other columns.
std::vector<double> key0_lead(const Tensor& scores) {
  std::vector<double> out;
  const Tensor s = scores.to(DType::Float64).contiguous();
  const int64_t n = s.size(1);
  for (int64_t t = 0; t < s.size(0); ++t) {
    double others = 0;
    for (int64_t j = 1; j < n; ++j) others += s.data<double>()[t * n + j];
    out.push_back(s.data<double>()[t * n] - others / static_cast<double>(n - 1));
  }
  return out;
}

// How far key position 0 leads the other keys, row by row, and which of the score's terms give the
// lead. With x = tok[i] + pos[p], a score (q . k / sqrt(d), q = x W_Q^T + b_Q, k = x W_K^T + b_K)
// is a sum of position.position, token.position, position.token and token.token products, the
// query bias against the key, and terms with the key bias, which add the same to every key of a
// row and so lead by nothing. Averaged over a batch of sequences, a term's lead is its value at
// key 0 minus its mean over the other keys, so the terms' leads add up to the whole score's.
struct KeyZeroLeads {
  std::vector<std::pair<std::string, std::vector<double>>> terms;  // per term, one lead per query position
  std::vector<double> whole;
  std::vector<double> weight_on_0;  // per query position: the attention weight on key 0 (mean over the batch)
};

KeyZeroLeads key0_leads(const Model& m, const Config& c) {
  NoGradGuard no_grad;
  const Tensor Wq = m.attn.w_q.weight.data(), Wk = m.attn.w_k.weight.data(), bq = m.attn.w_q.bias.data();
  const Tensor E = m.tok.weight.data(), P = m.pos.weight.data();
  const double scale = 1 / std::sqrt(static_cast<double>(c.dim));
  Generator g(c.seed + 11);  // its own sequences: the run's generator is left as it was
  const Batch probe = make_batch(c, g, 256);
  const Tensor qe = matmul(embedding(probe.ids, E), Wq.transpose(0, 1)),       // (B, T, d): token part of q
      ke = matmul(embedding(probe.ids, E), Wk.transpose(0, 1)),                //            token part of k
      qp = matmul(P, Wq.transpose(0, 1)), kp = matmul(P, Wk.transpose(0, 1));  // (T, d): position parts
  const int64_t T = c.seq_len;
  const std::vector<std::pair<std::string, Tensor>> terms = {
      {"position . position", matmul(qp, kp.transpose(0, 1)) * scale},
      {"token . position", mean(matmul(qe, kp.transpose(0, 1)), {0}) * scale},
      {"position . token", mean(matmul(qp, ke.transpose(1, 2)), {0}) * scale},
      {"token . token", mean(matmul(qe, ke.transpose(1, 2)), {0}) * scale},
      {"query bias . key", (matmul(kp, bq) + mean(matmul(ke, bq), {0})).reshape({1, T}).expand({T, T}) * scale},
  };
  KeyZeroLeads r;
  Tensor total = zeros({T, T}, DType::Float32);
  for (const auto& [name, term] : terms) {
    r.terms.emplace_back(name, key0_lead(term));
    total = total + term;
  }
  r.whole = key0_lead(total);
  const Variable x = m.embed(probe.ids);
  const Tensor w = mean(softmax(matmul(m.attn.w_q(x).data(), m.attn.w_k(x).data().transpose(1, 2)) * scale, -1), {0})
                       .to(DType::Float64)
                       .contiguous();  // (T, T)
  for (int64_t t = 0; t < T; ++t) r.weight_on_0.push_back(w.data<double>()[t * T]);
  return r;
}

struct RunResult {
  std::string graph_dot;  // the recorded graph of the first step's loss
  double final_loss = 0, test_loss = 0, test_accuracy = 0;
  std::vector<double> losses;
  std::vector<std::pair<std::string, double>> first_grad_norms;  // parameter -> |grad| at step 1
  Tensor w_q0, w_k0, w_v0;                                       // at initialisation
  // after steps 20, 40, 80: the position term's lead for key 0 and the attention weight on key 0,
  // per query position (key0_leads)
  std::vector<std::pair<int, KeyZeroLeads>> leads_at;
};

RunResult train(Model& m, const Config& c, Variant v, Generator& g) {
  RunResult r;
  r.w_q0 = m.attn.w_q.weight.data().clone(), r.w_k0 = m.attn.w_k.weight.data().clone(),
  r.w_v0 = m.attn.w_v.weight.data().clone();
  if (v != Variant::Learned) freeze_qkv(m, v);
  std::vector<Variable> trainable;
  for (auto& p : m.parameters())
    if (p.requires_grad()) trainable.push_back(p);
  optim::AdamW opt(trainable, {.lr = c.lr, .weight_decay = 0});
  viz::ProgressBar bar(c.steps, fmt::format("{:<30}", variant_name(v)));
  for (int step = 1; step <= c.steps; ++step) {
    Batch b = make_batch(c, g, c.batch);
    Variable loss = loss_of(m, b);
    if (step == 1)
      for (auto& [name, p] : m.named_parameters()) p.set_name(name);  // label the leaves with their paths
    opt.zero_grad();
    loss.backward();
    if (step == 1) {
      r.graph_dot = to_dot(loss, {.grads = true});  // every parameter's box shows its gradient's norm
      for (auto& [name, p] : m.named_parameters())
        if (p.requires_grad()) r.first_grad_norms.emplace_back(name, std::sqrt(sum(p.grad() * p.grad()).item()));
    }
    opt.step();
    r.losses.push_back(loss.item());
    if (v == Variant::Learned && (step == 20 || step == 40 || step == 80))
      r.leads_at.emplace_back(step, key0_leads(m, c));
    bar.update(step, loss.item(), -1, c.batch * c.seq_len);
  }
  bar.finish();
  Batch test = make_batch(c, g, 1024);
  {
    NoGradGuard no_grad;
    r.test_loss = loss_of(m, test).item();
  }
  r.test_accuracy = accuracy(m, test);
  r.final_loss = r.losses.back();
  return r;
}

// Cosine similarity of two vectors.
double cosine(const Tensor& a, const Tensor& b) {
  return sum(a * b).item() / std::sqrt(sum(a * a).item() * sum(b * b).item());
}

struct ContextResult {
  double embedding_cosine;   // the token's embedding row in two contexts (always 1)
  double contextual_cosine;  // its vector after attention in two contexts
  double value_cosine;       // its value vector v = x W_V in two contexts
};
// Token 3 at position 4 in two sequences that differ in their first token.
ContextResult static_vs_contextual(const Model& m, const Config& c) {
  NoGradGuard no_grad;
  std::vector<int64_t> s1(c.seq_len, 1), s2(c.seq_len, 1);
  s1[0] = 0, s2[0] = c.vocab - 1, s1[4] = s2[4] = 3;
  Tensor ids = from_vector<int64_t>(
      [&] {
        auto v = s1;
        v.insert(v.end(), s2.begin(), s2.end());
        return v;
      }(),
      {2, c.seq_len});
  Tensor e = m.tok(ids).data(), h = m.contextual(ids).data(), v = m.attn.w_v(m.embed(ids)).data();
  auto at = [&](const Tensor& t, int64_t b) { return t.narrow(0, b, 1).narrow(1, 4, 1).reshape({-1}); };
  return {cosine(at(e, 0), at(e, 1)), cosine(at(h, 0), at(h, 1)), cosine(at(v, 0), at(v, 1))};
}

// The embedding lookup against one_hot(ids) @ W: the largest difference (0: the same numbers).
double embedding_vs_onehot(const Model& m, const Config& c, Generator& g) {
  NoGradGuard no_grad;
  Tensor ids = randint(0, c.vocab, {4, c.seq_len}, g);
  return max(abs(m.tok(ids).data() - matmul(one_hot(ids, c.vocab), m.tok.weight.data()))).item();
}

// ---- co-occurrence ------------------------------------------------------------------------
// Sequences with structure: tokens come in pairs {0, 1}, {2, 3}, ...; a sequence picks one pair
// and each position is a member of it with probability 0.9 (else any token). So 0 and 1 appear
// together all the time. Does attention training make their embeddings similar?
Tensor paired_ids(const Config& c, Generator& g, int64_t n) {
  Tensor ids = empty({n, c.seq_len}, DType::Int64);
  int64_t* p = ids.data<int64_t>();
  for (int64_t b = 0; b < n; ++b) {
    const int64_t pair = static_cast<int64_t>(g.next_u64() % static_cast<uint64_t>(c.vocab / 2));
    for (int64_t t = 0; t < c.seq_len; ++t)
      p[b * c.seq_len + t] = g.next_double() < 0.9
                                 ? 2 * pair + static_cast<int64_t>(g.next_u64() % 2)
                                 : static_cast<int64_t>(g.next_u64() % static_cast<uint64_t>(c.vocab));
  }
  return ids;
}

enum class Objective { FirstToken, NextToken };

// Mean cosine between the embedding rows of the two tokens of each pair.
double pair_cosine(const Model& m) {
  const Tensor E = m.tok.weight.data();
  double s = 0;
  const int64_t pairs = E.size(0) / 2;
  for (int64_t k = 0; k < pairs; ++k) s += cosine(E.narrow(0, 2 * k, 1), E.narrow(0, 2 * k + 1, 1));
  return s / static_cast<double>(pairs);
}

// The control: mean cosine over every two tokens of different pairs (0 and 2, 1 and 6, ...), which
// never appear in the same sequence more often than chance allows.
double other_cosine(const Model& m) {
  const Tensor E = m.tok.weight.data();
  double s = 0;
  int n = 0;
  for (int64_t i = 0; i < E.size(0); ++i)
    for (int64_t j = i + 1; j < E.size(0); ++j)
      if (i / 2 != j / 2) s += cosine(E.narrow(0, i, 1), E.narrow(0, j, 1)), ++n;
  return s / n;
}

struct CooccurrenceResult {
  double before, after;              // pair_cosine at initialisation and after training
  double other_before, other_after;  // other_cosine, the same
  double final_loss;
};

// Train a fresh model on the paired data with `objective`: name the first token at every position
// (tokens of a pair must stay distinguishable), or predict the next token with causal attention
// (both tokens of a pair announce the same next-token distribution, so the objective rewards
// giving them the same embedding). With weight decay, the parts of the embedding the objective
// does not use shrink away; without it they keep their random initial values and blur the cosine.
CooccurrenceResult cooccurrence(const Config& c, Objective objective, int steps, double weight_decay) {
  Generator g(c.seed + 7);
  Model m(c, g);
  m.causal = objective == Objective::NextToken;
  CooccurrenceResult r{pair_cosine(m), 0, other_cosine(m), 0, 0};
  optim::AdamW opt(m.parameters(), {.lr = c.lr, .weight_decay = weight_decay});
  for (int step = 1; step <= steps; ++step) {
    const Tensor ids = paired_ids(c, g, c.batch);
    Variable loss;
    if (objective == Objective::FirstToken) {
      loss = cross_entropy(reshape(m(ids), {-1, c.vocab}),
                           ids.narrow(1, 0, 1).expand({c.batch, c.seq_len}).contiguous().reshape({-1}));
    } else {
      Variable logits = narrow(m(ids), 1, 0, c.seq_len - 1);  // position t predicts t + 1
      loss = cross_entropy(reshape(logits, {-1, c.vocab}), ids.narrow(1, 1, c.seq_len - 1).contiguous().reshape({-1}));
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
    r.final_loss = loss.item();
  }
  r.after = pair_cosine(m);
  r.other_after = other_cosine(m);
  return r;
}

// The learned run's pictures and facts: W_Q/W_K/W_V before and after, the graph, the first
// gradient norms, embedding == one-hot @ W, static vs contextual vectors, the attention map.

// The ablation at one seed: the three variants, each from that seed's initial weights and data,
// in the order Learned, Identity, FrozenRandom.
struct AblationRow {
  uint64_t seed = 0;
  std::vector<RunResult> runs;
};
AblationRow ablation_at(Config c, uint64_t seed) {
  c.seed = seed;
  AblationRow row{seed, {}};
  for (Variant v : {Variant::Learned, Variant::Identity, Variant::FrozenRandom}) {
    Generator g(seed);
    Model m(c, g);
    row.runs.push_back(train(m, c, v, g));
  }
  return row;
}

}  // namespace where_weights
