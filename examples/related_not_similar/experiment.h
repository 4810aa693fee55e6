#pragma once
// related_not_similar, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <algorithm>
#include <cmath>

#include "../common/numbers.h"  // numerical_rank
#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace related {
using namespace mg;

struct Config {
  int64_t vocab = 16;  // tokens 0..15, successor x + 1 mod 16
  int64_t pairs = 4;   // each sequence: 4 tokens and their 4 successors, shuffled (8 tokens)
  int64_t dim = 16;    // embedding width = d_k
  int64_t batch = 64;
  int steps = 1000;
  double lr = 1e-2;
  uint64_t seed = 0;
  std::string out = "runs/related_not_similar";
};

int64_t successor(int64_t x, int64_t vocab) { return (x + 1) % vocab; }

// Embeddings, then scores q k^T / sqrt(d) with q = x W_Q^T and k = x W_K^T (nn::Linear stores
// W^T); tied: k uses w_q too, so the scores are symmetric.
// dk: the width of the queries and keys (0: dim), so that M has rank at most dk.
struct Scorer : nn::Callable<Scorer> {
  nn::Embedding tok;
  nn::Linear w_q, w_k;
  bool tied = false;
  Scorer(const Config& c, bool tie, Generator& g, int64_t dk = 0)
      : tok(c.vocab, c.dim, {}, g),
        w_q(c.dim, dk > 0 ? dk : c.dim, {.bias = false}, g),
        w_k(c.dim, dk > 0 ? dk : c.dim, {.bias = false}, g),
        tied(tie) {
    register_module("tok", tok), register_module("w_q", w_q);
    if (!tied) register_module("w_k", w_k);  // tied: w_k is unused and not a parameter
  }
  /// (B, T) ids -> (B, T, T) scores.
  Variable forward(const Tensor& ids) const {
    Variable x = tok(ids);
    Variable q = w_q(x), k = tied ? w_q(x) : w_k(x);
    return matmul(q, transpose(k, 1, 2)) / std::sqrt(static_cast<double>(w_q.out_features));
  }
  /// The token-token form M = E W_Q^T W_K E^T / sqrt(d_k) (vocab, vocab): the score of query token
  /// a on key token b, whatever their positions. W_Q^T W_K, the QK circuit, has rank at most d_k.
  /// In `dtype` (float32, the model's, by default; float64 for its rank).
  Tensor form(DType dtype = DType::Float32) const {
    NoGradGuard no_grad;
    const Tensor E = tok.weight.data().to(dtype), Wq = w_q.weight.data().to(dtype),
                 Wk = tied ? Wq : w_k.weight.data().to(dtype);
    return matmul(matmul(E, Wq.transpose(0, 1)), matmul(E, Wk.transpose(0, 1)).transpose(0, 1)) *
           (1 / std::sqrt(static_cast<double>(w_q.out_features)));
  }
  std::string type_name() const override { return "Scorer"; }
};

// A batch: n sequences of 2 * pairs tokens, `pairs` distinct tokens whose successors are not
// among them, with their successors, shuffled. targets (n, T): the position of the token's
// successor, or -1 when its successor is not in the sequence (no loss there).
std::pair<Tensor, Tensor> make_batch(const Config& c, Generator& g, int64_t n) {
  const int64_t T = 2 * c.pairs;
  Tensor ids = zeros({n, T}, DType::Int64), targets = full({n, T}, -1.0, DType::Int64);
  int64_t* id = ids.data<int64_t>();
  int64_t* tg = targets.data<int64_t>();
  auto draw = [&](int64_t k) { return static_cast<int64_t>(g.next_u64() % static_cast<uint64_t>(k)); };
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> tokens;  // x and s(x) for `pairs` x, all 2 * pairs tokens distinct
    while (static_cast<int64_t>(tokens.size()) < T) {
      const int64_t x = draw(c.vocab), sx = successor(x, c.vocab);
      if (std::find(tokens.begin(), tokens.end(), x) == tokens.end() &&
          std::find(tokens.begin(), tokens.end(), sx) == tokens.end())
        tokens.push_back(x), tokens.push_back(sx);
    }
    for (int64_t j = T - 1; j > 0; --j) std::swap(tokens[j], tokens[draw(j + 1)]);  // Fisher-Yates
    for (int64_t t = 0; t < T; ++t) {
      id[i * T + t] = tokens[t];
      for (int64_t u = 0; u < T; ++u)
        if (tokens[u] == successor(tokens[t], c.vocab)) tg[i * T + t] = u;
    }
  }
  return {ids, targets};
}

// Cross-entropy of each attention row (the scores as logits over the T keys) against its
// successor's position; rows without one (target -1) are ignored.
Variable loss_of(const Scorer& m, const Tensor& ids, const Tensor& targets) {
  const int64_t T = ids.size(1);
  return cross_entropy(reshape(m(ids), {-1, T}), targets.reshape({-1}), {.ignore_index = -1});
}

// What the example measures of one Scorer: on 1024 fresh sequences, and of its token form M.
struct Measures {
  double accuracy = 0;        // rows whose largest weight is on the successor (fresh sequences)
  double on_self = 0;         // rows whose largest weight is on the token itself
  double asymmetry = 0;       // ||M - M^T|| / ||M|| of the form
  double self_best = 0;       // share of tokens a whose highest M[a, b] over all b is b = a
  double successor_best = 0;  // ... is b = s(a)
  Tensor form;                // M (vocab, vocab), float64
  int64_t rank = 0;           // M's numerical rank, computed in float64 (at most d_k)
};

Measures measure(const Scorer& m, const Config& c) {
  NoGradGuard no_grad;
  Measures r;
  Generator test(c.seed + 1000);
  auto [ids, targets] = make_batch(c, test, 1024);
  const Tensor best = argmax(m(ids).data(), -1).reshape({-1}), t = targets.reshape({-1});
  const int64_t T = ids.size(1);
  int64_t rows = 0, hit = 0, self = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.data<int64_t>()[i] < 0) continue;
    ++rows;
    hit += best.data<int64_t>()[i] == t.data<int64_t>()[i];
    self += best.data<int64_t>()[i] == i % T;
  }
  r.accuracy = static_cast<double>(hit) / static_cast<double>(rows);
  r.on_self = static_cast<double>(self) / static_cast<double>(rows);
  r.form = m.form().to(DType::Float64).contiguous();
  r.rank = example::numerical_rank(m.form(DType::Float64));
  const Tensor diff = r.form - r.form.transpose(0, 1);
  r.asymmetry = std::sqrt(sum(diff * diff).item() / sum(r.form * r.form).item());
  const Tensor row_best = argmax(r.form, 1);
  for (int64_t a = 0; a < c.vocab; ++a) {
    r.self_best += row_best.data<int64_t>()[a] == a;
    r.successor_best += row_best.data<int64_t>()[a] == successor(a, c.vocab);
  }
  r.self_best /= static_cast<double>(c.vocab), r.successor_best /= static_cast<double>(c.vocab);
  return r;
}

struct RunResult {
  bool tied;
  std::vector<double> loss;
  Measures init;     // before the first step: the baseline every learned number is read against
  Measures trained;  // after c.steps steps
};

RunResult train(const Config& c, bool tied, int64_t dk = 0) {
  Generator g(c.seed);  // the same embeddings and W_Q for both
  Scorer m(c, tied, g, dk);
  RunResult r{tied, {}, measure(m, c), {}};
  Generator data(c.seed + 1);  // the same batches for both
  optim::Adam opt(m.parameters(), {.lr = c.lr});
  viz::ProgressBar bar(c.steps, tied ? "W_Q = W_K  " : "W_Q, W_K   ");
  for (int step = 1; step <= c.steps; ++step) {
    auto [ids, targets] = make_batch(c, data, c.batch);
    Variable loss = loss_of(m, ids, targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
    r.loss.push_back(loss.item());
    bar.update(step, loss.item(), -1, c.batch * 2 * c.pairs);
  }
  bar.finish();
  r.trained = measure(m, c);
  return r;
}

// One row of the width table: separate W_Q, W_K of width dk, trained as above.
struct WidthRow {
  int64_t dk = 0, parameters = 0, rank = 0;  // W_Q and W_K's parameters; the numerical rank of M
  Measures trained;
};
std::vector<WidthRow> width_table(const Config& c, const std::vector<int64_t>& dks) {
  std::vector<WidthRow> rows;
  for (int64_t dk : dks) {
    const RunResult r = train(c, false, dk);
    rows.push_back({dk, 2 * dk * c.dim, r.trained.rank, r.trained});
  }
  return rows;
}

}  // namespace related
