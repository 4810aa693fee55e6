// Checks exercise 7, causal_mask: its entries for T = 1 and T = 3, and in an nn::MultiheadAttention
// the same output as is_causal, and no earlier position changed by a later token.
#include "07_causal_mask.h"

#include "check.h"

namespace exercises {
namespace {

const Hint kHint{"07_causal_mask", "docs/04-nn.md", "The layers"};

TEST(CausalMask, HintNamesARealSection) { expect_hint_is_real(kHint); }

TEST(CausalMask, Entries) {
  const mg::Tensor m3 = causal_mask(3);
  ASSERT_TRUE(m3.defined()) << "causal_mask(3) returned an undefined tensor";
  EXPECT_EQ(m3.dtype(), mg::DType::Bool) << "the mask's dtype (Bool: true where a query may not look)";
  expect_close(m3, mg::tensor({0, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 3}), 0, "causal_mask(3) (1: masked)");
  expect_close(causal_mask(1), mg::tensor({0}, {1, 1}), 0, "causal_mask(1): one token sees itself");
}

TEST(CausalMask, SameAsIsCausalInMultiheadAttention) {
  mg::Generator gen(90);
  mg::nn::MultiheadAttention mha(8, 2, {}, gen);
  mha.to(mg::DType::Float64);
  const mg::Variable x(random64({2, 6, 8}, 91));
  expect_close(mha(x, {.attn_mask = causal_mask(6)}).output.data(), mha(x, {.is_causal = true}).output.data(), 1e-12,
               "attention output with attn_mask = causal_mask(6) against is_causal");
}

TEST(CausalMask, LaterTokensDoNotChangeEarlierOutputs) {
  // Change the last token: with the mask, outputs 0 .. 4 stay exactly as they were; output 5 moves.
  mg::Generator gen(92);
  mg::nn::MultiheadAttention mha(8, 2, {}, gen);
  mha.to(mg::DType::Float64);
  const mg::Tensor x = random64({1, 6, 8}, 93), x2 = x.clone();
  x2.narrow(1, 5, 1).copy_(random64({1, 1, 8}, 94));
  const mg::Tensor y = mha(mg::Variable(x), {.attn_mask = causal_mask(6)}).output.data();
  const mg::Tensor y2 = mha(mg::Variable(x2), {.attn_mask = causal_mask(6)}).output.data();
  expect_close(y2.narrow(1, 0, 5), y.narrow(1, 0, 5), 1e-12, "outputs 0-4 after changing token 5");
  EXPECT_GT(max_abs_diff(y2.narrow(1, 5, 1), y.narrow(1, 5, 1)), 1e-3) << "output 5 should see token 5 change";
}

}  // namespace
}  // namespace exercises
