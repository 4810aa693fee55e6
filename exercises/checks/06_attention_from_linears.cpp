// Checks exercise 6, attention: given the four Linear layers of an nn::MultiheadAttention (random
// weights and biases, float64), the same output as the module, with 1, 2 and 4 heads, with and
// without a mask, and the same gradients for W_Q, W_K, W_V, W_O and x.
#include "06_attention_from_linears.h"

#include "check.h"

namespace exercises {
namespace {

const Hint kHint{"06_attention_from_linears", "docs/05-attention.md", "Is a per-head matrix multiplied onto W_Q?"};

TEST(AttentionFromLinears, HintNamesARealSection) { expect_hint_is_real(kHint); }

// A float64 MultiheadAttention(8, heads) with random weights and non-zero biases (the module
// starts its biases at 0, which would hide a bias left out).
struct Fixture {
  explicit Fixture(int64_t heads) : gen(60 + heads), mha(8, heads, {}, gen) {
    mha.to(mg::DType::Float64);
    uint64_t seed = 70;
    for (mg::nn::Linear* l : {&mha.w_q, &mha.w_k, &mha.w_v, &mha.w_o}) l->bias.data().copy_(random64({8}, seed++));
  }
  mg::Generator gen;
  mg::nn::MultiheadAttention mha;
};

// A Bool (T, T) mask: query i may look at keys i - 1 and i only.
mg::Tensor band_mask(int64_t T) {
  const mg::Tensor band = mg::tril(mg::ones({T, T}), 0) * mg::triu(mg::ones({T, T}), -1);  // 1 on keys i - 1, i
  return mg::eq(band, mg::zeros({T, T}));
}

TEST(AttentionFromLinears, SameOutputAsMultiheadAttention) {
  const mg::Variable x(random64({2, 5, 8}, 80));
  for (int64_t heads : {1, 2, 4}) {
    Fixture f(heads);
    const auto& m = f.mha;
    const std::string which = std::to_string(heads) + " head(s), x (2, 5, 8)";
    expect_close(attention(x, m.w_q, m.w_k, m.w_v, m.w_o, heads).data(), m(x).output.data(), 1e-12, "output, " + which);
    expect_close(attention(x, m.w_q, m.w_k, m.w_v, m.w_o, heads, band_mask(5)).data(),
                 m(x, {.attn_mask = band_mask(5)}).output.data(), 1e-12, "output with a mask, " + which);
  }
}

TEST(AttentionFromLinears, SameGradientsAsMultiheadAttention) {
  // One backward through each with the same upstream gradient: every weight's and x's gradient agree.
  Fixture f(2);
  auto& m = f.mha;
  const mg::Tensor x0 = random64({2, 5, 8}, 81), dy = random64({2, 5, 8}, 82);
  mg::Variable x1(x0.clone(), true), x2(x0.clone(), true);
  attention(x1, m.w_q, m.w_k, m.w_v, m.w_o, 2, band_mask(5)).backward(dy);
  std::vector<mg::Tensor> mine;
  for (mg::Variable& p : m.parameters()) {
    mine.push_back(p.grad().defined() ? p.grad().clone() : mg::Tensor());
    p.zero_grad();
  }
  m(x2, {.attn_mask = band_mask(5)}).output.backward(dy);
  const auto named = m.named_parameters();
  for (size_t i = 0; i < named.size(); ++i)
    expect_close(mine[i], named[i].second.grad(), 1e-10, "gradient of " + named[i].first);
  expect_close(x1.grad(), x2.grad(), 1e-10, "gradient of x");
}

}  // namespace
}  // namespace exercises
