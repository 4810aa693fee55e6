#include "minigrad/inspect/head_scores.h"

#include <algorithm>

#include "minigrad/autograd/grad_mode.h"
#include "minigrad/autograd/ops.h"
#include "minigrad/tensor/generator.h"
#include "minigrad/tensor/ops.h"

namespace mg::inspect {

using namespace mg::nn;  // the modules it looks into
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

namespace {
// The probe checked, and the length n of the span score_heads repeats (r_1..r_n r_1..r_n).
int64_t span_length(const Tensor& probe, int64_t vocab, const HeadScoreOptions& o) {
  MG_CHECK(probe.defined(), StateError, "score_heads: the probe is undefined; expected int64 ids (B, T)");
  MG_CHECK(probe.dtype() == DType::Int64, DTypeError, "score_heads: the probe must be int64 token ids, got {} {}",
           dtype_name(probe.dtype()), shape_str(probe.shape()));
  MG_CHECK(probe.dim() == 2 && probe.size(1) >= 2, ShapeError,
           "score_heads: the probe must be ids (B, T) with T >= 2, got shape {}", shape_str(probe.shape()));
  MG_CHECK(vocab >= 1, ValueError, "score_heads: vocab must be >= 1, got {}", vocab);
  const int64_t T = probe.size(1), n = o.induction_length > 0 ? o.induction_length : T / 2;
  MG_CHECK(n >= 2 && n <= T / 2, ValueError,  // not 2 n <= T: 2 n may overflow
           "score_heads: the repeated span needs 2 <= n and 2n <= the probe's length {}, got n = {}", T, n);
  MG_CHECK(o.induction_batch >= 1, ValueError, "score_heads: induction_batch must be >= 1, got {}", o.induction_batch);
  return n;
}

// One head's copying score on the repeated sequences ids (B, 2n): over the second copy's queries,
// how much removing the head lowers the logit of the token it attends to most (the logits `full`
// with it and `ablated` without, (B, 2n, vocab) float64), less the mean change over the vocabulary.
// w: the head's weights (B, 2n, 2n).
double copying(const Tensor& full, const Tensor& ablated, const Tensor& w, const int64_t* ids, int64_t n,
               int64_t vocab) {
  const double *pf = full.data<double>(), *pa = ablated.data<double>(), *pw = w.data<double>();
  const int64_t B = full.size(0), T = 2 * n;
  double total = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = n; t < T; ++t) {
      const double* wr = pw + (b * T + t) * T;
      const int64_t key = std::max_element(wr, wr + T) - wr;
      const int64_t token = ids[b * T + key];
      double mean_d = 0;
      const int64_t row = (b * T + t) * vocab;
      for (int64_t j = 0; j < vocab; ++j) mean_d += pf[row + j] - pa[row + j];
      total += (pf[row + token] - pa[row + token]) - mean_d / static_cast<double>(vocab);
    }
  return total / static_cast<double>(B * n);
}
}  // namespace

std::vector<HeadScore> score_heads(Module& model, const std::function<void(const Tensor& ids)>& forward,
                                   const Tensor& probe, int64_t vocab, const HeadScoreOptions& o) {
  const int64_t n = span_length(probe, vocab, o);
  NoGradGuard no_grad;
  AttentionCapture cap(model);
  forward(probe);
  std::vector<std::vector<double>> prev, first;
  std::vector<bool> self;  // keys from the same sequence as the queries (not cross-attention)
  for (const std::string& name : cap.names()) {
    const Tensor& w = cap.at(name).weights;
    self.push_back(cap.at(name).self_attention);
    prev.push_back(diagonal_mean(w, 1, 1));
    first.push_back(diagonal_mean(w, 1, -1));
  }
  // r_1..r_n r_1..r_n: at position t = n + i (token r_{i+1}) an induction head attends to
  // position i + 1, i.e. back n - 1
  Generator g(o.seed);
  const Tensor span = randint(0, vocab, {o.induction_batch, n}, g);
  const Tensor repeated = concat({span, span}, 1);
  forward(repeated);
  std::vector<Tensor> repeated_weights;
  for (const std::string& name : cap.names()) repeated_weights.push_back(cap.at(name).weights);
  std::vector<HeadScore> out;
  for (size_t l = 0; l < cap.names().size(); ++l) {
    const std::vector<double> ind = diagonal_mean(repeated_weights[l], n, n - 1);
    for (size_t h = 0; h < ind.size(); ++h) {
      HeadScore s{cap.names()[l], static_cast<int64_t>(h), prev[l][h], first[l][h], ind[h], NAN, "mixed"};
      if (!self[l]) {  // keys from another sequence: no position of them is "t - 1"
        s.previous_token = s.first_token = s.induction = NAN, s.label = "cross-attention";
        out.push_back(s);
        continue;
      }
      double best = o.threshold;
      for (auto [score, label] :
           {std::pair{s.previous_token, "previous token"}, {s.first_token, "first token"}, {s.induction, "induction"}})
        if (score >= best) best = score, s.label = label;
      out.push_back(s);
    }
  }
  if (!o.logits) return out;
  // Copying: the change of the logits when the head is removed, read at the token the head
  // attends to most, against the mean change over the vocabulary.
  const Tensor full = o.logits(repeated).data().to(DType::Float64).contiguous();
  MG_CHECK(full.dim() == 3 && full.size(0) == o.induction_batch && full.size(1) == 2 * n && full.size(2) == vocab,
           ShapeError, "score_heads: options.logits must return (B, T, vocab) = ({}, {}, {}), got {}",
           o.induction_batch, 2 * n, vocab, shape_str(full.shape()));
  const Tensor rep = repeated.contiguous();  // (concat already gives one; kept alive while read)
  const int64_t* ids = rep.data<int64_t>();
  for (HeadScore& s : out) {
    const size_t l =
        static_cast<size_t>(std::find(cap.names().begin(), cap.names().end(), s.layer) - cap.names().begin());
    // Only a self-attention over the 2n tokens themselves has a key s* whose token is ids[s*].
    const Tensor& rw = repeated_weights[l];
    if (s.label == "cross-attention" || rw.size(2) != 2 * n || rw.size(3) != 2 * n) continue;
    Tensor ablated;
    {
      HeadAblation remove(model, s.layer, {s.head});
      ablated = o.logits(repeated).data().to(DType::Float64).contiguous();
    }
    const Tensor w = rw.narrow(1, s.head, 1).squeeze(1).to(DType::Float64).contiguous();  // (B, T, T)
    s.copying = copying(full, ablated, w, ids, n, vocab);
  }
  return out;
}

IclScore icl_score(const std::function<Variable(const Tensor& ids)>& logits, int64_t vocab, int64_t n, int64_t batch,
                   uint64_t seed) {
  MG_CHECK(vocab >= 2 && n >= 2 && batch >= 1, ValueError,
           "icl_score: needs vocab >= 2, n >= 2, batch >= 1, got {}, {}, {}", vocab, n, batch);
  NoGradGuard no_grad;
  Generator g(seed);
  const Tensor span = randint(0, vocab, {batch, n}, g);
  const Tensor ids = concat({span, span}, 1);  // (B, 2n)
  const Tensor z = logits(ids).data();
  MG_CHECK(z.dim() == 3 && z.size(0) == batch && z.size(1) == 2 * n && z.size(2) == vocab, ShapeError,
           "icl_score: logits must return (B, T, vocab) = ({}, {}, {}), got {}", batch, 2 * n, vocab,
           shape_str(z.shape()));
  // position t predicts token t + 1: the first copy's targets are positions 1..n-1, the second's n..2n-1
  const Tensor nll = -gather(log_softmax(z.narrow(1, 0, 2 * n - 1).to(DType::Float64), -1), 2,
                             ids.narrow(1, 1, 2 * n - 1).unsqueeze(2));  // (B, 2n-1, 1)
  IclScore r;
  r.early = mean(nll.narrow(1, 0, n - 1)).item();
  r.late = mean(nll.narrow(1, n - 1, n)).item();
  r.score = r.late - r.early;
  return r;
}

Variable head_value_writes(const MultiheadAttention& mha, const Variable& value, int64_t head) {
  MG_CHECK(head >= 0 && head < mha.num_heads, ValueError, "head_value_writes: head {} does not exist (it has {} heads)",
           head, mha.num_heads);
  const int64_t d = mha.head_dim, group = mha.num_heads / mha.num_kv_heads;
  const Variable v = narrow(mha.w_v.forward(value), -1, (head / group) * d, d);  // (B, Tk, d)
  return matmul(v, transpose(narrow(mha.w_o.weight, 1, head * d, d), 0, 1));     // (B, Tk, E)
}

HeadAblation::HeadAblation(Module& model, const std::string& layer, std::vector<int64_t> heads) {
  Module* found = nullptr;
  for (auto& [name, m] : model.named_modules())
    if (name == layer) found = m;
  auto* mha = dynamic_cast<MultiheadAttention*>(found);
  MG_CHECK(mha, ValueError, "HeadAblation: no MultiheadAttention at \"{}\" in this {}", layer, model.type_name());
  for (int64_t h : heads)
    MG_CHECK(h >= 0 && h < mha->num_heads, ValueError, "HeadAblation: head {} of {} does not exist (it has {} heads)",
             h, layer, mha->num_heads);
  hook_ = mha->register_forward_hook(
      [heads = std::move(heads)](const Module& m, const std::vector<Variable>& in, std::vector<Variable>& out) {
        // The module the hook runs on (not a pointer kept from here: the model may have moved).
        const auto& mha = dynamic_cast<const MultiheadAttention&>(m);
        // out = {output (B, Tq, E), weights (B, H, Tq, Tk), scores}; in = {query, key, value}
        Variable output = out[0];
        for (int64_t h : heads) {  // minus head h's part: its weights times what it writes from each key
          const Variable weights = reshape(narrow(out[1], 1, h, 1), {out[1].size(0), out[1].size(2), out[1].size(3)});
          output = output - matmul(weights, head_value_writes(mha, in[2], h));
        }
        out[0] = output;
      });
}

}  // namespace mg::inspect
