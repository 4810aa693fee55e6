// where_weights_come_from: "Are W_Q, W_K, W_V special? Are they the embedding?"
//
// A tiny model -- token and position embeddings, one self-attention layer, a linear read-out --
// trained end to end on "at every position, name the sequence's first token". It shows:
//   1. W_Q, W_K, W_V before and after training: random matrices that backpropagation shapes;
//   2. one backward pass reaches every parameter: the gradient norms at step 1 of the embedding,
//      W_Q, W_K, W_V and W_O are all non-zero;
//   3. the embedding is a Linear layer applied to one-hot rows (same numbers, exactly);
//   4. an ablation: learned W_Q/W_K/W_V against fixed identity (Q = K = V = X) and against
//      frozen random matrices, and the loss each reaches;
//   5. static vs contextual: a token's embedding row never changes, but its vector after
//      attention depends on the rest of the sequence;
//   6. co-occurrence: do tokens that often appear together get similar embeddings? Only when the
//      objective rewards it. The same data trains two models, one to name the first token and one
//      to predict the next token; the embedding cosine of co-occurring pairs is measured in both.
#include <cmath>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "../common/gemm.h"  // add_gemm_option: --gemm portable|blas
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
void report_learned(viz::Report& rep, Model& m, const RunResult& r, const Config& c, Generator& g) {
  // Before, after and the change, the first two on one shared colour scale so that colours compare.
  std::vector<std::string> features;
  for (int64_t i = 0; i < c.dim; ++i) features.push_back(std::to_string(i));
  auto heat = [&](const Tensor& t, const std::string& title, double range) {
    return viz::heatmap_svg(t, {.title = title,
                                .row_labels = features,
                                .col_labels = features,
                                .row_title = "output feature (row of weight)",
                                .col_title = "input feature (column)",
                                .diverging = true,
                                .vmin = -range,
                                .vmax = range,
                                .annotate = 0,
                                .cell = 18});
  };
  auto absmax = [](const Tensor& t) { return max(abs(t)).item(); };
  Generator probe(c.seed + 13);
  RankOne change_q;
  for (auto [name, w0, l] :
       {std::tuple{"W_Q", r.w_q0, &m.attn.w_q}, {"W_K", r.w_k0, &m.attn.w_k}, {"W_V", r.w_v0, &m.attn.w_v}}) {
    const Tensor w1 = l->weight.data(), dw = w1 - w0;
    const double range = std::max(absmax(w0), absmax(w1));
    rep.add_svg(
        fmt::format("{}_init.svg", name), heat(w0, fmt::format("{} at initialisation", name), range),
        fmt::format("{} before training: Xavier-uniform random numbers (colour scale shared with the next picture).",
                    name));
    rep.add_svg(fmt::format("{}_trained.svg", name), heat(w1, fmt::format("{} after training", name), range),
                fmt::format("{} after {} AdamW steps: the same matrix, moved by its gradients.", name, c.steps));
    const RankOne r1 = rank_one(dw, mean(m.embed(make_batch(c, probe, 256).ids).data().reshape({-1, c.dim}), {0}));
    rep.add_svg(
        fmt::format("{}_change.svg", name), heat(dw, fmt::format("{}: after minus before", name), absmax(dw)),
        fmt::format("What training changed in {0} (largest change {1:.2f}; the largest initial entry was {2:.2f}). "
                    "{3:.0f}% of the change is one outer product u v^T, which is why it looks striped: every row is "
                    "nearly a multiple of v, every column of u. v, the input direction, has |cosine| {4:.2f} with the "
                    "mean input vector.",
                    name, absmax(dw), absmax(w0), 100 * r1.share, r1.cos_mean_input));
    if (std::string(name) == "W_Q") change_q = r1;
  }
  const std::string stripes = fmt::format(
      "W_Q's change: {:.0f}% of it is one outer product u v^T (its largest singular value squared over the total); "
      "v has |cosine| {:.2f} with the mean input vector.\n",
      100 * change_q.share, change_q.cos_mean_input);
  std::printf("\n%s", stripes.c_str());
  rep.add_note(stripes, true);
  // The QK circuit: what the scores are made of. x = tok[i] + pos[p], so a score is a sum of
  // token-token, token-position, position-token and position-position terms (and bias terms);
  // W_Q alone is unreadable, these products are not.
  {
    NoGradGuard no_grad;
    const Tensor Wq = m.attn.w_q.weight.data(), Wk = m.attn.w_k.weight.data();
    const double scale = 1 / std::sqrt(static_cast<double>(c.dim));
    auto circuit = [&](const Tensor& A, const Tensor& B) {  // (A Wq^T)(B Wk^T)^T / sqrt(d)
      return matmul(matmul(A, Wq.transpose(0, 1)), matmul(B, Wk.transpose(0, 1)).transpose(0, 1)) * scale;
    };
    const Tensor E = m.tok.weight.data(), P = m.pos.weight.data();
    std::vector<std::string> toks, poss;
    for (int64_t i = 0; i < c.vocab; ++i) toks.push_back(std::to_string(i));
    for (int64_t i = 0; i < c.seq_len; ++i) poss.push_back(std::to_string(i));
    const Tensor pp = circuit(P, P), tt = circuit(E, E).contiguous();
    int64_t low_col = 0;  // the key token with the most negative entry, named in the caption
    for (int64_t i = 0; i < tt.numel(); ++i)
      if (tt.data<float>()[i] < tt.data<float>()[low_col]) low_col = i;
    low_col %= c.vocab;
    rep.add_svg(
        "qk_positions.svg",
        viz::heatmap_svg(pp, {.title = "QK circuit, positions: P W_Q^T W_K P^T / sqrt(d)",
                              .row_labels = poss,
                              .col_labels = poss,
                              .row_title = "query position",
                              .col_title = "key position",
                              .diverging = true}),
        "The learned QK circuit over positions: every query position scores key position 0 highest, "
        "which is where the answer (the first token) is. This is what W_Q and W_K learned, read through the embeddings.");
    const KeyZeroLeads leads = key0_leads(m, c);
    std::string table =
        "What makes key position 0 win: each term's lead at key 0 over the other keys' mean, per query position\n"
        "(score units, before softmax; mean over 256 sequences; the terms add up to the whole score):\n";
    table += fmt::format("  {:<20}", "query position");
    for (int64_t t = 0; t < c.seq_len; ++t) table += fmt::format("{:>7}", t);
    auto row = [&](const std::string& name, const std::vector<double>& v, int decimals = 2) {
      table += fmt::format("\n  {:<20}", name);
      for (double x : v) table += fmt::format("{:>7.{}f}", x, decimals);
    };
    for (const auto& [name, lead] : leads.terms) row(name, lead);
    row("whole score", leads.whole);
    row("weight on key 0", leads.weight_on_0, 4);
    table += "\nDuring training, after step:";
    for (const auto& [step, at] : r.leads_at) {
      row(fmt::format("{:>3}: position term", step), at.terms.at(0).second);
      row("     weight on key 0", at.weight_on_0, 4);
    }
    const auto [lo, hi] = std::minmax_element(leads.whole.begin(), leads.whole.end());
    const auto [plo, phi] = std::minmax_element(leads.terms[0].second.begin(), leads.terms[0].second.end());
    table += fmt::format(
        "\nEvery query position's whole score puts key 0 ahead by {:.1f} to {:.1f}; the position term alone gives "
        "{:.1f} (query {}) to {:.1f} (query {}).\n",
        *lo, *hi, *plo, plo - leads.terms[0].second.begin(), *phi, phi - leads.terms[0].second.begin());
    std::printf("\n%s", table.c_str());
    rep.add_note(table, true);
    rep.add_svg(
        "qk_tokens.svg",
        viz::heatmap_svg(tt, {.title = "QK circuit, tokens: E W_Q^T W_K E^T / sqrt(d)",
                              .row_labels = toks,
                              .col_labels = toks,
                              .row_title = "query token",
                              .col_title = "key token",
                              .diverging = true}),
        fmt::format(
            "The same product over the token embeddings: what the token identities alone add to a score. It is one "
            "of four terms (with position-position and the two token-position cross terms, plus biases), so no one "
            "picture is the whole score: key token {0}'s negative column does not stop a query from finding a "
            "first token {0}, because the cross terms make up for it (test accuracy {1:.1f}%).",
            low_col, 100 * r.test_accuracy));
  }
  rep.add_text("graph.dot", r.graph_dot,
               "The recorded graph of the first loss (Graphviz DOT), after its backward: the embeddings and "
               "attn.w_q/w_k/w_v/w_o.weight are leaves (blue boxes), each with the norm of the gradient it received.");
  if (std::system("command -v dot > /dev/null 2>&1") == 0 &&
      std::system(("dot -Tsvg " + rep.path("graph.dot") + " -o " + rep.path("graph.svg")).c_str()) == 0)
    rep.add_image("graph.svg",
                  "The same graph rendered by Graphviz: follow any parameter box up to the loss. W_Q, W_K and W_V "
                  "enter as three separate leaves, each through its own linear op, then matmul, softmax, matmul.");
  std::string table = "Gradient norms after the first backward pass: one backward reaches every weight.\n";
  // A norm under 1e-6 of the largest is float32 rounding, not a measurement: its digits differ from
  // one CPU's arithmetic to another's, so it is printed as ~0, not as a number.
  double largest = 0;
  for (auto& [name, n] : r.first_grad_norms) largest = std::max(largest, n);
  bool key_bias_zero = false;
  double key_bias = 0;
  for (auto& [name, n] : r.first_grad_norms) {
    const bool rounding = n < 1e-6 * largest;
    if (name == "attn.w_k.bias") key_bias_zero = rounding, key_bias = n;
    table += rounding ? fmt::format("  {:<22} ~0 (rounding)\n", name) : fmt::format("  {:<22} {:.3e}\n", name, n);
  }
  table += key_bias_zero
               ? "(attn.w_k.bias gets ~0, under 1e-6 of the largest, and always will: a key bias adds the same\n"
                 " q.b_k to every score of a query's row, and softmax ignores a constant added to a row.)\n"
               : fmt::format(
                     "(attn.w_k.bias's gradient is {:.1e} of the largest: not ~0 as softmax's rows "
                     "would make it)\n",
                     key_bias / largest);
  std::printf("\n%s", table.c_str());
  rep.add_note(table, true);
  const double diff = embedding_vs_onehot(m, c, g);
  const ContextResult ctx = static_vs_contextual(m, c);
  const std::string facts = fmt::format(
      "The embedding is a Linear layer on one-hot rows: max |embedding(ids) - one_hot(ids) @ W| = {}\n"
      "Static vs contextual, token 3 at position 4 in two sequences with different first tokens:\n"
      "  cosine of its embedding rows          {:.4f}  (a table lookup: always the same row)\n"
      "  cosine of its value vectors x W_V     {:.4f}  (an activation, but of this position's input only)\n"
      "  cosine of its vectors after attention {:.4f}  (they carry what attention gathered)\n",
      diff, ctx.embedding_cosine, ctx.value_cosine, ctx.contextual_cosine);
  std::printf("%s", facts.c_str());
  rep.add_note(facts, true);
  inspect::AttentionCapture cap(m);
  m(make_batch(c, g, 1).ids);
  rep.add_svg(
      "attention.svg",
      viz::heatmap_svg(
          cap.at("attn").weights.reshape({c.seq_len, c.seq_len}),
          {.title = "Learned attention on one sequence", .row_title = "query position", .col_title = "key position"}),
      "Every query has learned to look at position 0, where the answer is.");
}

// The three variants side by side: final and test loss, test accuracy, loss curves.
void report_ablation(viz::Report& rep, const std::vector<RunResult>& results, const Config& c) {
  std::string table =
      fmt::format("{:<32} {:>12} {:>12} {:>10}\n", "W_Q, W_K, W_V", "final loss", "test loss", "test acc");
  std::vector<viz::Series> series;
  int k = 0;
  for (Variant v : {Variant::Learned, Variant::Identity, Variant::FrozenRandom}) {
    const RunResult& r = results[k++];
    table += fmt::format("{:<32} {:>12.4f} {:>12.4f} {:>9.1f}%\n", variant_name(v), r.final_loss, r.test_loss,
                         100 * r.test_accuracy);
    series.push_back(viz::Series::over_steps(variant_name(v), r.losses));
  }
  std::printf("\nAblation (same data, same initial weights, %d steps each):\n%s", c.steps, table.c_str());
  rep.add_note(
      "Ablation: the same model trained with learned, identity, and frozen random W_Q/W_K/W_V. With Q = K = V = X "
      "the score of query i on key j is x_i . x_j, the same as j's on i: the scores are symmetric, so the "
      "embeddings alone must make position 0 attractive to every query while still saying which token sits "
      "where. (A query's best key need not be itself: x_i . x_j can exceed x_i . x_i.) Frozen "
      "random matrices are a fixed, invertible change of basis: the embeddings and W_O, still learned, can adapt "
      "around them. Learned projections give the model the most freedom.",
      false);
  rep.add_note(table, true);
  rep.add_svg("ablation_loss.svg",
              viz::line_chart_svg(series, "Training loss by variant", "step", "cross-entropy", true),
              "Loss curves of the three variants.");
}

// What the co-occurrence table shows, computed from it: for each objective, how much closer the
// pairs moved than the control (tokens of different pairs) did, without and with weight decay.
std::string cooccurrence_conclusion(const CooccurrenceResult& first0, const CooccurrenceResult& next0,
                                    const CooccurrenceResult& first1, const CooccurrenceResult& next1) {
  auto gain = [](const CooccurrenceResult& r) { return (r.after - r.before) - (r.other_after - r.other_before); };
  std::string s = fmt::format(
      "Change in cosine, the pairs' minus the control's:\n"
      "  name the first token {:+.3f} without weight decay, {:+.3f} with; predict the next token {:+.3f}, {:+.3f}\n",
      gain(first0), gain(first1), gain(next0), gain(next1));
  // co-occurrence alone, in each setting: closer (> +0.02), apart (< -0.02), or about unmoved
  auto moved = [](double g) { return g > 0.02 ? 1 : g < -0.02 ? -1 : 0; };
  const int without = moved(gain(first0)), with = moved(gain(first1));
  auto in_words = [](int m) { return m > 0 ? "closer" : m < 0 ? "further apart" : "hardly at all"; };
  s += without == with ? fmt::format(
                             "Co-occurrence alone moves a pair {} with and without weight decay, when the task "
                             "must tell the two apart; ",
                             in_words(without))
                       : fmt::format(
                             "Co-occurrence alone moves a pair {} without weight decay and {} with it, when the "
                             "task must tell the two apart; ",
                             in_words(without), in_words(with));
  const bool further = gain(next0) > gain(first0) && gain(next1) > gain(first1);
  s += further ? fmt::format(
                     "an objective that rewards treating them alike moves them further in both settings, to "
                     "{:+.3f} with weight decay (which removes the random parts no objective uses).\n",
                     gain(next1))
               : "an objective that rewards treating them alike does not move them further in both settings.\n";
  return s;
}

void report_cooccurrence(viz::Report& rep, const Config& c) {
  std::string table = fmt::format(
      "Tokens 0-1, 2-3, 4-5, 6-7 appear together (a sequence is 90% one pair). Mean embedding cosine of the pairs,\n"
      "and of tokens from different pairs (the control):\n"
      "  {:<48} {:>12} {:>7} {:>7} {:>15} {:>7}\n",
      "objective (same data)", "weight decay", "before", "after", "control before", "after");
  std::vector<CooccurrenceResult> rs;
  for (double wd : {0.0, 1.0})
    for (Objective o : {Objective::FirstToken, Objective::NextToken}) {
      const CooccurrenceResult r = cooccurrence(c, o, c.steps, wd);
      rs.push_back(r);
      table += fmt::format("  {:<48} {:>12} {:>7.3f} {:>7.3f} {:>15.3f} {:>7.3f}\n",
                           o == Objective::FirstToken ? "name the first token (must tell 0 from 1)"
                                                      : "predict the next token (0 and 1 predict alike)",
                           wd, r.before, r.after, r.other_before, r.other_after);
    }
  table += cooccurrence_conclusion(rs[0], rs[1], rs[2], rs[3]);
  std::printf("\n%s", table.c_str());
  rep.add_note(
      "Do tokens that co-occur get similar embeddings? Nothing in self-attention makes them so; the objective "
      "decides. The same co-occurrence data trains four models:",
      false);
  rep.add_note(table, true);
}

}  // namespace where_weights

#ifndef MG_EXAMPLE_NO_MAIN
int main(int argc, char** argv) {
  using namespace where_weights;
  Config c;
  CLI::App app{"where_weights_come_from: W_Q, W_K, W_V are ordinary parameters trained by backpropagation"};
  example::add_gemm_option(app);
  app.add_option("--steps", c.steps, "training steps per model");
  app.add_option("--lr", c.lr, "AdamW learning rate");
  app.add_option("--seed", c.seed, "random seed");
  app.add_option("--out", c.out, "output folder");
  CLI11_PARSE(app, argc, argv);

  viz::Report rep(c.out, "where_weights_come_from: W_Q, W_K, W_V are ordinary parameters",
                  "An embedding + one self-attention layer, trained end to end to name each sequence's first token.");
  std::vector<RunResult> results;
  for (Variant v : {Variant::Learned, Variant::Identity, Variant::FrozenRandom}) {
    Generator g(c.seed);  // every variant starts from the same initial weights and sees the same data
    Model m(c, g);
    results.push_back(train(m, c, v, g));
    if (v == Variant::Learned) report_learned(rep, m, results.back(), c, g);
  }
  report_ablation(rep, results, c);
  report_cooccurrence(rep, c);
  std::printf("\npictures: %s\n", rep.write_index().c_str());
  return 0;
}
#endif
