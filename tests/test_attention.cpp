// Attention: the fused scaled_dot_product_attention ops, and nn::MultiheadAttention (PyTorch golden
// values of outputs, per-head weights and every parameter's gradient; masks; heads as slices;
// the fused path against the composed one). The Transformer layers and GPT: test_transformer.cpp;
// head scores, HeadAblation and cross-attention telemetry: test_head_scores.cpp.
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;

namespace {
constexpr double kTol = 1e-9;
using mgtest::check_module;
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
    nn::AttentionOutput o = mha(v[0], v[0], v[0], {triu(ones({5, 5}, DType::Bool), 1)});
    return std::pair{o.output, o.weights};
  });
}

TEST(MultiheadAttention, GoldenSelfAttentionFusedPath) {
  // The same case through the fast path: is_causal instead of an explicit mask, no weights asked
  // for, so Q, K, V come from one GEMM and the fused kernel (tensor/ops/attention.cpp).
  nn::MultiheadAttention mha(8, 2);
  check_module(mha, "mha_self_causal", [&](const std::vector<Variable>& v) {
    nn::AttentionOutput o = mha(v[0], {.is_causal = true});
    EXPECT_FALSE(o.weights.defined());  // proof the fused kernel ran
    return std::pair{o.output, Variable()};
  });
}

TEST(MultiheadAttention, GoldenCrossAttentionWithKeyPadding) {
  nn::MultiheadAttention mha(8, 4);
  check_module(mha, "mha_cross_padding", [&](const std::vector<Variable>& v) {
    nn::AttentionForwardOptions mask;
    mask.key_padding_mask = v[3].data();
    nn::AttentionOutput o = mha(v[0], v[1], v[2], mask);
    return std::pair{o.output, o.weights};
  });
}

TEST(MultiheadAttention, CausalFlagEqualsExplicitMaskAndHidesTheFuture) {
  nn::MultiheadAttention mha(6, 3);
  Variable x(rnd({2, 4, 6}, 1).to(DType::Float32));
  nn::AttentionForwardOptions causal;
  causal.is_causal = true;
  causal.need_weights = true;
  nn::AttentionOutput a = mha(x, causal), b = mha(x, {triu(ones({4, 4}, DType::Bool), 1)});
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

// The backward through the masks (docs/05-attention.md): a masked score is -inf, its weight is 0,
// and dS = P * (dP - rowsum(dP * P)) is 0 there, so a query sends no gradient to a key it may not
// see. Through the causal mask, query 0's output gets gradient into token 0's input only; a padded
// key's input gets none from the other queries' outputs (only from its own query's row).
TEST(MultiheadAttention, NoGradientFlowsThroughAMaskedScore) {
  Generator g(3);
  nn::MultiheadAttention mha(6, 2, {.bias = false}, g);
  Variable x(randn({1, 4, 6}, g, DType::Float64), true);
  mha.to(DType::Float64);
  // scores' gradient: exactly 0 above the diagonal
  nn::AttentionForwardOptions causal;
  causal.is_causal = true, causal.need_weights = true;
  nn::AttentionOutput a = mha(x, causal);
  a.scores.retain_grad();
  sum(a.output * Variable(randn({1, 4, 6}, g, DType::Float64))).backward();
  const Tensor ds = a.scores.grad();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j)
        if (j > i || i == 0)  // row 0 sees one key: its weight is 1 whatever the score, so dS is 0 too
          EXPECT_EQ(ds.at({0, h, i, j}), 0.0) << h << i << j;
        else
          EXPECT_NE(ds.at({0, h, i, j}), 0.0) << h << i << j;
  // query 0's output depends on token 0 alone: d out[0] / d x[1..3] = 0
  Variable x2(x.data().clone(), true);
  sum(narrow(mha(x2, causal).output, 1, 0, 1)).backward();
  EXPECT_GT(max(abs(x2.grad().narrow(1, 0, 1))).item(), 0.0);
  EXPECT_EQ(max(abs(x2.grad().narrow(1, 1, 3))).item(), 0.0);
  // a padded key: the other queries' outputs do not depend on it at all
  Variable x3(x.data().clone(), true);
  nn::AttentionForwardOptions pad;
  pad.key_padding_mask = from_vector<bool>({false, false, true, false}, {1, 4});
  const Variable out = mha(x3, pad).output;
  (sum(narrow(out, 1, 0, 2)) + sum(narrow(out, 1, 3, 1))).backward();  // queries 0, 1 and 3
  EXPECT_EQ(max(abs(x3.grad().narrow(1, 2, 1))).item(), 0.0);
  EXPECT_GT(max(abs(x3.grad().narrow(1, 3, 1))).item(), 0.0);
}

TEST(MultiheadAttention, HeadsAreSlicesOfOneProjection) {
  // Head h of Q is x @ W_Q[h*d:(h+1)*d, :]^T (+ bias slice): no per-head matrix on top.
  Generator g(2);
  nn::MultiheadAttention mha(8, 2, {}, g);
  nn::init::normal_(mha.w_q.bias, 0, 1, g);
  nn::init::normal_(mha.w_k.bias, 0, 1, g);
  Tensor x = randn({1, 3, 8}, g);
  nn::AttentionOutput o = mha(Variable(x), {.need_weights = true});
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
  mha.register_forward_hook([&](const nn::Module&, const std::vector<Variable>& in, std::vector<Variable>& out) {
    ++calls;
    EXPECT_EQ(in.size(), 3u);  // query, key, value
    seen = out.at(1).shape();  // the weights, computed because a hook asks
  });
  mha(Variable(ones({3, 5, 4})), Variable(ones({3, 2, 4})), Variable(ones({3, 2, 4})));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (Shape{3, 2, 5, 2}));
}

TEST(MultiheadAttention, ErrorsNameShapes) {
  nn::MultiheadAttention mha(8, 2);
  try {
    mha(Variable(ones({5, 8})));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("MultiheadAttention: query must be (batch, seq, 8), got (5, 8)"));
  }
  EXPECT_THROW(mha(Variable(ones({2, 3, 8})), Variable(ones({3, 4, 8})), Variable(ones({3, 4, 8}))), ShapeError);
  nn::AttentionForwardOptions bad;
  bad.key_padding_mask = ones({2, 3}, DType::Bool);
  EXPECT_THROW(mha(Variable(ones({2, 5, 8})), bad), ShapeError);
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
      Variable q(rnd({2, 3, tq, 5}, 1).to(dt), true), k(rnd({2, 3, tk, 5}, 2).to(dt), true),
          v(rnd({2, 3, tk, 5}, 3).to(dt), true);
      Tensor g = rnd({2, 3, tq, 5}, 4).to(dt);
      Variable a = scaled_dot_product_attention(q, k, v, {.is_causal = causal});
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
    mgtest::expect_gradcheck(
        [causal](const std::vector<Variable>& v) {
          return scaled_dot_product_attention(v[0], v[1], v[2], {.is_causal = causal});
        },
        {rnd({1, 2, 4, 3}, 5), rnd({1, 2, 4, 3}, 6), rnd({1, 2, 4, 3}, 7)});
  // non-contiguous inputs: the head-split view of a (B, T, H*d) tensor
  mgtest::expect_gradcheck(
      [](const std::vector<Variable>& v) {
        auto heads = [](const Variable& x) { return nn::split_heads(x, 2); };
        return scaled_dot_product_attention(heads(v[0]), heads(v[1]), heads(v[2]), {.is_causal = true});
      },
      {rnd({2, 3, 4}, 8), rnd({2, 3, 4}, 9), rnd({2, 3, 4}, 10)});
  // q, k, v read in place from one (B, T, 3E) projection
  for (bool causal : {true, false})
    mgtest::expect_gradcheck([causal](const std::vector<Variable>& v) { return self_attention_qkv(v[0], 2, causal); },
                             {rnd({2, 3, 12}, 11)});
  EXPECT_THROW(self_attention_qkv(Variable(ones({2, 3, 10})), 2), ShapeError);
}

TEST(FusedAttention, GoldenPyTorch) {
  auto sdpa = [](bool causal) {
    return [causal](const std::vector<Variable>& v) {
      return scaled_dot_product_attention(v[0], v[1], v[2], {.is_causal = causal});
    };
  };
  mgtest::expect_golden("sdpa_causal", sdpa(true));
  mgtest::expect_golden("sdpa_cross", sdpa(false));
  mgtest::expect_golden("self_attention_qkv_causal",
                        [](const std::vector<Variable>& v) { return self_attention_qkv(v[0], 2, true); });
}

TEST(FusedAttention, MultiheadAttentionFusedEqualsComposed) {
  // Self-attention (the one-GEMM Q, K, V path) and cross-attention (separate projections), with
  // and without the causal mask and a head mask: the fast path gives the textbook path's numbers.
  for (bool cross : {false, true})
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("cross {} causal {}", cross, causal));
      Generator g1(3), g2(3);
      nn::MultiheadAttention fused(8, 2, {}, g1), composed(8, 2, {.fused = false}, g2);
      for (nn::MultiheadAttention* m : {&fused, &composed}) m->to(DType::Float64);
      Variable x(rnd({2, 6, 8}, 11), true), x2(rnd({2, 6, 8}, 11), true);
      Variable mem(rnd({2, 4, 8}, 12), true), mem2(rnd({2, 4, 8}, 12), true);
      const nn::AttentionForwardOptions opt{.is_causal = causal, .head_mask = tensor({1, 0.5}, {2})};
      nn::AttentionOutput fo = cross ? fused(x, mem, mem, opt) : fused(x, opt);
      nn::AttentionOutput co = cross ? composed(x2, mem2, mem2, opt) : composed(x2, opt);
      EXPECT_FALSE(fo.weights.defined());  // the fused kernel builds no (T, T) weights
      EXPECT_TRUE(co.weights.defined());
      expect_close(fo.output.data(), co.output.data(), 1e-12, 1e-12);
      sum(fo.output * fo.output).backward();
      sum(co.output * co.output).backward();
      expect_close(x.grad(), x2.grad(), 1e-12, 1e-12);
      if (cross) expect_close(mem.grad(), mem2.grad(), 1e-12, 1e-12);
      for (size_t i = 0; i < fused.parameters().size(); ++i)
        expect_close(fused.parameters()[i].grad(), composed.parameters()[i].grad(), 1e-12, 1e-12);
    }
}

TEST(FusedAttention, Errors) {
  Variable q(ones({2, 3, 4, 5})), k(ones({2, 3, 4, 6}));
  EXPECT_THROW(scaled_dot_product_attention(q, k, k), ShapeError);
  EXPECT_THROW(scaled_dot_product_attention(Variable(ones({3, 4, 5})), q, q), ShapeError);
  // No keys at all: every query row is fully masked, so PyTorch 2.x's safe softmax gives output 0
  // (and gradient 0), on the composed path; the fused kernel itself refuses such operands.
  Variable no_keys(ones({2, 3, 0, 5}));
  Variable q2(ones({2, 3, 4, 5}), true);
  Variable empty_out = scaled_dot_product_attention(q2, no_keys, no_keys);
  EXPECT_EQ(empty_out.shape(), Shape({2, 3, 4, 5}));
  EXPECT_EQ(sum(abs(empty_out.data())).item(), 0.0);
  sum(empty_out).backward();
  EXPECT_EQ(sum(abs(q2.grad())).item(), 0.0);
  EXPECT_THROW(attention_forward(q.data(), no_keys.data(), no_keys.data(), false), ShapeError);
}

TEST(FusedAttention, AnyLayoutGivesTheSameNumbers) {
  // BLAS reads each head's (T, d) rows in place only when they are at least d apart; an expanded
  // (stride-0) or squeezed view once went to BLAS as it was, which skipped the product with only a
  // warning: v.grad came back all 0, or the output a constant.
  Variable q0(rnd({2, 2, 5, 3}, 30), true), k0(rnd({2, 2, 5, 3}, 31), true);
  Variable row(rnd({2, 2, 1, 3}, 32), true);
  Variable col(rnd({2, 2, 3, 1}, 33), true);
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    for (bool one_query : {false, true}) {
      // v: the same row repeated along T (stride 0); q1: one query per head made by a transpose
      // (strides (6, 3, 1, 1): a row stride of 1 < d)
      auto v_of = [&] { return expand(row, {2, 2, 5, 3}); };
      auto q_of = [&] { return one_query ? transpose(col, 2, 3) : q0; };
      const Variable& q = one_query ? col : q0;  // the leaf whose gradient is compared
      Variable v = v_of();
      Variable a = scaled_dot_product_attention(q_of(), k0, v, {.is_causal = causal});
      // dout with stride 0 along T: the backward of a mean over the queries
      Variable loss = sum(mean(a, {2}) * Variable(rnd({2, 2, 3}, 34)));
      loss.backward();
      const Tensor gq = q.grad().clone(), gk = k0.grad().clone(), gr = row.grad().clone();
      q.zero_grad(), k0.zero_grad(), row.zero_grad(), col.zero_grad();
      Variable b = composed_attention(q_of(), k0, v_of(), causal);
      sum(mean(b, {2}) * Variable(rnd({2, 2, 3}, 34))).backward();
      expect_close(a.data(), b.data(), 1e-12, 1e-12);
      expect_close(gq, q.grad(), 1e-12, 1e-12);
      expect_close(gk, k0.grad(), 1e-12, 1e-12);
      expect_close(gr, row.grad(), 1e-12, 1e-12);
      EXPECT_GT(max(abs(gr)).item(), 0.01);  // v's gradient is not the zeros BLAS left behind
      q.zero_grad(), k0.zero_grad(), row.zero_grad(), col.zero_grad();
    }
  }
}

TEST(MultiheadAttention, MasksMustFitTheScores) {
  nn::MultiheadAttention mha(8, 2);
  Variable x(ones({1, 3, 8}));
  // a mask with batch 4 would broadcast the output of a batch of 1 to 4: refused
  try {
    mha(x, {.attn_mask = zeros({4, 1, 3, 3}, DType::Bool)});
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(
        e.what(),
        HasSubstr(
            "MultiheadAttention: attn_mask of shape (4, 1, 3, 3) does not broadcast to the scores' shape (1, 2, 3, 3)"));
  }
  EXPECT_THROW(mha(x, {.attn_mask = zeros({3, 3}, DType::Int64)}), DTypeError);  // neither Bool nor additive
  EXPECT_NO_THROW(mha(x, {.attn_mask = zeros({3, 3})}));                         // additive float is fine
  // no keys: an error on both paths (the fused one once named its kernel, the other returned zeros)
  for (bool need_weights : {false, true}) {
    try {
      mha(x, Variable(zeros({1, 0, 8})), Variable(zeros({1, 0, 8})), {.need_weights = need_weights});
      FAIL();
    } catch (const ShapeError& e) {
      EXPECT_THAT(e.what(), HasSubstr("MultiheadAttention: key and value have no tokens"));
    }
  }
  // no queries: an empty output, as in PyTorch
  EXPECT_EQ(mha(Variable(zeros({1, 0, 8}))).output.shape(), (Shape{1, 0, 8}));
  EXPECT_EQ(mha(Variable(zeros({1, 0, 8})), x, x).output.shape(), (Shape{1, 0, 8}));
  EXPECT_THROW(nn::split_heads(x, 0), ShapeError);  // once a division by zero
  EXPECT_THROW(nn::MultiheadAttention(0, 1), ValueError);
}

// inspect::score_heads against heads whose attention is forced by masks, so every score is known by
// hand: layer "prev" always looks at t-1 (t = 0 at itself), "first" at position 0, and "ind" at
// the key after the latest earlier occurrence of the query's token (position 0 if none).
