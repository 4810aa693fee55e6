// Attention: the fused scaled_dot_product_attention ops, and nn::MultiheadAttention (PyTorch golden
// values of outputs, per-head weights and every parameter's gradient; masks; heads as slices;
// the fused path against the composed one). The Transformer layers and GPT: test_transformer.cpp.
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
    nn::AttentionOutput o = mha.forward(v[0], v[0], v[0], {triu(ones({5, 5}, DType::Bool), 1)});
    return std::pair{o.output, o.weights};
  });
}

TEST(MultiheadAttention, GoldenSelfAttentionFusedPath) {
  // The same case through the fast path: is_causal instead of an explicit mask, no weights asked
  // for, so Q, K, V come from one GEMM and the fused kernel (tensor/ops/attention.cpp).
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
    nn::AttentionForwardOptions mask;
    mask.key_padding_mask = v[3].data();
    nn::AttentionOutput o = mha.forward(v[0], v[1], v[2], mask);
    return std::pair{o.output, o.weights};
  });
}

TEST(MultiheadAttention, CausalFlagEqualsExplicitMaskAndHidesTheFuture) {
  nn::MultiheadAttention mha(6, 3);
  Variable x(rnd({2, 4, 6}, 1).to(DType::Float32));
  nn::AttentionForwardOptions causal;
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
  mha.register_forward_hook([&](const nn::Module&, const std::vector<Variable>& in, std::vector<Variable>& out) {
    ++calls;
    EXPECT_EQ(in.size(), 3u);  // query, key, value
    seen = out.at(1).shape();  // the weights, computed because a hook asks
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
  nn::AttentionForwardOptions bad;
  bad.key_padding_mask = ones({2, 3}, DType::Bool);
  EXPECT_THROW(mha.forward(Variable(ones({2, 5, 8})), bad), ShapeError);
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

TEST(FusedAttention, GoldenPyTorch) {
  auto sdpa = [](bool causal) {
    return [causal](const std::vector<Variable>& v) { return scaled_dot_product_attention(v[0], v[1], v[2], causal); };
  };
  mgtest::expect_golden("sdpa_causal", sdpa(true));
  mgtest::expect_golden("sdpa_cross", sdpa(false));
  mgtest::expect_golden("self_attention_qkv_causal", [](const std::vector<Variable>& v) { return self_attention_qkv(v[0], 2, true); });
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
      nn::AttentionOutput fo = cross ? fused.forward(x, mem, mem, opt) : fused.forward(x, opt);
      nn::AttentionOutput co = cross ? composed.forward(x2, mem2, mem2, opt) : composed.forward(x2, opt);
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
  Variable no_keys(ones({2, 3, 0, 5}));  // softmax over nothing: refused rather than made up
  EXPECT_THROW(scaled_dot_product_attention(q, no_keys, no_keys), ShapeError);
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
      Variable a = scaled_dot_product_attention(q_of(), k0, v, causal);
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
    mha.forward(x, {.attn_mask = zeros({4, 1, 3, 3}, DType::Bool)});
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("MultiheadAttention: attn_mask of shape (4, 1, 3, 3) does not broadcast to the scores' shape (1, 2, 3, 3)"));
  }
  EXPECT_THROW(mha.forward(x, {.attn_mask = zeros({3, 3}, DType::Int64)}), DTypeError);  // neither Bool nor additive
  EXPECT_NO_THROW(mha.forward(x, {.attn_mask = zeros({3, 3})}));                        // additive float is fine
  // no keys: an error on both paths (the fused one once named its kernel, the other returned zeros)
  for (bool need_weights : {false, true}) {
    try {
      mha.forward(x, Variable(zeros({1, 0, 8})), Variable(zeros({1, 0, 8})), {.need_weights = need_weights});
      FAIL();
    } catch (const ShapeError& e) {
      EXPECT_THAT(e.what(), HasSubstr("MultiheadAttention: key and value have no tokens"));
    }
  }
  // no queries: an empty output, as in PyTorch
  EXPECT_EQ(mha.forward(Variable(zeros({1, 0, 8}))).output.shape(), (Shape{1, 0, 8}));
  EXPECT_EQ(mha.forward(Variable(zeros({1, 0, 8})), x, x).output.shape(), (Shape{1, 0, 8}));
  EXPECT_THROW(nn::split_heads(x, 0), ShapeError);  // once a division by zero
  EXPECT_THROW(nn::MultiheadAttention(0, 1), ValueError);
}

// nn::score_heads against heads whose attention is forced by masks, so every score is known by
// hand: layer "prev" always looks at t-1 (t = 0 at itself), "first" at position 0, and "ind" at
// the key after the latest earlier occurrence of the query's token (position 0 if none).
namespace {
struct ForcedHeads : nn::Module {
  nn::Embedding emb;
  nn::MultiheadAttention prev, first, ind;
  explicit ForcedHeads(Generator& g) : emb(50, 4, {}, g), prev(4, 1, {}, g), first(4, 1, {}, g), ind(4, 1, {}, g) {
    register_module("emb", emb), register_module("prev", prev), register_module("first", first), register_module("ind", ind);
  }
  // Bool mask (T, T) or (B*H, T, T) -> true where a query may NOT look: all but `key(b, t)`.
  static Tensor only(int64_t B, int64_t T, const std::function<int64_t(int64_t, int64_t)>& key) {
    Tensor m = full({B, 1, T, T}, 1, DType::Bool);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) m.narrow(0, b, 1).narrow(2, t, 1).narrow(3, key(b, t), 1).fill_(0);
    return m;
  }
  void forward(const Tensor& ids) const {
    const int64_t B = ids.size(0), T = ids.size(1);
    const Variable x = emb.forward(ids);
    const std::vector<int64_t> v = ids.to_vector<int64_t>();
    prev.forward(x, {.attn_mask = only(B, T, [](int64_t, int64_t t) { return t == 0 ? 0 : t - 1; })});
    first.forward(x, {.attn_mask = only(B, T, [](int64_t, int64_t) { return 0; })});
    ind.forward(x, {.attn_mask = only(B, T, [&](int64_t b, int64_t t) {
                  for (int64_t j = t - 1; j >= 0; --j)
                    if (v[b * T + j] == v[b * T + t]) return j + 1;
                  return int64_t{0};
                })});
  }
  std::string type_name() const override { return "ForcedHeads"; }
};
}  // namespace

TEST(HeadScores, ForcedHeadsScoreAsComputedByHand) {
  Generator g(3);
  ForcedHeads m(g);
  // a probe without repeats: T = 6, so the "ind" head sits on key 0
  const Tensor probe = from_vector<int64_t>({0, 1, 2, 3, 4, 0, 4, 3, 2, 1, 0, 4}, {2, 6});
  const auto s = nn::score_heads(m, [&](const Tensor& ids) { m.forward(ids); }, probe, 50);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].layer, "prev");
  EXPECT_NEAR(s[0].previous_token, 1.0, 1e-6);
  EXPECT_NEAR(s[0].first_token, 1.0 / 5, 1e-6);  // only t = 1, whose previous token is position 0
  EXPECT_EQ(s[0].label, "previous token");
  EXPECT_NEAR(s[1].first_token, 1.0, 1e-6);
  EXPECT_NEAR(s[1].previous_token, 1.0 / 5, 1e-6);
  EXPECT_EQ(s[1].label, "first token");
  // on r r (n = 3): every second-copy query finds its first occurrence at t - 3 and looks at
  // t - 2, the induction key, unless a token repeats inside r (3 tokens out of 50 rarely do)
  EXPECT_GT(s[2].induction, 0.8);
  EXPECT_EQ(s[2].label, "induction");
  EXPECT_NEAR(s[0].induction, 0.0, 1e-6);  // t - 1 is never t - n + 1 for n = 3
  EXPECT_NEAR(s[1].induction, 0.0, 1e-6);
  EXPECT_THROW(nn::score_heads(m, [&](const Tensor& ids) { m.forward(ids); }, probe.narrow(1, 0, 3), 50), ValueError);
  EXPECT_THROW(nn::score_heads(m, [&](const Tensor& ids) { m.forward(ids); }, probe.to(DType::Float32), 50), ShapeError);
}

namespace {
// One head over one-hot tokens (embedding = I, W_V = I, W_O = gain * I, no biases) whose attention
// is forced onto the induction key, and logits = the head's output: attending to token i writes
// gain on logit i and nothing else.
struct ForcedCopier : nn::Module {
  nn::Embedding emb;
  nn::MultiheadAttention ind;
  ForcedCopier(Generator& g, int64_t vocab, double gain) : emb(vocab, vocab, {}, g), ind(vocab, 1, {}, g) {
    register_module("emb", emb), register_module("ind", ind);
    NoGradGuard no_grad;
    emb.weight.data().copy_(eye(vocab));
    ind.w_v.weight.data().copy_(eye(vocab));
    ind.w_o.weight.data().copy_(eye(vocab) * gain);
    for (nn::Linear* l : {&ind.w_q, &ind.w_k, &ind.w_v, &ind.w_o}) l->bias.data().fill_(0);
  }
  Variable forward(const Tensor& ids) const {
    const int64_t B = ids.size(0), T = ids.size(1);
    const std::vector<int64_t> v = ids.to_vector<int64_t>();
    return ind.forward(emb.forward(ids), {.attn_mask = ForcedHeads::only(B, T, [&](int64_t b, int64_t t) {
                                            for (int64_t j = t - 1; j >= 0; --j)
                                              if (v[b * T + j] == v[b * T + t]) return j + 1;
                                            return int64_t{0};
                                          })})
        .output;
  }
  std::string type_name() const override { return "ForcedCopier"; }
};
}  // namespace

TEST(HeadScores, CopyingIsTheLogitRaisedOnTheAttendedTokenAsComputedByHand) {
  // With the head: logits_t = gain * onehot(attended token); without it: 0. So d_t = gain * onehot
  // and copying = gain - gain / vocab, for every query; a head that writes -gain scores the negative.
  const int64_t V = 8;
  Generator g(5);
  const Tensor probe = from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, {1, 8});
  for (double gain : {2.0, -2.0}) {
    ForcedCopier m(g, V, gain);
    const auto s = nn::score_heads(m, [&](const Tensor& ids) { m.forward(ids); }, probe, V,
                                   {.induction_length = 4, .logits = [&](const Tensor& ids) { return m.forward(ids); }});
    ASSERT_EQ(s.size(), 1u);
    EXPECT_NEAR(s[0].copying, gain - gain / V, 1e-6) << "gain " << gain;
  }
  // without a logits function the copying score is not measured
  ForcedCopier m(g, V, 2.0);
  EXPECT_TRUE(std::isnan(nn::score_heads(m, [&](const Tensor& ids) { m.forward(ids); }, probe, V)[0].copying));
}

TEST(HeadScores, IclScoreOfAPerfectCopierAsComputedByHand) {
  // logits: 0 everywhere except, in the second copy (t >= n), 100 on ids[t - n + 1], the token that
  // comes next. Early: every target costs log V. Late: the first target (r_1 after r_n) costs log V,
  // the other n - 1 cost log(1 + (V - 1) e^-100) = 0. So late = log V / n.
  const int64_t V = 10, n = 5;
  auto copier = [&](const Tensor& ids) {
    const int64_t B = ids.size(0), T = ids.size(1);
    Tensor z = zeros({B, T, V}, DType::Float64);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = n; t < T; ++t) z.narrow(0, b, 1).narrow(1, t, 1).narrow(2, static_cast<int64_t>(ids.at({b, t - n + 1})), 1).fill_(100);
    return Variable(z);
  };
  const nn::IclScore s = nn::icl_score(copier, V, n);
  EXPECT_NEAR(s.early, std::log(10.0), 1e-12);
  EXPECT_NEAR(s.late, std::log(10.0) / n, 1e-12);
  EXPECT_NEAR(s.score, std::log(10.0) / n - std::log(10.0), 1e-12);
  EXPECT_THROW(nn::icl_score(copier, 1, n), ValueError);
  EXPECT_THROW(nn::icl_score([&](const Tensor& ids) { return Variable(zeros({ids.size(0), ids.size(1), 3})); }, V, n), ShapeError);
}

TEST(HeadAblation, SameNumbersAsHeadMaskAndGradientsFlow) {
  struct Wrap : nn::Module {
    nn::MultiheadAttention attn;
    explicit Wrap(Generator& g) : attn(12, 3, {}, g) { register_module("attn", attn); }
    std::string type_name() const override { return "Wrap"; }
  };
  Generator g(11);
  Wrap m(g);
  m.to(DType::Float64);
  const Tensor x0 = randn({2, 5, 12}, g, DType::Float64);
  Variable xa(x0, true), xb(x0, true);
  const Variable masked = m.attn.forward(xa, {.is_causal = true, .head_mask = from_vector<double>({1, 0, 1}, {3})}).output;
  Variable hooked;
  {
    nn::HeadAblation off(m, "attn", {1});
    hooked = m.attn.forward(xb, {.is_causal = true}).output;
  }
  expect_close(hooked.data(), masked.data(), 1e-12);
  sum(masked * masked).backward();
  sum(hooked * hooked).backward();
  expect_close(xb.grad(), xa.grad(), 1e-12);
  // the hook is gone with the object: the full output again
  const Variable full = m.attn.forward(Variable(x0), {.is_causal = true}).output;
  EXPECT_GT(max(abs(full.data() - hooked.data())).item(), 1e-3);
  EXPECT_THROW(nn::HeadAblation(m, "attn", {3}), ValueError);
  EXPECT_THROW(nn::HeadAblation(m, "nothing", {0}), ValueError);
}

namespace {
// The shape of an encoder-decoder in a few lines: a decoder stream with causal self-attention and
// a cross-attention that reads a memory made of the first `memory` ids; with `bos` the decoder
// runs on a start token and the ids (one longer than the source), else on the ids.
struct TinyEncoderDecoder : nn::Module {
  nn::Embedding emb;
  nn::MultiheadAttention self_attn, cross_attn;
  nn::Linear out;
  int64_t memory;
  bool bos;
  TinyEncoderDecoder(Generator& g, int64_t vocab, int64_t memory, bool bos)
      : emb(vocab, 8, {}, g), self_attn(8, 2, {}, g), cross_attn(8, 2, {}, g), out(8, vocab, {}, g), memory(memory), bos(bos) {
    register_module("emb", emb), register_module("self_attn", self_attn), register_module("cross_attn", cross_attn);
    register_module("out", out);
  }
  // ids (B, T) -> logits (B, T, vocab), or (B, T + 1, vocab) with bos
  Variable forward(const Tensor& ids) const {
    const Tensor dec = bos ? concat({zeros({ids.size(0), 1}, DType::Int64), ids}, 1) : ids;
    const Variable x = emb.forward(dec), mem = emb.forward(ids.narrow(1, 0, memory).contiguous());
    Variable y = x + self_attn.forward(x, {.is_causal = true}).output;
    y = y + cross_attn.forward(y, mem, mem).output;
    return out.forward(y);
  }
  std::string type_name() const override { return "TinyEncoderDecoder"; }
};
}  // namespace

TEST(HeadScores, CrossAttentionHeadsGetNoScores) {
  // Keys from another sequence than the queries: no key is "t - 1" of a query, so the heads of a
  // cross-attention get NaN and the label "cross-attention", whatever the two lengths (3 keys for
  // 8 queries, or 8 for 8). The self-attention next to it is scored as usual, copying included.
  const int64_t V = 12;
  Generator g(21);
  const Tensor probe = randint(0, V, {2, 8}, g);
  for (int64_t memory : {3, 8}) {
    TinyEncoderDecoder m(g, V, memory, false);
    const auto s = nn::score_heads(m, [&](const Tensor& ids) { m.forward(ids); }, probe, V,
                                   {.induction_batch = 4, .logits = [&](const Tensor& ids) { return m.forward(ids); }});
    ASSERT_EQ(s.size(), 4u);
    for (const nn::HeadScore& h : s) {
      if (h.layer == "self_attn") {
        EXPECT_NE(h.label, "cross-attention");
        EXPECT_TRUE(std::isfinite(h.previous_token) && std::isfinite(h.first_token) && std::isfinite(h.induction));
        EXPECT_TRUE(std::isfinite(h.copying)) << h.head;
      } else {
        EXPECT_EQ(h.layer, "cross_attn");
        EXPECT_EQ(h.label, "cross-attention") << "memory " << memory;
        EXPECT_TRUE(std::isnan(h.previous_token) && std::isnan(h.first_token) && std::isnan(h.induction) && std::isnan(h.copying));
      }
    }
  }
}

TEST(Telemetry, CrossAttentionMapsAreDecoderBySourceWithLabelsOfTheirOwn) {
  // Decoder <s> + 6 ids (7 queries) against 6 source keys: the recorded map is 7 x 6, and the
  // decoder's layers need labels of their own, 7 long, which the JSON carries per layer.
  const int64_t V = 10;
  Generator g(4);
  TinyEncoderDecoder m(g, V, 6, true);
  const Tensor probe = randint(0, V, {3, 6}, g);
  const std::vector<std::string> src = {"a", "b", "c", "d", "e", "f"}, dec = {"<s>", "f", "e", "d", "c", "b", "a"};
  auto forward = [&](const Tensor& ids) { m.forward(ids); };
  nn::Telemetry tel(m, forward,
                    {.vocab = V, .probe = probe, .tokens = src, .query_tokens = {{"self_attn", dec}, {"cross_attn", dec}},
                     .key_tokens = {{"self_attn", dec}}});
  const nn::TelemetryRecord& r = tel.record(1, 2.5);
  ASSERT_EQ(r.patterns.size(), 2u);
  EXPECT_EQ(r.patterns[0].weights.shape(), (Shape{2, 7, 7}));
  EXPECT_EQ(r.patterns[1].weights.shape(), (Shape{2, 7, 6}));  // (H, decoder, source)
  EXPECT_EQ(r.patterns[1].scores.shape(), (Shape{2, 7, 6}));
  ASSERT_EQ(r.heads.size(), 4u);
  EXPECT_EQ(r.heads[2].label, "cross-attention");
  const std::string json = tel.json();
  EXPECT_THAT(json, HasSubstr(R"({"name":"cross_attn","heads":2,"query_tokens":["<s>","f","e","d","c","b","a"],)"
                              R"("key_tokens":["a","b","c","d","e","f"]})"));
  EXPECT_THAT(json, HasSubstr(R"({"layer":"cross_attn","head":0,"previous_token":null,"first_token":null,"induction":null,)"
                              R"("copying":null,"label":"cross-attention"})"));
  // Without the decoder's labels the 7th query has none: record() names the layer.
  nn::Telemetry unlabelled(m, forward, {.vocab = V, .probe = probe, .tokens = src});
  try {
    unlabelled.record(1);
    ADD_FAILURE() << "no error for 7 queries with 6 labels";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("self_attn attends from 7 queries to 7 keys"));
    EXPECT_THAT(e.what(), HasSubstr("query_tokens / key_tokens[\"self_attn\"]"));
  }
  // A label map for a layer the model does not have is a typo, caught at once.
  EXPECT_THROW(nn::Telemetry(m, forward, {.vocab = V, .probe = probe, .key_tokens = {{"cross", src}}}), ValueError);
}
