// The parts of a LLaMA-style decoder: RMSNorm, rotary position embedding, SwiGLU, grouped-query
// attention and scaled_dot_product_attention with PyTorch 2.x's arguments. Golden values from
// PyTorch 2.x and transformers' LLaMA modules (tests/golden/gen_golden_modern.py -> modern.txt).
#include <cmath>

#include "helpers.h"

using namespace mg;
using namespace mgtest;

namespace {
using V = std::vector<Variable>;

// `call` must throw E, and its message must name `op` and say `what` (typed errors that say where).
template <class E>
void expect_error(const char* code, const std::function<void()>& call, const std::string& op, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << code << ": no error";
  } catch (const E& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr(op + ": ")) << code;
    EXPECT_THAT(e.what(), testing::HasSubstr(what)) << code;
  } catch (const std::exception& e) {
    ADD_FAILURE() << code << ": the wrong error type: " << e.what();
  }
}
#define EXPECT_ERROR(E, op, what, ...) \
  expect_error<E>(                     \
      #__VA_ARGS__, [&] { (void)(__VA_ARGS__); }, op, what)

// A float64 tensor of normal samples (deterministic per seed).
Tensor normal(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return randn(s, g, DType::Float64);
}
}  // namespace

// ---------------------------------------------------------------- RMSNorm

TEST(RMSNorm, HandValues) {
  // x = (3, 4): mean(x^2) = 12.5, so y = x / sqrt(12.5) = (0.8485, 1.1314); times the weight (2, 0.5)
  Variable x(from_vector<double>({3, 4}, {1, 2}));
  const double r = 1 / std::sqrt(12.5);
  expect_values(rms_norm(x, {2}, Variable(), 0.0).data(), {1, 2}, {3 * r, 4 * r}, 1e-15);
  expect_values(rms_norm(x, {2}, Variable(from_vector<double>({2, 0.5}, {2})), 0.0).data(), {1, 2}, {6 * r, 2 * r},
                1e-15);
  // unlike LayerNorm nothing is subtracted: a constant row stays constant, at 1
  expect_values(rms_norm(Variable(full({1, 4}, 7.0, DType::Float64)), {4}).data(), {1, 4}, {1, 1, 1, 1}, 1e-12);
}

TEST(RMSNorm, DefaultEpsIsTheDtypesMachineEpsilon) {
  // PyTorch's eps=None: torch.finfo(dtype).eps. An all-zero row gives 0, and rstd = 1/sqrt(eps).
  EXPECT_EQ(rms_norm_eps(std::nullopt, DType::Float32), static_cast<double>(std::numeric_limits<float>::epsilon()));
  EXPECT_EQ(rms_norm_eps(std::nullopt, DType::Float64), std::numeric_limits<double>::epsilon());
  EXPECT_EQ(rms_norm_eps(1e-6, DType::Float32), 1e-6);
  const RMSNormForward f = rms_norm_forward(zeros({2, 3}), {3}, Tensor(), std::nullopt);
  EXPECT_EQ(sum(abs(f.y)).item(), 0.0);
  EXPECT_NEAR(f.rstd.to_vector<double>()[0], 1 / std::sqrt(std::numeric_limits<float>::epsilon()), 1);
}

TEST(RMSNorm, GoldenPyTorch) {
  expect_golden("rms_norm_weight", [](const V& v) { return rms_norm(v[0], {8}, v[1]); });
  expect_golden("rms_norm_no_weight_eps", [](const V& v) { return rms_norm(v[0], {8}, Variable(), 1e-3); });
  expect_golden("rms_norm_two_dims", [](const V& v) { return rms_norm(v[0], {3, 4}, v[1]); });
  nn::RMSNorm norm({6});
  check_module(norm, "rms_norm_module", [&](const V& in) { return std::pair{norm(in[0]), Variable()}; });
}

TEST(RMSNorm, Gradcheck) {
  expect_gradcheck([](const V& v) { return rms_norm(v[0], {4}, v[1], 1e-5); }, {rnd({2, 3, 4}, 1), rnd({4}, 2)});
  expect_gradcheck([](const V& v) { return rms_norm(v[0], {3, 4}); }, {rnd({2, 3, 4}, 3)});
}

TEST(RMSNorm, HugeRowsStayFinite) {
  // float64 squares overflow past 1e154: the row is scaled by a power of two first (exact)
  Tensor x = from_vector<double>({3e200, -4e200}, {1, 2});
  expect_values(rms_norm(x, {2}), {1, 2}, {3 / std::sqrt(12.5), -4 / std::sqrt(12.5)}, 1e-15);
  // float32: the squares are summed in double, so 1e30 (whose square overflows float) is fine
  expect_values(rms_norm(full({1, 4}, 1e30), {4}), {1, 4}, {1, 1, 1, 1}, 1e-6);
}

TEST(RMSNorm, ModuleAndErrors) {
  nn::RMSNorm norm({6});
  EXPECT_EQ(norm.named_parameters().size(), 1u);  // weight only: RMS norm has no bias
  EXPECT_EQ(norm.extra_repr(), "(6,), eps=None, elementwise_affine=True");
  EXPECT_EQ(nn::RMSNorm({4}, {.eps = 1e-6, .elementwise_affine = false}).num_parameters(), 0);
  EXPECT_ERROR(ValueError, "RMSNorm", "eps must be finite and >= 0", nn::RMSNorm({4}, {.eps = -1.0}));
  EXPECT_ERROR(ValueError, "RMSNorm", "must not be empty", nn::RMSNorm(Shape{}));
  EXPECT_ERROR(ShapeError, "rms_norm", "(6,) does not match the trailing dims of input (2, 5)",
               norm(Variable(ones({2, 5}, DType::Float32))));
  EXPECT_ERROR(ShapeError, "rms_norm", "weight has shape (5,)", rms_norm(ones({2, 6}), {6}, ones({5})));
  EXPECT_ERROR(DTypeError, "rms_norm", "weight is float64", rms_norm(ones({2, 6}), {6}, ones({6}, DType::Float64)));
  EXPECT_ERROR(DTypeError, "rms_norm", "int64", rms_norm(ones({2, 6}, DType::Int64), {6}));
  EXPECT_ERROR(ValueError, "rms_norm", "eps", rms_norm(ones({2, 6}), {6}, Tensor(), -1.0));
  EXPECT_ERROR(StateError, "rms_norm", "undefined", rms_norm(Tensor(), {6}));
}

// ---------------------------------------------------------------- rotary position embedding

TEST(Rotary, TablesMatchTheFormula) {
  const GoldenCase& c = golden("rope_tables");  // cos | sin of t * 10000^(-2i/8), t < 6
  auto [cs, sn] = rotary_tables(8, 6, 10000.0, DType::Float64);
  expect_close(concat({cs, sn}, -1), c.at("out"), 1e-15, 1e-15);
  auto [c32, s32] = rotary_tables(8, 6);
  EXPECT_EQ(c32.dtype(), DType::Float32);
  expect_close(c32.to(DType::Float64), cs, 1e-7, 0);
}

TEST(Rotary, GoldenBothLayouts) {
  // half-split against Hugging Face's rotate_half formula; interleaved against Meta's complex one
  expect_golden("rope_half_split", [](const V& v) { return rotary_embedding(v[0], v[1].data(), v[2].data()); });
  expect_golden("rope_interleaved", [](const V& v) { return rotary_embedding(v[0], v[1].data(), v[2].data(), true); });
  // per-row positions: tables (B, 1, T, d/2) broadcast over the heads
  expect_golden("rope_positions", [](const V& v) { return rotary_embedding(v[0], v[1].data(), v[2].data()); });
}

TEST(Rotary, HandValuesOfOnePair) {
  // (1, 0) at angle 90 degrees becomes (0, 1); the backward rotates back
  Tensor c = from_vector<double>({0}, {1, 1}), s = from_vector<double>({1}, {1, 1});
  Variable x(from_vector<double>({1, 0}, {1, 2}), true);
  Variable y = rotary_embedding(x, c, s);
  expect_values(y.data(), {1, 2}, {0, 1}, 1e-15);
  y.backward(from_vector<double>({0, 1}, {1, 2}));
  expect_values(x.grad(), {1, 2}, {1, 0}, 1e-15);
}

TEST(Rotary, ScoresDependOnlyOnTheDistance) {
  // The point of RoPE: q at position s and k at position t score (R_s q) . (R_t k), which is the
  // same for (s + 5, t + 5). A learned position embedding added to the input has no such property.
  nn::RotaryEmbedding rope(8, {.max_seq_len = 64});
  Variable q(normal({1, 1, 1, 8}, 1)), k(normal({1, 1, 1, 8}, 2));
  for (int64_t s : {0, 3, 10})
    for (int64_t t : {0, 7}) {
      const double near = sum(rope(q, s) * rope(k, t)).item(), far = sum(rope(q, s + 5) * rope(k, t + 5)).item();
      EXPECT_NEAR(near, far, 1e-12) << s << ", " << t;
    }
  // and a rotation keeps the vector's length
  EXPECT_NEAR(sum(rope(q, 9) * rope(q, 9)).item(), sum(q * q).item(), 1e-12);
}

TEST(Rotary, GradcheckAndTwice) {
  const auto tables = rotary_tables(6, 5, 100.0, DType::Float64);
  const Tensor c = tables.first, s = tables.second;  // (variables, not bindings: lambdas capture them)
  for (bool inter : {false, true}) {
    auto f = [&, inter](const V& v) { return rotary_embedding(v[0], c, s, inter) * v[0]; };
    expect_gradcheck(f, {rnd({2, 5, 6}, 4)});
    EXPECT_TRUE(gradgradcheck(f, {rnd({2, 5, 6}, 5)}).ok);
  }
}

TEST(Rotary, Errors) {
  const auto tables = rotary_tables(4, 5);
  const Tensor c = tables.first, s = tables.second;
  EXPECT_ERROR(ValueError, "rotary_tables", "head_dim must be even", rotary_tables(5, 5));
  EXPECT_ERROR(ValueError, "rotary_tables", "base must be finite and positive", rotary_tables(4, 5, 0.0));
  EXPECT_ERROR(ShapeError, "rotary_embedding", "even head_dim", rotary_embedding(ones({2, 5, 5}), c, s));
  EXPECT_ERROR(ShapeError, "rotary_embedding", "broadcasts to (2, 6, 2)", rotary_embedding(ones({2, 6, 4}), c, s));
  EXPECT_ERROR(DTypeError, "rotary_embedding", "must have the input's dtype float64",
               rotary_embedding(ones({2, 5, 4}, DType::Float64), c, s));
  EXPECT_ERROR(ShapeError, "rotary_embedding", "one shape", rotary_embedding(ones({2, 5, 4}), c, s.narrow(0, 0, 4)));
  nn::RotaryEmbedding rope(4, {.max_seq_len = 8});
  EXPECT_ERROR(IndexError, "RotaryEmbedding", "6 positions from offset 3 do not fit in 0 to 7",
               rope(Variable(ones({1, 6, 4})), 3));
  // an offset so large that offset + T would overflow int64 (a crash under UBSan before)
  EXPECT_ERROR(IndexError, "RotaryEmbedding", "from offset 9223372036854775807 do not fit",
               rope(Variable(ones({1, 6, 4})), std::numeric_limits<int64_t>::max()));
  EXPECT_ERROR(IndexError, "RotaryEmbedding", "from offset -9223372036854775808 do not fit",
               rope(Variable(ones({1, 6, 4})), std::numeric_limits<int64_t>::min()));
  EXPECT_ERROR(ShapeError, "RotaryEmbedding", "expected an input (..., seq, 4)", rope(Variable(ones({1, 6, 6}))));
  EXPECT_ERROR(ValueError, "RotaryEmbedding", "head_dim must be even", nn::RotaryEmbedding(3));
  EXPECT_EQ(rope.extra_repr(), "head_dim=4, max_seq_len=8, base=10000, interleaved=False");
}

// ---------------------------------------------------------------- scaled_dot_product_attention

TEST(Sdpa, GoldenPyTorch2) {
  expect_golden("sdpa_plain", [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2]); });
  expect_golden("sdpa_causal_more_keys",
                [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], {.is_causal = true}); });
  expect_golden("sdpa_causal_more_queries",
                [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], {.is_causal = true}); });
  // a Bool mask is true where a query MAY attend (this function's convention); row 2 of batch 0
  // has no key at all and gives 0, with gradient 0, as PyTorch 2.x
  expect_golden("sdpa_bool_mask",
                [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], {.attn_mask = v[3].data()}); });
  expect_golden("sdpa_float_mask",
                [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], {.attn_mask = v[3].data()}); });
  expect_golden("sdpa_scale", [](const V& v) {
    return scaled_dot_product_attention(v[0], v[1], v[2], {.is_causal = true, .scale = 0.3});
  });
  expect_golden("sdpa_gqa", [](const V& v) {
    return scaled_dot_product_attention(v[0], v[1], v[2], {.is_causal = true, .enable_gqa = true});
  });
  expect_golden("sdpa_mqa_value_width",
                [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], {.enable_gqa = true}); });
  expect_golden("sdpa_3d", [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2]); });
}

TEST(Sdpa, FusedEqualsComposedWithScaleAndGroupedHeads) {
  // The same call through the fused kernel and, with an all-true mask, through the composed path.
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    const Tensor qd = normal({2, 6, 5, 4}, 7), kd = normal({2, 3, 5, 4}, 8), vd = normal({2, 3, 5, 4}, 9);
    const Tensor allowed = causal ? tril(ones({5, 5}, DType::Bool)) : ones({5, 5}, DType::Bool);
    V grads[2];
    Tensor outs[2];
    for (int path = 0; path < 2; ++path) {
      Variable q(qd, true), k(kd, true), v(vd, true);
      SdpaOptions o{.scale = 0.7, .enable_gqa = true};
      if (path == 0)
        o.is_causal = causal;
      else
        o.attn_mask = allowed;
      Variable y = scaled_dot_product_attention(q, k, v, o);
      sum(y * Variable(normal(y.shape(), 10))).backward();
      outs[path] = y.data();
      grads[path] = {q, k, v};
    }
    expect_close(outs[0], outs[1], 1e-12, 1e-12);
    for (int i = 0; i < 3; ++i) expect_close(grads[0][i].grad(), grads[1][i].grad(), 1e-12, 1e-12);
  }
}

TEST(Sdpa, GradcheckGroupedHeadsAndTwice) {
  auto f = [](const V& v) {
    return scaled_dot_product_attention(v[0], v[1], v[2], {.is_causal = true, .scale = 0.5, .enable_gqa = true});
  };
  const std::vector<Tensor> in{rnd({1, 4, 3, 2}, 11), rnd({1, 2, 3, 2}, 12), rnd({1, 2, 3, 2}, 13)};
  expect_gradcheck(f, in);
  EXPECT_TRUE(gradgradcheck(f, in).ok);
  auto masked = [](const V& v) {
    return scaled_dot_product_attention(v[0], v[1], v[2], {.attn_mask = tril(ones({3, 3}, DType::Bool), -1)});
  };  // row 0 sees no key: its output and gradient are 0, the others are ordinary
  expect_gradcheck(masked, {rnd({1, 2, 3, 2}, 14), rnd({1, 2, 3, 2}, 15), rnd({1, 2, 3, 2}, 16)});
}

TEST(Sdpa, DropoutIsSeededAndScales) {
  const Tensor q = normal({1, 2, 4, 3}, 1), k = normal({1, 2, 6, 3}, 2), v = ones({1, 2, 6, 3}, DType::Float64);
  Generator g1(5), g2(5);
  const Tensor a =
      scaled_dot_product_attention(Variable(q), Variable(k), Variable(v), {.dropout_p = 0.5, .generator = &g1}).data();
  const Tensor b =
      scaled_dot_product_attention(Variable(q), Variable(k), Variable(v), {.dropout_p = 0.5, .generator = &g2}).data();
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  // v = 1: without dropout every output is 1; with it, each is the sum of the kept weights * 2
  const Tensor plain = scaled_dot_product_attention(Variable(q), Variable(k), Variable(v)).data();
  expect_close(plain, ones(plain.shape(), DType::Float64), 1e-15, 1e-15);
  EXPECT_GT(sum(abs(a - plain)).item(), 0.1);
  EXPECT_EQ(
      sum(abs(scaled_dot_product_attention(Variable(q), Variable(k), Variable(v), {.dropout_p = 1.0}).data())).item(),
      0.0);
}

TEST(Sdpa, Errors) {
  Variable q(ones({2, 4, 3, 8})), k(ones({2, 3, 5, 8})), v(ones({2, 3, 5, 8}));
  const char* op = "scaled_dot_product_attention";
  EXPECT_ERROR(ShapeError, op, "must divide the query heads",
               scaled_dot_product_attention(q, k, v, {.enable_gqa = true}));
  EXPECT_ERROR(ValueError, op, "not both",
               scaled_dot_product_attention(q, q, q, {.attn_mask = ones({3, 3}, DType::Bool), .is_causal = true}));
  EXPECT_ERROR(ValueError, op, "dropout_p must be in [0, 1], got 1.5",
               scaled_dot_product_attention(q, q, q, {.dropout_p = 1.5}));
  EXPECT_ERROR(ValueError, op, "scale must be finite", scaled_dot_product_attention(q, q, q, {.scale = INFINITY}));
  EXPECT_ERROR(ShapeError, op, "attn_mask of shape (4, 4) does not broadcast to the scores' shape (2, 4, 3, 3)",
               scaled_dot_product_attention(q, q, q, {.attn_mask = ones({4, 4}, DType::Bool)}));
  EXPECT_ERROR(DTypeError, op, "attn_mask must be Bool",
               scaled_dot_product_attention(q, q, q, {.attn_mask = ones({3, 3}, DType::Int64)}));
  EXPECT_ERROR(DTypeError, op, "one floating dtype",
               scaled_dot_product_attention(q, Variable(ones({2, 4, 3, 8}, DType::Float64)), q));
  EXPECT_ERROR(ShapeError, op, "k (2, 4, 3, 7)", scaled_dot_product_attention(q, Variable(ones({2, 4, 3, 7})), q));
  EXPECT_ERROR(StateError, op, "undefined", scaled_dot_product_attention(Variable(), q, q));
  // fewer key/value heads without enable_gqa: named as attention's, with the hint (it said "matmul:")
  Variable k2(ones({2, 2, 5, 8})), v2(ones({2, 2, 5, 8}));
  EXPECT_ERROR(ShapeError, op, "dim -3 of q (2, 4, 3, 8), k (2, 2, 5, 8) and v (2, 2, 5, 8) does not broadcast",
               scaled_dot_product_attention(q, k2, v2));
  EXPECT_ERROR(ShapeError, op, "pass enable_gqa = true", scaled_dot_product_attention(q, k2, v2));
  EXPECT_ERROR(ShapeError, op, "dim -4",
               scaled_dot_product_attention(q, Variable(ones({3, 4, 5, 8})), Variable(ones({3, 4, 5, 8}))));
}

TEST(Sdpa, AMaskBroadcastsAgainstTheKeysBatchDimsToo) {
  // q (1, 3, 4) against k and v (2, 5, 4): the scores are (2, 3, 5), and PyTorch takes a mask of that
  // shape (it was checked against q's dims alone, (1, 3, 5), and refused)
  const Variable q(normal({1, 3, 4}, 1)), k(normal({2, 5, 4}, 2)), v(normal({2, 5, 4}, 3));
  Tensor mask = ones({2, 3, 5}, DType::Bool);
  mask.narrow(2, 3, 2).narrow(0, 1, 1).fill_(false);  // batch 1 may not see keys 3 and 4
  const Tensor y = scaled_dot_product_attention(q, k, v, {.attn_mask = mask}).data();
  const Tensor y2 =
      scaled_dot_product_attention(Variable(q.data().expand({2, 3, 4}).contiguous()), k, v, {.attn_mask = mask}).data();
  EXPECT_EQ(y.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(max(abs(y - y2)).item(), 0.0);
}

// ---------------------------------------------------------------- grouped-query attention, SwiGLU

TEST(GroupedQueryAttention, MatchesTransformersLlamaAttention) {
  // transformers' LlamaAttention (4 heads, 2 key/value heads, RoPE half-split, biases) is
  // MultiheadAttention with num_kv_heads and rotary: q_proj, k_proj, v_proj, o_proj are w_q, w_k,
  // w_v, w_o. Both paths: the fused kernel (enable_gqa) and the textbook steps.
  for (bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "composed");
    nn::MultiheadAttention attn(16, 4, {.fused = fused, .num_kv_heads = 2, .rotary = nn::RotaryEmbeddingOptions{}});
    EXPECT_EQ(attn.w_k.weight.shape(), Shape({8, 16}));  // 2 heads of 4 features
    check_module(attn, "llama_attention_gqa_rope", [&](const V& in) {
      return std::pair{attn(in[0], {.is_causal = true}).output, Variable()};
    });
  }
}

TEST(GroupedQueryAttention, CachedDecodingEqualsTheFullForwardAndTheCacheIsSmaller) {
  Generator gen(3);
  nn::MultiheadAttention attn(24, 6, {.num_kv_heads = 2, .rotary = nn::RotaryEmbeddingOptions{.max_seq_len = 32}}, gen);
  attn.to(DType::Float64);
  const Variable x(normal({2, 7, 24}, 4));
  NoGradGuard no_grad;
  const Tensor full = attn(x, {.is_causal = true}).output.data();
  nn::KVCache cache;
  // three tokens at once, then one at a time: each row's output equals the full forward's
  for (auto [start, len] : std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 1}, {4, 1}, {5, 2}}) {
    const Variable part(x.data().narrow(1, start, len).contiguous());
    const Tensor y = attn(part, {.is_causal = true, .cache = &cache}).output.data();
    expect_close(y, full.narrow(1, start, len), 1e-12, 1e-12);
  }
  // the cache keeps 2 key heads, not 6: a third of multi-head attention's
  EXPECT_EQ(cache.keys().shape(), Shape({2, 2, 7, 4}));
  EXPECT_EQ(cache.values().shape(), Shape({2, 2, 7, 4}));
}

TEST(GroupedQueryAttention, HeadAblationRemovesWhatTheHeadMaskRemoves) {
  // inspect::HeadAblation subtracts a head's share after the forward; with grouped heads it must
  // read the value head the query head shares (it once read value head h, a shape error).
  struct Net : nn::Callable<Net> {
    nn::MultiheadAttention attn{16, 4, {.num_kv_heads = 2, .rotary = nn::RotaryEmbeddingOptions{}}};
    Net() { register_module("attn", attn); }
    Variable forward(const Variable& x, const Tensor& head_mask) const {
      return attn(x, {.is_causal = true, .head_mask = head_mask}).output;
    }
    std::string type_name() const override { return "Net"; }
  } net;
  net.to(DType::Float64);
  const Variable x(normal({2, 5, 16}, 21));
  NoGradGuard no_grad;
  const Tensor masked = net(x, from_vector<double>({1, 1, 0, 1}, {4})).data();
  inspect::HeadAblation ablate(net, "attn", {2});
  expect_close(net(x, Tensor()).data(), masked, 1e-12, 1e-12);
}

TEST(GroupedQueryAttention, Errors) {
  EXPECT_ERROR(ValueError, "MultiheadAttention", "num_kv_heads 3 must divide num_heads 4",
               nn::MultiheadAttention(16, 4, {.num_kv_heads = 3}));
  EXPECT_ERROR(ValueError, "MultiheadAttention", "num_kv_heads -1",
               nn::MultiheadAttention(16, 4, {.num_kv_heads = -1}));
  nn::MultiheadAttention mqa(16, 4, {.num_kv_heads = 1});
  EXPECT_EQ(mqa.extra_repr(), "embed_dim=16, num_heads=4, head_dim=4, num_kv_heads=1");
  EXPECT_EQ(mqa.num_parameters(), 16 * 16 * 2 + 16 * 4 * 2 + 16 * 2 + 4 * 2);
}

TEST(SwiGLU, MatchesTransformersLlamaMLP) {
  nn::SwiGLU mlp(16, 24);
  EXPECT_FALSE(mlp.gate_proj.bias.defined());  // LLaMA's projections have no bias
  check_module(mlp, "llama_mlp_swiglu", [&](const V& in) { return std::pair{mlp(in[0]), Variable()}; });
}

TEST(SwiGLU, Gradcheck) {
  Generator gen(1);
  nn::SwiGLU mlp(4, 6, {.bias = true}, gen);
  mlp.to(DType::Float64);
  Variable x(rnd({2, 3, 4}, 2), true);
  std::vector<Variable> leaves = mlp.parameters();
  leaves.push_back(x);
  EXPECT_TRUE(gradcheck([&] { return mlp(x); }, leaves).ok);
}
