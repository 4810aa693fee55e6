#include "minigrad/nn/head_scores.h"

#include "minigrad/autograd/grad_mode.h"
#include "minigrad/tensor/generator.h"
#include "minigrad/tensor/ops.h"

namespace mg::nn {
namespace {

// Mean over batch and the queries t in [from, T) of w[b, h, t, t - back]  (w: (B, H, T, T)),
// per head; back = -1 means key 0 instead.
std::vector<double> diagonal_mean(const Tensor& weights, int64_t from, int64_t back) {
  const Tensor w = weights.to(DType::Float64).contiguous();
  const int64_t B = w.size(0), H = w.size(1), T = w.size(2), S = w.size(3);
  const double* p = w.data<double>();
  std::vector<double> out(static_cast<size_t>(H), 0.0);
  for (int64_t h = 0; h < H; ++h) {
    double s = 0;
    int64_t n = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = from; t < T; ++t) {
        const int64_t k = back < 0 ? 0 : t - back;
        if (k < 0 || k >= S) continue;
        s += p[((b * H + h) * T + t) * S + k], ++n;
      }
    out[static_cast<size_t>(h)] = n ? s / static_cast<double>(n) : 0.0;
  }
  return out;
}

}  // namespace

std::vector<HeadScore> score_heads(Module& model, const std::function<void(const Tensor& ids)>& forward, const Tensor& probe,
                                   int64_t vocab, const HeadScoreOptions& o) {
  MG_CHECK(probe.dim() == 2 && probe.dtype() == DType::Int64 && probe.size(1) >= 2, ShapeError,
           "score_heads: the probe must be Int64 ids (B, T) with T >= 2, got {} {}", dtype_name(probe.dtype()),
           shape_str(probe.shape()));
  MG_CHECK(vocab >= 1, ValueError, "score_heads: vocab must be >= 1, got {}", vocab);
  const int64_t T = probe.size(1), n = o.induction_length > 0 ? o.induction_length : T / 2;
  MG_CHECK(n >= 2 && 2 * n <= T, ValueError,
           "score_heads: the repeated span needs 2 <= n and 2n <= the probe's length {}, got n = {}", T, n);
  MG_CHECK(o.induction_batch >= 1, ValueError, "score_heads: induction_batch must be >= 1, got {}", o.induction_batch);
  NoGradGuard no_grad;
  AttentionCapture cap(model);
  forward(probe);
  std::vector<std::vector<double>> prev, first;
  for (const std::string& name : cap.names()) {
    const Tensor& w = cap.at(name).weights;
    prev.push_back(diagonal_mean(w, 1, 1));
    first.push_back(diagonal_mean(w, 1, -1));
  }
  // r_1..r_n r_1..r_n: at position t = n + i (token r_{i+1}) an induction head attends to
  // position i + 1, i.e. back n - 1
  Generator g(o.seed);
  const Tensor span = randint(0, vocab, {o.induction_batch, n}, g);
  forward(concat({span, span}, 1));
  std::vector<HeadScore> out;
  for (size_t l = 0; l < cap.names().size(); ++l) {
    const std::vector<double> ind = diagonal_mean(cap.at(cap.names()[l]).weights, n, n - 1);
    for (size_t h = 0; h < ind.size(); ++h) {
      HeadScore s{cap.names()[l], static_cast<int64_t>(h), prev[l][h], first[l][h], ind[h], "mixed"};
      double best = o.threshold;
      for (auto [score, label] : {std::pair{s.previous_token, "previous token"}, {s.first_token, "first token"}, {s.induction, "induction"}})
        if (score >= best) best = score, s.label = label;
      out.push_back(s);
    }
  }
  return out;
}

}  // namespace mg::nn
