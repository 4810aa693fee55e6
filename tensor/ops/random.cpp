// Random sampling: categories from weights, permutations.
#include "minigrad/tensor/ops/random.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/nn_functional.h"
#include "minigrad/tensor/ops/reduce.h"
#include "minigrad/tensor/ops/sort.h"

namespace mg {

// With replacement, each draw is u ~ U[0, total) against the running sums of the row's weights:
// id = the first i with w_0 + ... + w_i > u. Without, the drawn weight is set to 0 before the next
// draw. Rows are drawn one after the other, so the numbers depend only on the generator.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator& gen) {
  MG_CHECK(probs.defined(), StateError, "multinomial: the weights are undefined");
  MG_CHECK(is_floating(probs.dtype()), DTypeError, "multinomial: weights must be floating, got {}",
           dtype_name(probs.dtype()));
  MG_CHECK(probs.dim() == 1 || probs.dim() == 2, ShapeError, "multinomial: weights must be (n) or (batch, n), got {}",
           shape_str(probs.shape()));
  MG_CHECK(num_samples > 0, ValueError, "multinomial: num_samples must be positive, got {}", num_samples);
  const Tensor w =
      probs.reshape({probs.dim() == 1 ? 1 : probs.size(0), probs.size(-1)}).to(DType::Float64).contiguous();
  const int64_t B = w.size(0), n = w.size(1);
  MG_CHECK(replacement || num_samples <= n, ValueError,
           "multinomial: cannot draw {} samples without replacement from {} categories", num_samples, n);
  Tensor out = empty({B, num_samples}, DType::Int64);
  const double* pw = w.data<double>();
  int64_t* po = out.data<int64_t>();
  std::vector<double> row(n), cum(n);
  for (int64_t b = 0; b < B; ++b) {
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; ++i) {
      row[i] = pw[b * n + i];
      MG_CHECK(std::isfinite(row[i]) && row[i] >= 0, ValueError,
               "multinomial: weight {} of row {} is {}; weights must be finite and >= 0", i, b, row[i]);
      nonzero += row[i] > 0;
    }
    MG_CHECK(nonzero > 0, ValueError, "multinomial: row {} has no positive weight to draw from", b);
    MG_CHECK(replacement || num_samples <= nonzero, ValueError,
             "multinomial: row {} has {} categories of non-zero weight; cannot draw {} without replacement", b, nonzero,
             num_samples);
    for (int64_t s = 0; s < num_samples; ++s) {
      double total = 0;
      for (int64_t i = 0; i < n; ++i) cum[i] = total += row[i];
      const double u = gen.next_double() * total;
      int64_t id = std::upper_bound(cum.begin(), cum.end(), u) - cum.begin();
      while (id >= n || row[id] == 0) --id;  // u within rounding of the total: the last category with weight
      po[b * num_samples + s] = id;
      if (!replacement) row[id] = 0;
    }
  }
  return probs.dim() == 1 ? out.reshape({num_samples}) : out;
}

// Fisher-Yates: for i = n-1 down to 1, swap element i with a uniform pick among 0..i.
// Keeping the top k: every logit below the k-th largest of its row becomes -inf (weight 0 after the
// softmax); ties with the k-th are kept, as in nanoGPT.
Tensor sample_logits(const Tensor& logits, double temperature, std::optional<int64_t> top_k, Generator& gen) {
  MG_CHECK(logits.defined(), StateError, "sample_logits: the logits are undefined");
  MG_CHECK(is_floating(logits.dtype()), DTypeError, "sample_logits: expected floating logits, got {}",
           dtype_name(logits.dtype()));
  MG_CHECK(
      logits.dim() == 2 && logits.size(1) > 0, ShapeError,
      "sample_logits: expected floating logits (batch, vocab) with vocab >= 1, got {}",
      logits.defined() ? fmt::format("{} {}", dtype_name(logits.dtype()), shape_str(logits.shape())) : "undefined");
  MG_CHECK(std::isfinite(temperature) && temperature >= 0, ValueError,
           "sample_logits: temperature must be finite and >= 0 (0 = the most likely token), got {}", temperature);
  MG_CHECK(!top_k || *top_k >= 1, ValueError, "sample_logits: top_k must be >= 1, got {}", top_k.value_or(0));
  if (logits.size(0) == 0) return empty({0, 1}, DType::Int64);
  if (temperature == 0) return argmax(logits, -1, true);
  Tensor l = logits / temperature;
  if (top_k && *top_k < l.size(1)) l = masked_fill(l, lt(l, topk(l, *top_k).first.narrow(1, *top_k - 1, 1)), -INFINITY);
  return multinomial(softmax(l, -1), 1, false, gen);
}

Tensor randperm(int64_t n, Generator& gen) {
  MG_CHECK(n >= 0, ValueError, "randperm: n must be >= 0, got {}", n);
  Tensor out = empty({n}, DType::Int64);
  int64_t* p = out.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[gen.next_below(static_cast<uint64_t>(i) + 1)]);
  return out;
}

}  // namespace mg
