// The spellings a PyTorch user writes first, each doing what it does in PyTorch: set_default_dtype,
// randn(shape, dtype), RMSNorm(6), t.mean(1) and t.sum(0, true), the method forms repeat_interleave,
// lerp and addmm, a trained float attn_mask, rotary embeddings from position ids (and Hugging
// Face's (T, d) tables), and the hint that grouped-query attention needs asking for.
#include <cmath>

#include "helpers.h"
#include "minigrad/autograd/gradcheck.h"

using namespace mg;
using mgtest::expect_close;
using testing::HasSubstr;

namespace {
template <class F>
std::string error_text(const F& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Puts the default dtype back whatever the test does.
struct DefaultDtypeGuard {
  DType saved = default_dtype();
  ~DefaultDtypeGuard() { set_default_dtype(saved); }
};
}  // namespace

TEST(PyTorchForms, SetDefaultDtypeMakesNewTensorsAndModulesFloat64) {
  DefaultDtypeGuard guard;
  EXPECT_EQ(default_dtype(), DType::Float32);
  set_default_dtype(DType::Float64);
  EXPECT_EQ(zeros({2}).dtype(), DType::Float64);
  EXPECT_EQ(ones({2}).dtype(), DType::Float64);
  EXPECT_EQ(randn({2, 3}).dtype(), DType::Float64);
  EXPECT_EQ(full({2}, 0.5).dtype(), DType::Float64);
  EXPECT_EQ(linspace(0, 1, 5).dtype(), DType::Float64);
  EXPECT_EQ(rotary_tables(8, 4).first.dtype(), DType::Float64);
  EXPECT_EQ(arange(3).dtype(), DType::Int64);  // integers stay integers, as in PyTorch
  nn::Linear fc(3, 2);
  nn::LayerNorm ln(2);
  nn::Embedding emb(5, 2);
  for (const Variable& p : fc.parameters()) EXPECT_EQ(p.dtype(), DType::Float64);
  for (const Variable& p : ln.parameters()) EXPECT_EQ(p.dtype(), DType::Float64);
  EXPECT_EQ(emb.weight.dtype(), DType::Float64);
  EXPECT_EQ(fc(Variable(randn({4, 3}))).dtype(), DType::Float64);
  // the same draws as float32's, each kept in double instead of rounded
  Generator g1(7), g2(7);
  const Tensor d64 = randn({50}, g1), d32 = randn({50}, g2, DType::Float32);
  EXPECT_LT(max(abs(d64.to(DType::Float32) - d32)).item(), 1e-30);
  set_default_dtype(DType::Float32);
  EXPECT_EQ(zeros({2}).dtype(), DType::Float32);
  EXPECT_EQ(nn::Linear(3, 2).weight.dtype(), DType::Float32);
  EXPECT_THAT(error_text([] { set_default_dtype(DType::Int64); }), HasSubstr("set_default_dtype: the default must be"));
  EXPECT_THROW(set_default_dtype(DType::BFloat16), ValueError);
}

TEST(PyTorchForms, RandnWithTheDtypeSecond) {
  Generator g1(3), g2(3);
  const Tensor a = randn({2, 3}, DType::Float64, g1), b = randn({2, 3}, g2, DType::Float64);
  EXPECT_EQ(a.dtype(), DType::Float64);
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
}

TEST(PyTorchForms, NormsTakeOneSize) {
  nn::RMSNorm rms(6);
  nn::LayerNorm ln(6, {.eps = 1e-6});
  EXPECT_EQ(rms.normalized_shape, (Shape{6}));
  EXPECT_EQ(ln.normalized_shape, (Shape{6}));
  EXPECT_EQ(ln.eps, 1e-6);
  const Variable x(randn({2, 6}));
  EXPECT_EQ(rms(x).data().to_vector<float>(), nn::RMSNorm({6})(x).data().to_vector<float>());
}

TEST(PyTorchForms, ReductionsOverOneIntDim) {
  const Tensor t = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.mean(1).to_vector<double>(), (std::vector<double>{2, 5}));
  EXPECT_EQ(t.sum(0, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(t.sum(0, true).to_vector<double>(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(t.sum(-1).to_vector<double>(), (std::vector<double>{6, 15}));
  EXPECT_EQ(t.var(1).to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_DOUBLE_EQ(t.std(0).to_vector<double>()[0], std::sqrt(4.5));
  // a braced list still means a list of dims, and {} every dim
  EXPECT_EQ(t.sum({}).item(), 21.0);
  EXPECT_EQ(t.sum({0, 1}).item(), 21.0);
  EXPECT_EQ(t.mean({1}).to_vector<double>(), (std::vector<double>{2, 5}));
  // and on Variables, with their gradients
  Variable v(t, true);
  v.mean(1).sum().backward();
  EXPECT_EQ(v.grad().to_vector<double>(), std::vector<double>(6, 1.0 / 3));
  EXPECT_EQ(Variable(t).sum(0, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(Variable(t).std(1, 0).data().to_vector<double>()[0], std::sqrt(2.0 / 3));
}

TEST(PyTorchForms, MethodFormsAreTheFunctions) {
  const Tensor t = from_vector<double>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(t.repeat_interleave(2, 0).to_vector<double>(), (std::vector<double>{1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_EQ(t.repeat_interleave(2).to_vector<double>(), (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4}));
  const Variable a(t, true), b(from_vector<double>({5, 6, 7, 8}, {2, 2}), true);
  EXPECT_EQ(a.repeat_interleave(3, 1).data().to_vector<double>(),
            repeat_interleave(a, 3, 1).data().to_vector<double>());
  EXPECT_EQ(a.lerp(b, 0.25).data().to_vector<double>(), (std::vector<double>{2, 3, 4, 5}));
  EXPECT_EQ(a.lerp(b, Variable(full({2, 2}, 0.5, DType::Float64))).data().to_vector<double>(),
            (std::vector<double>{3, 4, 5, 6}));
  // beta a + alpha (a @ b): [[1,2],[3,4]] @ [[5,6],[7,8]] = [[19,22],[43,50]]
  EXPECT_EQ(a.addmm(a, b, 2, 1).data().to_vector<double>(), (std::vector<double>{21, 26, 49, 58}));
  mgtest::expect_gradcheck(
      [](const std::vector<Variable>& x) { return x[0].addmm(x[1], x[2], 0.5, 2).sum(); },
      {randn({3, 4}, DType::Float64), randn({3, 2}, DType::Float64), randn({2, 4}, DType::Float64)});
}

TEST(PyTorchForms, GroupedQueryAttentionIsHintedWhereItFails) {
  Generator g(1);
  const Variable q(randn({1, 4, 5, 8}, g)), k(randn({1, 2, 5, 8}, g)), v(randn({1, 2, 5, 8}, g));
  // by hand, as a tutorial writes it
  const std::string by_hand = error_text([&] { matmul(q, k.transpose(-2, -1)); });
  EXPECT_THAT(by_hand, HasSubstr("do not broadcast"));
  EXPECT_THAT(by_hand, HasSubstr("4 query heads and 2 key/value heads is grouped-query attention"));
  EXPECT_THAT(error_text([&] { nn::attention_scores(q, k); }), HasSubstr("repeat_kv_heads(k, 2)"));
  EXPECT_THAT(error_text([&] { scaled_dot_product_attention(q, k, v); }), HasSubstr("pass enable_gqa = true"));
  // and done as the hints say, the two ways agree
  const Variable a = scaled_dot_product_attention(q, k, v, {.enable_gqa = true});
  const Variable b = scaled_dot_product_attention(q, nn::repeat_kv_heads(k, 2), nn::repeat_kv_heads(v, 2));
  expect_close(a.data(), b.data(), 1e-6, 1e-6);
  // an unrelated mismatch gets no such hint
  EXPECT_THAT(error_text([&] {
                matmul(Variable(randn({3, 2, 2})), Variable(randn({5, 2, 2})));
              }),
              testing::Not(HasSubstr("grouped-query")));
}

TEST(PyTorchForms, ATrainedAttentionBiasGetsItsGradient) {
  // ALiBi-style: a learned bias (H, Tq, Tk) added to the scores, trained through the attention
  Generator g(2);
  const Tensor q = randn({2, 3, 4, 5}, g, DType::Float64), k = randn({2, 3, 6, 5}, g, DType::Float64),
               v = randn({2, 3, 6, 5}, g, DType::Float64), bias = randn({3, 4, 6}, g, DType::Float64);
  mgtest::expect_gradcheck(
      [](const std::vector<Variable>& x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); },
      {q, k, v, bias});
  // with a bias that is not trained: the Tensor mask's numbers
  const Variable plain = scaled_dot_product_attention(Variable(q), Variable(k), Variable(v), {.attn_mask = bias});
  const Variable trained = scaled_dot_product_attention(Variable(q), Variable(k), Variable(v), Variable(bias, true));
  expect_close(trained.data(), plain.data(), 1e-14, 0);
  const Variable fixed = scaled_dot_product_attention(Variable(q), Variable(k), Variable(v), Variable(bias));
  expect_close(fixed.data(), plain.data(), 1e-14, 0);
  // the gradient reaches the bias, summed over the batch it was broadcast along
  Variable b(bias, true);
  scaled_dot_product_attention(Variable(q), Variable(k), Variable(v), b).sum().backward();
  ASSERT_TRUE(b.grad().defined());
  EXPECT_EQ(b.grad().shape(), bias.shape());
  // errors name the function
  EXPECT_THAT(error_text([&] {
                scaled_dot_product_attention(Variable(q), Variable(k), Variable(v), Variable(bias),
                                             {.attn_mask = bias});
              }),
              HasSubstr("given twice"));
  EXPECT_THAT(error_text([&] {
                scaled_dot_product_attention(Variable(q), Variable(k), Variable(v), Variable(bias.to(DType::Float32)));
              }),
              HasSubstr("must have q's floating dtype float64"));
  EXPECT_THROW(scaled_dot_product_attention(Variable(q), Variable(k), Variable(v), Variable(randn({4, 5}))),
               DTypeError);
}

TEST(PyTorchForms, RotaryFromPositionIds) {
  nn::RotaryEmbedding rope(8, {.max_seq_len = 32});
  Generator g(4);
  const Variable x(randn({2, 3, 5, 8}, g));  // (B, H, T, d)
  // the same positions for every sequence: the offset form
  EXPECT_EQ(rope(x, arange(4, 9)).data().to_vector<float>(), rope(x, 4).data().to_vector<float>());
  // a row of positions per sequence (row 0 left-padded by 2, row 1 starting at 7)
  const Tensor ids = from_vector<int64_t>({0, 0, 0, 1, 2, 7, 8, 9, 10, 11}, {2, 5});
  const Tensor y = rope(x, ids).data();
  EXPECT_EQ(y.narrow(0, 1, 1).to_vector<float>(), rope(x, 7).data().narrow(0, 1, 1).to_vector<float>());
  EXPECT_EQ(y.narrow(0, 0, 1).narrow(2, 2, 3).to_vector<float>(),
            rope(Variable(x.data().narrow(2, 2, 3)), 0).data().narrow(0, 0, 1).to_vector<float>());
  // a 3-D input (B, T, d) takes (B, T) ids too
  const Variable x3(randn({2, 5, 8}, g));
  EXPECT_EQ(rope(x3, ids).data().narrow(0, 1, 1).to_vector<float>(),
            rope(x3, 7).data().narrow(0, 1, 1).to_vector<float>());
  EXPECT_THAT(error_text([&] {
                rope(x, from_vector<int64_t>({0, 1, 2, 3, 40}, {5}));
              }),
              HasSubstr("position_ids from 0 to 40 do not fit"));
  EXPECT_THROW(rope(x, arange(4)), ShapeError);
  // (1, T) serves every sequence, as Hugging Face's cache_position.unsqueeze(0)
  EXPECT_EQ(rope(x, from_vector<int64_t>({3, 4, 5, 6, 7}, {1, 5})).data().to_vector<float>(),
            rope(x, 3).data().to_vector<float>());
  EXPECT_THROW(rope(x, from_vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4}, {3, 5})), ShapeError);
}

TEST(PyTorchForms, HuggingFaceRotaryTablesAreRead) {
  // Hugging Face's LLaMA keeps cos and sin as (T, d) = cat(freqs, freqs); the (T, d/2) half is the same rotation
  // (not a structured binding: clang 14 cannot capture one in the lambda below)
  const std::pair<Tensor, Tensor> tables = rotary_tables(8, 6, 10000.0, DType::Float64);
  const Tensor c = tables.first, s = tables.second;
  const Tensor c_hf = concat({c, c}, 1), s_hf = concat({s, s}, 1);
  Generator g(5);
  const Variable x(randn({2, 6, 8}, g, DType::Float64), true);
  const Variable a = rotary_embedding(x, c, s), b = rotary_embedding(x, c_hf, s_hf);
  EXPECT_EQ(a.data().to_vector<double>(), b.data().to_vector<double>());
  mgtest::expect_gradcheck([&](const std::vector<Variable>& in) { return rotary_embedding(in[0], c_hf, s_hf); },
                           {x.data()});
  // a (T, d) table whose halves differ is not Hugging Face's: an error, not a guess
  EXPECT_THAT(error_text([&] { rotary_embedding(x, concat({c, s}, 1), s_hf); }), HasSubstr("two halves differ"));
}
