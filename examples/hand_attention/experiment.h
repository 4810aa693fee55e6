#pragma once
// hand_attention, the experiment: the hand-set head, the same head learned, and one backward pass
// by hand. The tests include it; main.cpp runs it, report.h prints and draws what it measured.

#include <array>
#include <cmath>

#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace hand_attention {
using namespace mg;

constexpr int64_t kDim = 2;  // one-hot embeddings over {A, B}
const std::vector<std::string> kTokens = {"A", "B"};

struct Config {
  int64_t seq_len = 8;  // training sequences: seq_len tokens, exactly one of them B
  int64_t batch = 64;   // sequences per step
  int steps = 1000;     // Adam steps
  double lr = 0.02;     // Adam learning rate
  uint64_t seed = 0;    // same seed, same run
  std::string out = "runs/hand_attention";
};

// ---- part 1: the hand-set head ------------------------------------------------------------
struct HandResult {
  Tensor x, w_q, w_k, q, k, scores, attn, scores_scaled, attn_scaled;
  Tensor out;  // attention V with V = X (W_V = I): each row a mix of the tokens' one-hot vectors
};

HandResult hand_set() {
  HandResult r;
  r.x = tensor({1, 0, 1, 0, 0, 1, 1, 0}, {4, kDim});  // A A B A as rows of E
  r.w_q = tensor({0, 1, 0, 1}, {2, 2});
  r.w_k = tensor({10, 0, 0, 10}, {2, 2});
  r.q = matmul(r.x, r.w_q);                     // every row (0, 1): "looking for B"
  r.k = matmul(r.x, r.w_k);                     // A -> (10, 0), B -> (0, 10)
  r.scores = matmul(r.q, r.k.transpose(0, 1));  // 10 where the key is B, else 0
  r.attn = softmax(r.scores, 1);
  r.scores_scaled = r.scores / std::sqrt(static_cast<double>(kDim));
  r.attn_scaled = softmax(r.scores_scaled, 1);
  r.out = matmul(r.attn_scaled, r.x);  // every row ~ (0.003, 0.997): "B"
  return r;
}

// ---- part 2: the same head, learned ---------------------------------------------------------
// A single attention head: only W_Q and W_K are parameters. The values are the positions
// (one-hot), so row t of the attention *is* position t's answer to "where is the B?".
struct Head : nn::Callable<Head> {
  nn::Linear w_q, w_k;  // (2, 2) each, no bias: weight = W^T in the row-vector convention
  explicit Head(Generator& g) : w_q(kDim, kDim, {.bias = false}, g), w_k(kDim, kDim, {.bias = false}, g) {
    register_module("w_q", w_q);
    register_module("w_k", w_k);
  }
  // x: (B, T, 2) one-hot -> scores (B, T, T) = Q K^T / sqrt(2)
  Variable scores(const Variable& x) const {
    return matmul(w_q(x), transpose(w_k(x), 1, 2)) / std::sqrt(static_cast<double>(kDim));
  }
  // W_Q and W_K in the row-vector convention, and their bilinear form W_Q W_K^T.
  Tensor W_Q() const { return w_q.weight.data().transpose(0, 1).contiguous(); }
  Tensor W_K() const { return w_k.weight.data().transpose(0, 1).contiguous(); }
  std::string type_name() const override { return "Head"; }
};

struct Batch {
  Tensor x;      // (B, T, 2) one-hot tokens
  Tensor where;  // (B,) position of the B
};

Batch make_batch(Generator& g, int64_t batch, int64_t T) {
  Tensor where = randint(0, T, {batch}, g);
  Tensor ids = zeros({batch, T}, DType::Int64);
  for (int64_t b = 0; b < batch; ++b) ids.data<int64_t>()[b * T + where.data<int64_t>()[b]] = 1;
  return {one_hot(ids, kDim), where};
}

// Cross-entropy of each attention row against the B's position: minimising it pushes every
// row's attention onto the B.
Variable loss_of(const Head& head, const Batch& b, int64_t T) {
  Variable s = head.scores(Variable(b.x));
  Tensor targets = b.where.reshape({-1, 1}).expand({b.where.size(0), T}).contiguous().reshape({-1});
  return cross_entropy(reshape(s, {-1, T}), targets);
}

// ---- one backward pass, by hand ------------------------------------------------------------
// On A A B A with the random W_Q, W_K training starts from, and the training loss (every row's
// attention should be on the B, position 2):
//   S = Q K^T / sqrt(d),  P = softmax(S),  L = -(1/T) sum_t log P[t, 2]
// backward, one line per forward line, last first:
//   dP = -(1/T) onehot(2) / P                      (derivative of -log)
//   dS = P * (dP - rowsum(dP * P))                 (softmax: the Jacobian diag(p) - p p^T per row)
//   dQ = dS K / sqrt(d),  dK = dS^T Q / sqrt(d)    (S is a product of Q and K^T)
//   dW_Q = X^T dQ,  dW_K = X^T dK                  (Q = X W_Q, K = X W_K)
// (with values, Y = P V, there would also be dP = dY V^T and dV = P^T dY).
struct BackwardTrace {
  Tensor by_hand, autograd, numeric;  // dL/dW_Q (2, 2), row-vector convention, float64
  double gradcheck_error;             // gradcheck's worst |analytic - numeric| over W_Q and W_K
  bool gradcheck_ok;
};

BackwardTrace trace_backward(const Config& c) {
  Generator g(c.seed);  // the same initial W_Q, W_K as train()
  Head head(g);
  head.to(DType::Float64);
  const int64_t T = 4;
  const Tensor X = tensor({1, 0, 1, 0, 0, 1, 1, 0}, {T, kDim}).to(DType::Float64);  // A A B A
  const Batch b{X.reshape({1, T, kDim}), from_vector<int64_t>({2}, {1})};
  const double sd = std::sqrt(static_cast<double>(kDim));
  BackwardTrace r;
  {  // by hand, each line the derivative of one forward line
    const Tensor WQ = head.W_Q(), WK = head.W_K();
    const Tensor Q = matmul(X, WQ), K = matmul(X, WK);
    const Tensor P = softmax(matmul(Q, K.transpose(0, 1)) / sd, 1);
    const Tensor onehot_b = one_hot(full({T}, 2, DType::Int64), T).to(DType::Float64);
    const Tensor dP = -onehot_b / (P * static_cast<double>(T));
    const Tensor dS = P * (dP - sum(dP * P, {1}, true));
    const Tensor dQ = matmul(dS, K) / sd;
    r.by_hand = matmul(X.transpose(0, 1), dQ);
  }
  {  // autograd: the Linear's weight holds W_Q^T, so its gradient is dW_Q^T
    Variable loss = loss_of(head, b, T);
    loss.backward();
    r.autograd = head.w_q.weight.grad().transpose(0, 1).contiguous();
  }
  {  // central differences on each entry of W_Q
    NoGradGuard no_grad;
    const double eps = 1e-6;
    r.numeric = zeros({kDim, kDim}, DType::Float64);
    Tensor w = head.w_q.weight.data();  // w[j][i] = W_Q[i][j]
    for (int64_t i = 0; i < kDim; ++i)
      for (int64_t j = 0; j < kDim; ++j) {
        const double keep = w.at({j, i});
        w.narrow(0, j, 1).narrow(1, i, 1).fill_(keep + eps);
        const double up = loss_of(head, b, T).item();
        w.narrow(0, j, 1).narrow(1, i, 1).fill_(keep - eps);
        const double down = loss_of(head, b, T).item();
        w.narrow(0, j, 1).narrow(1, i, 1).fill_(keep);
        r.numeric.narrow(0, i, 1).narrow(1, j, 1).fill_((up - down) / (2 * eps));
      }
  }
  const GradcheckResult gc = gradcheck([&] { return loss_of(head, b, T); }, head.parameters());
  r.gradcheck_ok = gc.ok, r.gradcheck_error = gc.error;
  return r;
}

struct Evaluation {
  double accuracy;  // rows whose largest weight is on the B
  double min_mass;  // the smallest attention weight on the B over all rows
  double mean_mass;
  Tensor example_attn;  // (T, T) for the first test sequence
  Tensor example_ids;   // (T,)
};

Evaluation evaluate(const Head& head, int64_t T, Generator& g) {
  NoGradGuard no_grad;
  Batch b = make_batch(g, 512, T);
  Tensor w = softmax(head.scores(Variable(b.x)).data(), -1);  // (N, T, T)
  Tensor target = b.where.reshape({-1, 1, 1}).expand({b.where.size(0), T, 1}).contiguous();
  Tensor mass = gather(w, 2, target);  // (N, T, 1): weight on the B
  Tensor hit = eq(argmax(w, 2, true), target).to(DType::Float32);
  return {mean(hit).item(), -max(-mass).item(), mean(mass).item(), w.narrow(0, 0, 1).reshape({T, T}),
          argmax(b.x.narrow(0, 0, 1), 2).reshape({T})};
}

// Column B minus column A of W_Q W_K^T, for query token A and query token B: softmax ignores a
// constant added to a row, so this difference is all the attention depends on.
std::array<double, 2> form_gap(const Tensor& W_Q, const Tensor& W_K) {
  const Tensor M = matmul(W_Q, W_K.transpose(0, 1));
  return {M.at({0, 1}) - M.at({0, 0}), M.at({1, 1}) - M.at({1, 0})};
}

struct TrainResult {
  Evaluation eval;
  Tensor W_Q0, W_K0, W_Q, W_K;  // initial and learned
  std::vector<double> losses;
  std::vector<std::array<double, 2>> gaps;  // form_gap after every step
};

TrainResult train(const Config& c) {
  Generator g(c.seed);
  Head head(g);
  TrainResult r;
  r.W_Q0 = head.W_Q(), r.W_K0 = head.W_K();
  optim::Adam opt(head.parameters(), {.lr = c.lr});
  viz::ProgressBar bar(c.steps, "train");
  for (int step = 1; step <= c.steps; ++step) {
    Batch b = make_batch(g, c.batch, c.seq_len);
    Variable loss = loss_of(head, b, c.seq_len);
    opt.zero_grad();
    loss.backward();
    opt.step();
    r.losses.push_back(loss.item());
    r.gaps.push_back(form_gap(head.W_Q(), head.W_K()));
    bar.update(step, loss.item(), -1, c.batch * c.seq_len);
  }
  bar.finish();
  r.eval = evaluate(head, c.seq_len, g);
  r.W_Q = head.W_Q(), r.W_K = head.W_K();
  return r;
}

}  // namespace hand_attention
