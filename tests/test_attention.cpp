// MultiheadAttention and the Transformer layers: PyTorch golden values (outputs, per-head
// attention weights, every parameter's gradient), masks, heads as slices, gradient checks.
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;

namespace {
constexpr double kTol = 1e-9;

// Run `fn` on the golden case's inputs with `m`'s parameters set from it, in float64; compare
// the output (and attention weights), the input gradients and every parameter gradient.
void check_module(nn::Module& m, const std::string& name,
                  const std::function<std::pair<Variable, Variable>(const std::vector<Variable>&)>& fn) {
  SCOPED_TRACE(name);
  const auto& c = mgtest::golden(name);
  m.to(DType::Float64);
  mgtest::load_golden_params(m, c);
  std::vector<Variable> in;
  for (int i = 0; c.count("in" + std::to_string(i)); ++i) {
    const Tensor& t = c.at("in" + std::to_string(i));
    in.emplace_back(t, is_floating(t.dtype()));
  }
  auto [out, weights] = fn(in);
  expect_close(out.data(), c.at("out"), kTol, kTol);
  if (c.count("weights") && weights.defined()) expect_close(weights.data(), c.at("weights"), kTol, kTol);
  sum(out * Variable(c.at("gout"))).backward();
  for (size_t i = 0; i < in.size(); ++i)
    if (c.count("grad" + std::to_string(i))) expect_close(in[i].grad(), c.at("grad" + std::to_string(i)), kTol, kTol);
  mgtest::expect_param_grads(m, c, kTol);
}
}  // namespace

TEST(MultiheadAttention, FourOrdinaryLinearLayers) {
  nn::MultiheadAttention mha(8, 2);
  std::vector<std::string> names;
  for (auto& [n, p] : mha.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"w_q.weight", "w_q.bias", "w_k.weight", "w_k.bias", "w_v.weight",
                                             "w_v.bias", "w_o.weight", "w_o.bias"}));
  EXPECT_EQ(mha.w_q.weight.shape(), (Shape{8, 8}));  // one matrix for all heads
  EXPECT_EQ(mha.num_parameters(), 4 * (64 + 8));
  // PyTorch's init: in-projections Xavier-uniform over the stacked (24, 8) matrix, biases zero
  const double bound = std::sqrt(6.0 / (8 + 24));
  EXPECT_LE(max(abs(mha.w_k.weight.data())).item(), bound);
  EXPECT_EQ(max(abs(mha.w_q.bias.data())).item(), 0);
}

TEST(MultiheadAttention, GoldenSelfAttentionWithCausalMask) {
  nn::MultiheadAttention mha(8, 2);
  check_module(mha, "mha_self_causal", [&](const std::vector<Variable>& v) {
    nn::AttentionOutput o = mha.forward(v[0], v[0], v[0], {triu(ones({5, 5}, DType::Bool), 1)});
    return std::pair{o.output, o.weights};
  });
}

TEST(MultiheadAttention, GoldenSelfAttentionFusedPath) {
  // The same case through the fast path: is_causal instead of an explicit mask, no weights asked
  // for, so Q, K, V come from one GEMM and the fused kernel (autograd/ops/attention.cpp).
  nn::MultiheadAttention mha(8, 2);
  check_module(mha, "mha_self_causal", [&](const std::vector<Variable>& v) {
    nn::AttentionOutput o = mha.forward(v[0], {.is_causal = true});
    EXPECT_FALSE(o.weights.defined());  // proof the fused kernel ran
    return std::pair{o.output, Variable()};
  });
}

TEST(MultiheadAttention, GoldenCrossAttentionWithKeyPadding) {
  nn::MultiheadAttention mha(8, 4);
  check_module(mha, "mha_cross_padding", [&](const std::vector<Variable>& v) {
    nn::AttentionMask mask;
    mask.key_padding_mask = v[3].data();
    nn::AttentionOutput o = mha.forward(v[0], v[1], v[2], mask);
    return std::pair{o.output, o.weights};
  });
}

TEST(MultiheadAttention, CausalFlagEqualsExplicitMaskAndHidesTheFuture) {
  nn::MultiheadAttention mha(6, 3);
  Variable x(rnd({2, 4, 6}, 1).to(DType::Float32));
  nn::AttentionMask causal;
  causal.is_causal = true;
  causal.need_weights = true;
  nn::AttentionOutput a = mha.forward(x, causal), b = mha.forward(x, {triu(ones({4, 4}, DType::Bool), 1)});
  expect_close(a.output.data(), b.output.data(), 0, 0);
  EXPECT_EQ(a.weights.shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(a.scores.shape(), (Shape{2, 3, 4, 4}));
  // every query's weights sum to 1, and nothing above the diagonal
  expect_close(sum(a.weights.data(), {-1}), ones({2, 3, 4}), 1e-6, 0);
  EXPECT_EQ(a.weights.data().at({1, 2, 1, 3}), 0);
  EXPECT_TRUE(std::isinf(a.scores.data().at({0, 0, 0, 1})));
  // softmax of the returned scores is the returned weights
  expect_close(softmax(a.scores.data(), -1), a.weights.data(), 1e-6, 0);
}

TEST(MultiheadAttention, HeadsAreSlicesOfOneProjection) {
  // Head h of Q is x @ W_Q[h*d:(h+1)*d, :]^T (+ bias slice): no per-head matrix on top.
  Generator g(2);
  nn::MultiheadAttention mha(8, 2, {}, g);
  nn::init::normal_(mha.w_q.bias, 0, 1, g);
  nn::init::normal_(mha.w_k.bias, 0, 1, g);
  Tensor x = randn({1, 3, 8}, g);
  nn::AttentionOutput o = mha.forward(Variable(x), {.need_weights = true});
  for (int64_t h = 0; h < 2; ++h) {
    Tensor wq = mha.w_q.weight.data().narrow(0, 4 * h, 4), bq = mha.w_q.bias.data().narrow(0, 4 * h, 4);
    Tensor wk = mha.w_k.weight.data().narrow(0, 4 * h, 4), bk = mha.w_k.bias.data().narrow(0, 4 * h, 4);
    Tensor q = matmul(x.reshape({3, 8}), wq.transpose(0, 1)) + bq;
    Tensor k = matmul(x.reshape({3, 8}), wk.transpose(0, 1)) + bk;
    Tensor scores = matmul(q, k.transpose(0, 1)) / 2.0;  // sqrt(d_k) = sqrt(4)
    expect_close(o.scores.data().narrow(1, h, 1).reshape({3, 3}), scores, 1e-5, 1e-5);
  }
}

TEST(MultiheadAttention, HookSeesEveryForward) {
  nn::MultiheadAttention mha(4, 2);
  int calls = 0;
  Shape seen;
  mha.set_hook([&](const nn::AttentionOutput& o) {
    ++calls;
    seen = o.weights.shape();
  });
  mha.forward(Variable(ones({3, 5, 4})), Variable(ones({3, 2, 4})), Variable(ones({3, 2, 4})));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (Shape{3, 2, 5, 2}));
}

TEST(MultiheadAttention, ErrorsNameShapes) {
  nn::MultiheadAttention mha(8, 2);
  try {
    mha.forward(Variable(ones({5, 8})));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("MultiheadAttention: query must be (batch, seq, 8), got (5, 8)"));
  }
  EXPECT_THROW(mha.forward(Variable(ones({2, 3, 8})), Variable(ones({3, 4, 8})), Variable(ones({3, 4, 8}))), ShapeError);
  nn::AttentionMask bad;
  bad.key_padding_mask = ones({2, 3}, DType::Bool);
  EXPECT_THROW(mha.forward(Variable(ones({2, 5, 8})), bad), ShapeError);
}

TEST(Transformer, GoldenEncoderLayers) {
  nn::TransformerEncoderLayer post(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  check_module(post, "encoder_post_ln_relu", [&](const std::vector<Variable>& v) { return std::pair{post.forward(v[0]), Variable()}; });
  nn::TransformerEncoderLayer pre(8, 2, {.dim_feedforward = 16, .dropout = 0.0, .activation = "gelu", .norm_first = true});
  check_module(pre, "encoder_pre_ln_gelu", [&](const std::vector<Variable>& v) {
    return std::pair{pre.forward(v[0], {triu(ones({4, 4}, DType::Bool), 1)}), Variable()};
  });
}

TEST(Transformer, GoldenDecoderLayers) {
  const nn::AttentionMask causal{triu(ones({3, 3}, DType::Bool), 1)};
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
  nn::GPT gpt({.vocab = 11, .context = 6, .dim = 8, .heads = 2, .layers = 2}, g);
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

namespace {
// The composed reference: softmax(q k^T / sqrt(d) + causal mask) @ v, op by op.
Variable composed_attention(const Variable& q, const Variable& k, const Variable& v, bool causal) {
  Variable s = matmul(q, transpose(k, -2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (causal) s = masked_fill(s, triu(ones({q.size(2), k.size(2)}, DType::Bool), 1), -INFINITY);
  return matmul(softmax(s, -1), v);
}
}  // namespace

TEST(FusedAttention, EqualsTheComposedPathOutputsAndGradients) {
  // 70 queries: more than one block of 64, and a partial last block. Tq != Tk for the cross case.
  for (auto [tq, tk, causal] : {std::tuple{70, 70, true}, {70, 70, false}, {5, 9, false}, {9, 5, true}}) {
    SCOPED_TRACE(fmt::format("Tq {} Tk {} causal {}", tq, tk, causal));
    for (DType dt : {DType::Float64, DType::Float32}) {
      const double tol = dt == DType::Float64 ? 1e-12 : 2e-5;
      Variable q(rnd({2, 3, tq, 5}, 1).to(dt), true), k(rnd({2, 3, tk, 5}, 2).to(dt), true), v(rnd({2, 3, tk, 5}, 3).to(dt), true);
      Tensor g = rnd({2, 3, tq, 5}, 4).to(dt);
      Variable a = scaled_dot_product_attention(q, k, v, causal);
      sum(a * Variable(g)).backward();
      std::vector<Tensor> fused_grads{q.grad(), k.grad(), v.grad()};
      q.zero_grad(), k.zero_grad(), v.zero_grad();
      Variable b = composed_attention(q, k, v, causal);
      sum(b * Variable(g)).backward();
      expect_close(a.data(), b.data(), tol, tol);
      expect_close(fused_grads[0], q.grad(), tol, tol);
      expect_close(fused_grads[1], k.grad(), tol, tol);
      expect_close(fused_grads[2], v.grad(), tol, tol);
    }
  }
}

TEST(FusedAttention, Gradcheck) {
  for (bool causal : {true, false})
    mgtest::expect_gradcheck([causal](const std::vector<Variable>& v) { return scaled_dot_product_attention(v[0], v[1], v[2], causal); },
                             {rnd({1, 2, 4, 3}, 5), rnd({1, 2, 4, 3}, 6), rnd({1, 2, 4, 3}, 7)});
  // non-contiguous inputs: the head-split view of a (B, T, H*d) tensor
  mgtest::expect_gradcheck([](const std::vector<Variable>& v) {
    auto heads = [](const Variable& x) { return nn::split_heads(x, 2); };
    return scaled_dot_product_attention(heads(v[0]), heads(v[1]), heads(v[2]), true);
  }, {rnd({2, 3, 4}, 8), rnd({2, 3, 4}, 9), rnd({2, 3, 4}, 10)});
  // q, k, v read in place from one (B, T, 3E) projection
  for (bool causal : {true, false})
    mgtest::expect_gradcheck([causal](const std::vector<Variable>& v) { return self_attention_qkv(v[0], 2, causal); },
                             {rnd({2, 3, 12}, 11)});
  EXPECT_THROW(self_attention_qkv(Variable(ones({2, 3, 10})), 2), ShapeError);
}

TEST(FusedAttention, MultiheadAttentionFusedEqualsComposed) {
  Generator g1(3), g2(3);
  nn::MultiheadAttention fused(8, 2, {}, g1), composed(8, 2, {.fused = false}, g2);
  for (nn::MultiheadAttention* m : {&fused, &composed}) m->to(DType::Float64);
  Variable x(rnd({2, 6, 8}, 11), true), x2(rnd({2, 6, 8}, 11), true);
  nn::AttentionMask causal;
  causal.is_causal = true;
  Variable a = fused.forward(x, causal).output, b = composed.forward(x2, causal).output;
  EXPECT_FALSE(fused.forward(x, causal).weights.defined());  // the fused kernel builds no (T, T) weights
  expect_close(a.data(), b.data(), 1e-12, 1e-12);
  sum(a * a).backward();
  sum(b * b).backward();
  expect_close(x.grad(), x2.grad(), 1e-12, 1e-12);
  for (size_t i = 0; i < fused.parameters().size(); ++i)
    expect_close(fused.parameters()[i].grad(), composed.parameters()[i].grad(), 1e-12, 1e-12);
}

TEST(FusedAttention, Errors) {
  Variable q(ones({2, 3, 4, 5})), k(ones({2, 3, 4, 6}));
  EXPECT_THROW(scaled_dot_product_attention(q, k, k), ShapeError);
  EXPECT_THROW(scaled_dot_product_attention(Variable(ones({3, 4, 5})), q, q), ShapeError);
  Variable no_keys(ones({2, 3, 0, 5}));  // softmax over nothing: refused rather than made up
  EXPECT_THROW(scaled_dot_product_attention(q, no_keys, no_keys), ShapeError);
}
