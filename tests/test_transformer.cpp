// The Transformer layers and GPT: PyTorch golden values of whole encoder and decoder layers
// (outputs, input and parameter gradients), gradient checks through every parameter, causality.
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::check_module;
using mgtest::expect_close;
using mgtest::rnd;
using testing::HasSubstr;

TEST(Transformer, GoldenEncoderLayers) {
  nn::TransformerEncoderLayer post(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  check_module(post, "encoder_post_ln_relu", [&](const std::vector<Variable>& v) { return std::pair{post.forward(v[0]), Variable()}; });
  nn::TransformerEncoderLayer pre(8, 2, {.dim_feedforward = 16, .dropout = 0.0, .activation = "gelu", .norm_first = true});
  check_module(pre, "encoder_pre_ln_gelu", [&](const std::vector<Variable>& v) {
    return std::pair{pre.forward(v[0], {triu(ones({4, 4}, DType::Bool), 1)}), Variable()};
  });
}

TEST(Transformer, GoldenDecoderLayers) {
  const nn::AttentionForwardOptions causal{triu(ones({3, 3}, DType::Bool), 1)};
  nn::TransformerDecoderLayer post(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  check_module(post, "decoder_post_ln", [&](const std::vector<Variable>& v) { return std::pair{post.forward(v[0], v[1], causal), Variable()}; });
  nn::TransformerDecoderLayer pre(8, 2, {.dim_feedforward = 16, .dropout = 0.0, .activation = "gelu", .norm_first = true});
  check_module(pre, "decoder_pre_ln_gelu", [&](const std::vector<Variable>& v) { return std::pair{pre.forward(v[0], v[1], causal), Variable()}; });
}

TEST(Transformer, GradcheckOfWholeLayers) {
  nn::TransformerDecoderLayer dec(4, 2, {.dim_feedforward = 8, .dropout = 0.0});
  dec.to(DType::Float64);
  Variable tgt(rnd({1, 3, 4}, 3), true), mem(rnd({1, 2, 4}, 4), true);
  std::vector<Variable> leaves = dec.parameters();
  leaves.push_back(tgt);
  leaves.push_back(mem);
  GradcheckResult r = gradcheck([&] { return dec.forward(tgt, mem, {.is_causal = true}); }, leaves);
  EXPECT_TRUE(r.ok) << r.message;
  nn::GPTBlock block(4, 2);
  block.to(DType::Float64);
  Variable x(rnd({2, 3, 4}, 5), true);
  leaves = block.parameters();
  leaves.push_back(x);
  r = gradcheck([&] { return block.forward(x); }, leaves);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Transformer, GPTModel) {
  Generator g(1);
  nn::GPT gpt(11, 6, {.d_model = 8, .nhead = 2, .num_layers = 2}, g);
  EXPECT_EQ(gpt.named_parameters()[2].first, "blocks.0.ln_1.weight");
  Tensor ids = randint(0, 11, {3, 6}, g);
  EXPECT_EQ(gpt.forward(ids).shape(), (Shape{3, 6, 11}));
  // causal end to end: changing the last token leaves the first five positions' logits alone
  Tensor ids2 = ids.clone();
  ids2.narrow(1, 5, 1).fill_(0);
  ids.narrow(1, 5, 1).fill_(1);
  expect_close(gpt.forward(ids2).data().narrow(1, 0, 5), gpt.forward(ids).data().narrow(1, 0, 5), 0, 0);
  try {
    gpt.forward(zeros({1, 7}, DType::Int64));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("GPT: ids must be (batch, seq) with 1 <= seq <= context 6, got shape (1, 7)"));
  }
}

TEST(Transformer, GPTBlockIsCausal) {
  // Changing a later token must not change an earlier position's output.
  nn::GPTBlock block(8, 2);
  Tensor x = rnd({1, 4, 8}, 6).to(DType::Float32);
  Tensor y = block.forward(Variable(x)).data();
  Tensor x2 = x.clone();
  x2.narrow(1, 3, 1).fill_(5);
  Tensor y2 = block.forward(Variable(x2)).data();
  expect_close(y2.narrow(1, 0, 3), y.narrow(1, 0, 3), 0, 0);
  EXPECT_GT(max(abs(y2.narrow(1, 3, 1) - y.narrow(1, 3, 1))).item(), 1e-3);
}
