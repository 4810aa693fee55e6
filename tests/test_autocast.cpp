// Autocast's numbers: the bfloat16 products against a float64 reference on bfloat16-rounded
// operands (the only difference is the order of float32 sums) and against PyTorch's autocast
// (tests/golden/bf16.txt); their gradients; bfloat16 training tracking float32 training; the same
// bits on the same threads; and which kernel runs them. The graph a product records, the copies
// layer norm and GELU leave beside their outputs and second derivatives: test_autocast_graph.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "file_helpers.h"
#include "helpers.h"
#include "minigrad/minigrad.h"
#include "minigrad/tensor/blas.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::max_abs_diff;
using mgtest::rnd;

namespace {
// a rounded to bfloat16 and back: what an autocast product reads
Tensor rounded(const Tensor& t) { return t.to(DType::BFloat16).to(DType::Float32); }
}  // namespace

TEST(Autocast, MatmulAndLinearEqualFloat64OnRoundedOperandsInEveryLayout) {
  const Tensor A = rnd({6, 40}, 11).to(DType::Float32), B = rnd({40, 5}, 12).to(DType::Float32);
  const Tensor W = rnd({5, 40}, 13).to(DType::Float32), bias = rnd({5}, 14).to(DType::Float32);
  auto ref_matmul = [](const Tensor& a, const Tensor& b) {
    return matmul(rounded(a).to(DType::Float64), rounded(b).to(DType::Float64)).to(DType::Float32);
  };
  const std::vector<std::pair<Tensor, Tensor>> operands = {
      {A, B},
      {A.transpose(0, 1).contiguous().transpose(0, 1),
       B.transpose(0, 1).contiguous().transpose(0, 1)},  // transposed storage
      {rnd({6, 80}, 15).to(DType::Float32).narrow(1, 20, 40),
       rnd({40, 9}, 16).to(DType::Float32).narrow(1, 2, 5)},  // offset, strided
      {A.narrow(0, 0, 1).expand({6, 40}), B},                 // stride 0
      {A.narrow(0, 0, 0), B},                                 // zero rows
      {A.narrow(1, 0, 0), B.narrow(0, 0, 0)}};                // k = 0: zeros
  // A bfloat16 operand makes a bfloat16 product (the kernel decides by dtype); the float32 one, in
  // its layout, is rounded by the kernel.
  for (const auto& [a, b] : operands)
    for (const Tensor& got : {matmul(a, b.to(DType::BFloat16)), matmul(a.to(DType::BFloat16), b)}) {
      ASSERT_EQ(got.dtype(), DType::Float32);
      expect_close(got, ref_matmul(a, b), 1e-5, 1e-5);
    }
  // It really rounds: against the unrounded float32 product the difference is bfloat16-sized.
  EXPECT_GT(max_abs_diff(matmul(A.to(DType::BFloat16), B), matmul(A, B)), 1e-3);
  // Batched (the attention shape), with a broadcast batch dim
  const Tensor a4 = rnd({2, 3, 7, 8}, 17).to(DType::Float32), b4 = rnd({1, 3, 8, 4}, 18).to(DType::Float32);
  expect_close(matmul(a4.to(DType::BFloat16), b4.to(DType::BFloat16)), ref_matmul(a4, b4), 1e-5, 1e-5);
  // linear: x W^T + b, the bias added in float32 unrounded
  const Tensor x = rnd({2, 3, 40}, 19).to(DType::Float32);
  const Tensor ref =
      add(matmul(rounded(x).to(DType::Float64), rounded(W).to(DType::Float64).transpose(0, 1)), bias.to(DType::Float64))
          .to(DType::Float32);
  expect_close(linear(x.to(DType::BFloat16), W, bias), ref, 1e-5, 1e-5);
  expect_close(linear(x, W.to(DType::BFloat16), bias), ref, 1e-5, 1e-5);
  // a single vector (1-D input) and zero rows
  expect_close(linear(x.narrow(0, 0, 1).narrow(1, 0, 1).reshape({40}).to(DType::BFloat16), W, bias),
               ref.narrow(0, 0, 1).narrow(1, 0, 1).reshape({5}), 1e-5, 1e-5);
  const Tensor none = linear(x.narrow(0, 0, 0), W.to(DType::BFloat16), bias);
  EXPECT_EQ(none.shape(), (Shape{0, 3, 5}));
  EXPECT_EQ(none.dtype(), DType::Float32);
  expect_close(linear(x.transpose(0, 1), W.transpose(0, 1).contiguous().transpose(0, 1).to(DType::BFloat16), Tensor()),
               matmul(rounded(x.transpose(0, 1)).to(DType::Float64), rounded(W).to(DType::Float64).transpose(0, 1))
                   .to(DType::Float32),
               1e-5, 1e-5);
}

TEST(Autocast, GradientsAreTheRoundedProductsAndTheBackwardRunsAsTheForwardDid) {
  const Tensor x0 = rnd({4, 3, 24}, 21).to(DType::Float32), w0 = rnd({10, 24}, 22).to(DType::Float32),
               b0 = rnd({10}, 23).to(DType::Float32), g0 = rnd({4, 3, 10}, 24).to(DType::Float32);
  Variable x(x0, true), w(w0, true), b(b0, true);
  Variable y;
  {
    AutocastGuard guard;
    y = linear(x, w, b);
  }
  EXPECT_FALSE(AutocastMode::is_enabled());
  y.backward(g0);  // outside the scope: still the bfloat16 backward
  const Tensor gx = matmul(rounded(g0).to(DType::Float64), rounded(w0).to(DType::Float64)).to(DType::Float32);
  const Tensor gw = matmul(rounded(g0).reshape({12, 10}).to(DType::Float64).transpose(0, 1),
                           rounded(x0).reshape({12, 24}).to(DType::Float64))
                        .to(DType::Float32);
  expect_close(x.grad(), gx, 1e-5, 1e-5);
  expect_close(w.grad(), gw, 1e-5, 1e-5);
  expect_close(b.grad(), sum(g0.reshape({12, 10}), {0}), 1e-5, 1e-5);  // the bias gradient is not rounded
  EXPECT_EQ(x.grad().dtype(), DType::Float32);
  // matmul: da = round(g) round(b)^T, db = round(a)^T round(g), summed over the broadcast batch
  const Tensor a1 = rnd({2, 5, 6}, 25).to(DType::Float32), c1 = rnd({6, 3}, 26).to(DType::Float32),
               g1 = rnd({2, 5, 3}, 27).to(DType::Float32);
  Variable va(a1, true), vc(c1, true);
  {
    AutocastGuard guard;
    matmul(va, vc).backward(g1);
  }
  expect_close(
      va.grad(),
      matmul(rounded(g1).to(DType::Float64), rounded(c1).to(DType::Float64).transpose(0, 1)).to(DType::Float32), 1e-5,
      1e-5);
  expect_close(vc.grad(),
               sum(matmul(rounded(a1).to(DType::Float64).transpose(1, 2), rounded(g1).to(DType::Float64)), {0})
                   .to(DType::Float32),
               1e-5, 1e-5);
}

TEST(Autocast, Float64AndTheOffSwitchAreUntouched) {
  const Tensor a = rnd({5, 7}, 31), b = rnd({7, 3}, 32);  // float64
  Variable va(a, true), vb(b, true);
  Variable y;
  {
    AutocastGuard guard;
    y = matmul(va, vb);
  }
  EXPECT_EQ(y.dtype(), DType::Float64);
  EXPECT_EQ(max_abs_diff(y.data(), matmul(a, b)), 0.0);
  const Tensor af = a.to(DType::Float32), bf = b.to(DType::Float32);
  AutocastGuard on;
  {
    AutocastGuard off(false);
    EXPECT_EQ(max_abs_diff(matmul(Variable(af), Variable(bf)).data(), matmul(af, bf)), 0.0);
  }
  EXPECT_TRUE(AutocastMode::is_enabled());
  EXPECT_GT(max_abs_diff(matmul(Variable(af), Variable(bf)).data(), matmul(af, bf)), 1e-4);
}

namespace {
// Causal attention in float64 as the autocast kernel defines it: scores from the rounded q, k;
// softmax; the weights rounded to bfloat16 before they multiply the rounded v.
Tensor reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  const double scale = 1 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor s = matmul(rounded(q).to(DType::Float64), rounded(k).to(DType::Float64).transpose(-2, -1)) * scale;
  if (causal) {
    const int64_t T = q.size(-2);
    Tensor future = zeros({T, T}, DType::Bool);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = i + 1; j < T; ++j) future.narrow(0, i, 1).narrow(1, j, 1).fill_(1);
    s = masked_fill(s, future, -INFINITY);
  }
  const Tensor p = softmax(s, -1);
  return matmul(rounded(p.to(DType::Float32)).to(DType::Float64), rounded(v).to(DType::Float64)).to(DType::Float32);
}
}  // namespace

TEST(Autocast, FusedAttentionEqualsTheRoundedReference) {
  for (bool causal : {false, true}) {
    // 70 queries: two query blocks of the kernel (64 rows each)
    const Tensor q = rnd({2, 3, 70, 16}, 41).to(DType::Float32), k = rnd({2, 3, 70, 16}, 42).to(DType::Float32),
                 v = rnd({2, 3, 70, 16}, 43).to(DType::Float32);
    const AttentionForward f = attention_forward(q.to(DType::BFloat16), k, v, causal);  // one bfloat16 operand suffices
    expect_close(f.out, reference_attention(q, k, v, causal), 2e-5, 2e-5);
    // the (B, T, 3E) projection path gives the same numbers
    const Tensor qkv = concat({q.transpose(1, 2).reshape({2, 70, 48}), k.transpose(1, 2).reshape({2, 70, 48}),
                               v.transpose(1, 2).reshape({2, 70, 48})},
                              2);
    const Tensor qkv16 = qkv.to(DType::BFloat16);
    const AttentionForward g = attention_qkv_forward(qkv16, 3, causal);
    EXPECT_EQ(max_abs_diff(g.out, f.out), 0.0);
    // gradients: within bfloat16 rounding of the float32 ones, and the same through both entry points
    const Tensor dout = rnd({2, 3, 70, 16}, 44).to(DType::Float32);
    const auto [dq, dk, dv] = attention_backward(dout, q, k.to(DType::BFloat16), v, f, causal);
    const AttentionForward f32 = attention_forward(q, k, v, causal);
    const auto [eq, ek, ev] = attention_backward(dout, q, k, v, f32, causal);
    expect_close(dq, eq, 2e-2, 2e-2);
    expect_close(dk, ek, 2e-2, 2e-2);
    expect_close(dv, ev, 2e-2, 2e-2);
    EXPECT_GT(max_abs_diff(dv, ev), 1e-5);  // and they were rounded
    const Tensor dqkv = attention_qkv_backward(dout, qkv16, 3, g, causal);
    EXPECT_EQ(max_abs_diff(dqkv.narrow(2, 0, 48), dq.transpose(1, 2).reshape({2, 70, 48})), 0.0);
    EXPECT_EQ(max_abs_diff(dqkv.narrow(2, 96, 48), dv.transpose(1, 2).reshape({2, 70, 48})), 0.0);
  }
}

namespace {
// tests/golden/bf16.txt: "<case>.<key> <ndim> <dims...> <values...>"
std::map<std::string, Tensor> load_bf16_golden() {
  std::ifstream in(std::string(MG_GOLDEN_DIR) + "/bf16.txt");
  std::map<std::string, Tensor> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string key;
    int64_t nd;
    ss >> key >> nd;
    Shape shape(nd);
    for (auto& s : shape) ss >> s;
    std::vector<double> v;
    double x;
    while (ss >> x) v.push_back(x);
    out[key] = from_vector<double>(v, shape).to(DType::Float32);
  }
  return out;
}
}  // namespace

TEST(Autocast, MatchesPyTorchAutocastWithinOneBf16Rounding) {
  auto gold = load_bf16_golden();
  ASSERT_FALSE(gold.empty()) << "tests/golden/bf16.txt is missing";
  // PyTorch's products write bfloat16 (one rounding more than minigrad's float32): relative 2^-8.
  auto check = [&](const std::string& name, int n, const std::function<Variable(const std::vector<Variable>&)>& fn,
                   double atol, double rtol = 1.0 / 256) {
    std::vector<Variable> in;
    for (int i = 0; i < n; ++i) in.emplace_back(gold.at(name + ".in" + std::to_string(i)), true);
    Variable out;
    {
      AutocastGuard guard;
      out = fn(in);
    }
    SCOPED_TRACE(name);
    expect_close(out.data(), gold.at(name + ".out"), atol, rtol);
    out.backward(gold.at(name + ".gout"));
    for (int i = 0; i < n; ++i) {
      SCOPED_TRACE("grad" + std::to_string(i));
      expect_close(in[i].grad(), gold.at(name + ".grad" + std::to_string(i)), atol, 2 * rtol);
    }
  };
  check(
      "linear", 3, [](const std::vector<Variable>& v) { return linear(v[0], v[1], v[2]); }, 1e-2);
  // PyTorch 1.13's bfloat16 batched matmul on the CPU sums these small products in bfloat16 (its
  // error against the exact product of the rounded operands reaches 1.5% here, a float32 sum's is
  // 0.4% at most): a bound of 8 roundings for its 8-term sums, and minigrad must be the closer one.
  check(
      "bmm", 2, [](const std::vector<Variable>& v) { return matmul(v[0], v[1]); }, 1e-2, 8.0 / 256);
  const Tensor exact =
      matmul(rounded(gold.at("bmm.in0")).to(DType::Float64), rounded(gold.at("bmm.in1")).to(DType::Float64));
  Tensor ours;
  {
    AutocastGuard guard;
    ours = matmul(Variable(gold.at("bmm.in0")), Variable(gold.at("bmm.in1"))).data();
  }
  EXPECT_LT(max_abs_diff(ours, exact), 1e-5);
  EXPECT_GT(max_abs_diff(gold.at("bmm.out"), exact), 1e-2);
  // PyTorch's composed attention also rounds the scores before its softmax: a looser bound.
  check(
      "attention", 3,
      [](const std::vector<Variable>& v) {
        return scaled_dot_product_attention(v[0], v[1], v[2], {.is_causal = true});
      },
      3e-2);
}

// ---------------------------------------------------------------- training

TEST(Autocast, Bf16TrainingTracksFloat32Training) {
  // A small GPT on a fixed random batch, 40 AdamW steps, the same seed both ways: the losses stay
  // within 2% of each other at every step, and both fall by more than half.
  auto train = [](bool bf16) {
    Generator g(0);
    models::GPT m(16, 16, {.d_model = 32, .nhead = 2, .num_layers = 2}, g);
    optim::AdamW opt(m.parameters(), {.lr = 3e-3});
    const Tensor x = randint(0, 16, {8, 16}, g);
    const Tensor y = x;  // each position's own token: quickly learned
    std::vector<double> losses;
    for (int step = 0; step < 40; ++step) {
      Variable l;
      {
        AutocastGuard guard(bf16);
        l = cross_entropy(reshape(m(x), {-1, 16}), y.reshape({-1}));
      }
      opt.zero_grad();
      l.backward();
      opt.step();
      losses.push_back(l.item());
    }
    return losses;
  };
  const auto f32 = train(false), bf16 = train(true);
  for (size_t i = 0; i < f32.size(); ++i) EXPECT_NEAR(bf16[i], f32[i], 0.02 * f32[i]) << "step " << i;
  EXPECT_LT(f32.back(), 0.5 * f32.front());
  EXPECT_LT(bf16.back(), 0.5 * bf16.front());
  EXPECT_NE(bf16.back(), f32.back());  // it did run in bfloat16
}

// ---------------------------------------------------------------- bfloat16 outputs (PyTorch's policy)

TEST(Autocast, Bfloat16OutputsAreTheFloat32OutputsRoundedOnce) {
  // Under AutocastGuard({.bfloat16_outputs = true}) a product's output is the default scope's float32
  // output rounded to bfloat16 once, and its gradients are the default scope's bit for bit (the
  // gradient of a bfloat16 value is float32, so the same dy reaches the same rule), also under
  // create_graph. Every product: linear (rows from a transposed view), batched and vector matmul,
  // fused attention and its (B, T, 3E) form.
  using Fn = std::function<Variable(const std::vector<Variable>&)>;
  struct Case {
    std::string name;
    std::vector<Tensor> in;
    Fn fn;
  };
  const auto f32 = [](const Shape& s, uint64_t seed) { return rnd(s, seed).to(DType::Float32); };
  const std::vector<Case> cases = {{"linear",
                                    {f32({8, 3, 5}, 61).transpose(0, 2), f32({6, 8}, 62), f32({6}, 63)},
                                    [](const std::vector<Variable>& v) { return linear(v[0], v[1], v[2]); }},
                                   {"batched matmul",
                                    {f32({3, 5, 8}, 64), f32({3, 8, 4}, 65)},
                                    [](const std::vector<Variable>& v) { return matmul(v[0], v[1]); }},
                                   {"vector matmul",
                                    {f32({8}, 66), f32({3, 8, 4}, 67)},
                                    [](const std::vector<Variable>& v) { return matmul(v[0], v[1]); }},
                                   {"attention",
                                    {f32({2, 2, 7, 8}, 68), f32({2, 2, 7, 8}, 69), f32({2, 2, 7, 8}, 70)},
                                    [](const std::vector<Variable>& v) {
                                      return scaled_dot_product_attention(v[0], v[1], v[2], {.is_causal = true});
                                    }},
                                   {"attention qkv", {f32({2, 7, 24}, 71)}, [](const std::vector<Variable>& v) {
                                      return self_attention_qkv(v[0], 2, true);
                                    }}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto run = [&](bool outputs, bool create_graph) {
      std::vector<Variable> in;
      for (const Tensor& t : c.in) in.emplace_back(t, true);
      Variable y;
      {
        AutocastGuard guard(true, {.bfloat16_outputs = outputs});
        EXPECT_EQ(AutocastMode::bfloat16_outputs(), outputs);
        y = c.fn(in);
      }
      EXPECT_FALSE(AutocastMode::options().bfloat16_outputs);  // the scope's option ends with it
      const Variable w(rnd(y.shape(), 72).to(DType::Float32));
      const VariableList g = grad({sum(y * w)}, in, {.create_graph = create_graph});
      std::vector<Tensor> out{y.data()};
      for (const Variable& gi : g) out.push_back(gi.data());
      return out;
    };
    for (const bool create_graph : {false, true}) {
      const std::vector<Tensor> plain = run(false, create_graph), pytorch = run(true, create_graph);
      ASSERT_EQ(plain[0].dtype(), DType::Float32);
      ASSERT_EQ(pytorch[0].dtype(), DType::BFloat16);
      EXPECT_EQ(pytorch[0].to(DType::Float32).to_vector<float>(),
                plain[0].to(DType::BFloat16).to(DType::Float32).to_vector<float>());
      EXPECT_GT(max_abs_diff(pytorch[0].to(DType::Float32), plain[0]), 0.0);  // (it was rounded)
      for (size_t i = 1; i < plain.size(); ++i) {
        ASSERT_EQ(pytorch[i].dtype(), DType::Float32);
        EXPECT_EQ(pytorch[i].to_vector<float>(), plain[i].to_vector<float>()) << "grad " << i - 1;
      }
    }
  }
  // linear then GELU (the fused op) runs as the two ops: GELU of the bfloat16 h, rounded again.
  const Tensor x = f32({4, 8}, 73), w = f32({6, 8}, 74), b = f32({6}, 75);
  Tensor h, y;
  {
    AutocastGuard guard({.bfloat16_outputs = true});
    h = linear(Variable(x), Variable(w), Variable(b)).data();
    y = linear_gelu(Variable(x), Variable(w), Variable(b)).data();
  }
  ASSERT_EQ(h.dtype(), DType::BFloat16);
  ASSERT_EQ(y.dtype(), DType::BFloat16);
  EXPECT_EQ(y.to(DType::Float32).to_vector<float>(), gelu(h).to(DType::Float32).to_vector<float>());
  // float64 products are left alone, and AutocastGuard(false) inside turns the option off with autocast
  {
    AutocastGuard guard({.bfloat16_outputs = true});
    EXPECT_EQ(linear(Variable(x.to(DType::Float64)), Variable(w.to(DType::Float64))).dtype(), DType::Float64);
    {
      AutocastGuard off(false);
      EXPECT_FALSE(AutocastMode::options().bfloat16_outputs);
      EXPECT_EQ(linear(Variable(x), Variable(w)).dtype(), DType::Float32);
    }
    EXPECT_TRUE(AutocastMode::bfloat16_outputs());
  }
}

TEST(Autocast, Bfloat16OutputsFeedEveryLayerThatFollowsAProduct) {
  // Under the option a Linear's output is bfloat16. Every layer that may follow one takes it: the
  // ones PyTorch's autocast runs in float32 (recurrent layers, batch and group norm, convolutions,
  // interpolate, every loss) widen it; attention's composed path (masks, weights returned) and a
  // post-norm encoder layer read it as their products do; addmm writes bfloat16 whatever beta is.
  // Each result is within bfloat16 rounding of the default scope's, and the gradient reaches the
  // Linear's weight in float32.
  Generator g(11);
  nn::Linear lin(6, 12, {}, g);
  nn::LSTM lstm(12, 5, {}, g);
  nn::GRU gru(12, 5, {}, g);
  nn::RNN rnn(12, 5, {}, g);
  nn::BatchNorm1d bn(12);
  nn::GroupNorm gn(3, 12);
  nn::Conv2d conv(3, 2, {2, 2}, {}, g);
  nn::Conv1d conv1(12, 2, 2, {}, g);
  nn::Linear to_state(12, 5, {}, g);
  nn::ConvTranspose2d deconv(3, 2, {2, 2}, {}, g);
  nn::MultiheadAttention mha(12, 3, {}, g);
  nn::TransformerEncoderLayer enc(12, 3, {.dim_feedforward = 16, .dropout = 0.0}, g);
  const Tensor x = rnd({2, 4, 6}, 81).to(DType::Float32);
  const Tensor mask = triu(ones({4, 4}, DType::Bool), 1);
  const Tensor target = rnd({2, 4, 12}, 82).to(DType::Float32), c86 = rnd({8, 6}, 86).to(DType::Float32);
  using Fn = std::function<Variable(const Variable&)>;  // h (2, 4, 12), the Linear's output
  const std::vector<std::pair<std::string, Fn>> layers = {
      {"lstm", [&](const Variable& h) { return std::get<0>(lstm(h)); }},
      {"gru", [&](const Variable& h) { return std::get<0>(gru(h)); }},
      {"rnn", [&](const Variable& h) { return std::get<0>(rnn(h)); }},
      {"batch_norm",
       [&](const Variable& h) {
         return bn(reshape(h, {8, 12}));
       }},
      {"group_norm",
       [&](const Variable& h) {
         return gn(reshape(h, {2, 12, 4}));
       }},
      {"gru, h0 from a product",  // (time first: L = 2, N = 4; h0 (1, 4, 5), bfloat16 under the option)
       [&](const Variable& h) { return std::get<0>(gru(h, to_state(h.narrow(0, 0, 1)))); }},
      {"conv1d",
       [&](const Variable& h) {
         return conv1(reshape(h, {2, 12, 4}));
       }},
      {"conv2d",
       [&](const Variable& h) {
         return conv(reshape(h, {2, 3, 4, 4}));
       }},
      {"conv_transpose2d",
       [&](const Variable& h) {
         return deconv(reshape(h, {2, 3, 4, 4}));
       }},
      {"interpolate",
       [&](const Variable& h) {
         return interpolate(reshape(h, {2, 3, 4, 4}), {.size = {6, 5}, .mode = InterpolateMode::Bilinear});
       }},
      {"attention, masked, weights returned",
       [&](const Variable& h) { return mha(h, h, h, {.attn_mask = mask, .need_weights = true}).output; }},
      {"post-norm encoder layer", [&](const Variable& h) { return enc(h); }},
      {"addmm beta 1",
       [&](const Variable& h) {
         return addmm(Variable(c86), reshape(h, {8, 12}), lin.weight);  // a float32 input: (8, 6)
       }},
      {"l1_loss", [&](const Variable& h) { return l1_loss(h, Variable(target)); }},
      {"smooth_l1_loss", [&](const Variable& h) { return smooth_l1_loss(h, Variable(target)); }},
      {"huber_loss", [&](const Variable& h) { return huber_loss(h, Variable(target)); }},
      {"bce_with_logits",
       [&](const Variable& h) { return binary_cross_entropy_with_logits(h, Variable(sigmoid(target))); }},
      {"binary_cross_entropy",
       [&](const Variable& h) { return binary_cross_entropy(sigmoid(h), Variable(sigmoid(target))); }},
      {"kl_div", [&](const Variable& h) { return kl_div(log_softmax(h, -1), Variable(softmax(target, -1))); }}};
  for (const auto& entry : layers) {  // (not a structured binding: clang 14 cannot capture one)
    const Fn& layer = entry.second;
    SCOPED_TRACE(entry.first);
    const auto run = [&](bool outputs) {
      lin.zero_grad();
      Variable y;
      {
        AutocastGuard guard(true, {.bfloat16_outputs = outputs});
        const Variable h = lin(Variable(x));
        EXPECT_EQ(h.dtype(), outputs ? DType::BFloat16 : DType::Float32);
        y = layer(h);
        y = sum(y * y);  // (a scalar whatever the layer gives)
      }
      y.backward();
      EXPECT_EQ(lin.weight.grad().dtype(), DType::Float32);
      return std::make_pair(y.item(), lin.weight.grad().clone());
    };
    const auto plain = run(false), pytorch = run(true);
    EXPECT_NEAR(pytorch.first, plain.first, 2e-2 * std::fabs(plain.first) + 1e-3);
    expect_close(pytorch.second, plain.second, 5e-2, 5e-2);
  }
  // addmm's output dtype does not depend on beta
  AutocastGuard guard({.bfloat16_outputs = true});
  const Variable m = Variable(rnd({3, 4}, 83).to(DType::Float32)), n = Variable(rnd({4, 2}, 84).to(DType::Float32));
  const Variable c = Variable(rnd({3, 2}, 85).to(DType::Float32));
  EXPECT_EQ(addmm(c, m, n, 0.0).dtype(), DType::BFloat16);
  EXPECT_EQ(addmm(c, m, n, 1.0).dtype(), DType::BFloat16);
  EXPECT_EQ(addmm(c, m, n, 0.5, 2.0).dtype(), DType::BFloat16);
}

TEST(Autocast, Bfloat16OutputsMatchPyTorchsAutocastProductsToOneStep) {
  // PyTorch's autocast products write bfloat16 (tests/golden/bf16.txt); with the option so do
  // minigrad's. The float32 sums differ only in their order, so after the one rounding nearly all
  // values have PyTorch's bits (at least 3 in 4) and the rest are one bfloat16 step away.
  auto gold = load_bf16_golden();
  ASSERT_FALSE(gold.empty()) << "tests/golden/bf16.txt is missing";
  Tensor ours;
  {
    AutocastGuard guard({.bfloat16_outputs = true});
    ours = linear(Variable(gold.at("linear.in0")), Variable(gold.at("linear.in1")), Variable(gold.at("linear.in2")))
               .data();
  }
  ASSERT_EQ(ours.dtype(), DType::BFloat16);
  const std::vector<float> a = ours.to(DType::Float32).to_vector<float>(), b = gold.at("linear.out").to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    same += a[i] == b[i];
    const float step = std::ldexp(1.0f, std::ilogb(b[i]) - 7);  // one bfloat16 step at b's binade
    EXPECT_LE(std::fabs(a[i] - b[i]), step) << i;
  }
  EXPECT_GE(4 * same, 3 * a.size()) << same << " of " << a.size() << " with PyTorch's bits";  // 25 of 30 here
}

TEST(Autocast, Bfloat16OutputsTrainLikeFloat32OverThreeSeeds) {
  // A small GPT and a LLaMA-style decoder (RMSNorm, RoPE, SwiGLU, grouped-query attention), 40 AdamW
  // steps on a fixed batch, for seeds 0, 1, 2: float32, the default autocast and PyTorch's policy.
  // Both autocast losses stay within 1% of float32's at every step and all fall by more than half.
  const auto train = [](bool llama, uint64_t seed, int mode) {  // mode 0 float32, 1 autocast, 2 + bf16 outputs
    Generator g(seed);
    std::function<Variable(const Tensor&)> model;
    std::vector<Variable> params;
    std::shared_ptr<models::GPT> gpt;
    std::shared_ptr<models::Decoder> dec;
    if (llama) {
      dec = std::make_shared<models::Decoder>(
          16, models::DecoderOptions{.d_model = 32, .nhead = 4, .num_layers = 2, .context = 16, .hidden = 64}, g);
      params = dec->parameters();
      model = [dec](const Tensor& x) { return (*dec)(x); };
    } else {
      gpt = std::make_shared<models::GPT>(16, 16, models::GPTOptions{.d_model = 32, .nhead = 2, .num_layers = 2}, g);
      params = gpt->parameters();
      model = [gpt](const Tensor& x) { return (*gpt)(x); };
    }
    optim::AdamW opt(params, {.lr = 3e-3});
    const Tensor x = randint(0, 16, {8, 16}, g);
    std::vector<double> losses;
    for (int step = 0; step < 40; ++step) {
      Variable l;
      {
        AutocastGuard guard(mode > 0, {.bfloat16_outputs = mode == 2});
        l = cross_entropy(reshape(model(x), {-1, 16}), x.reshape({-1}));
      }
      opt.zero_grad();
      l.backward();
      opt.step();
      losses.push_back(l.item());
    }
    return losses;
  };
  for (const bool llama : {false, true})
    for (const uint64_t seed : {0, 1, 2}) {
      SCOPED_TRACE(std::string(llama ? "llama" : "gpt") + " seed " + std::to_string(seed));
      const auto f32 = train(llama, seed, 0), mixed = train(llama, seed, 1), outputs = train(llama, seed, 2);
      double worst_mixed = 0, worst_outputs = 0;
      for (size_t i = 0; i < f32.size(); ++i) {
        worst_mixed = std::max(worst_mixed, std::fabs(mixed[i] / f32[i] - 1));
        worst_outputs = std::max(worst_outputs, std::fabs(outputs[i] / f32[i] - 1));
      }
      std::printf(
          "%s seed %d: final loss %.4f (float32) %.4f (autocast) %.4f (bf16 outputs), from %.4f; "
          "worst step %.2f%% / %.2f%%\n",
          llama ? "llama" : "gpt", static_cast<int>(seed), f32.back(), mixed.back(), outputs.back(), f32.front(),
          100 * worst_mixed, 100 * worst_outputs);
      EXPECT_LT(worst_mixed, 0.01);    // (at most 0.14% on the Xeon of docs/BENCHMARKS.md, either kernel)
      EXPECT_LT(worst_outputs, 0.01);  // (at most 0.30% there)
      for (const auto* run : {&f32, &mixed, &outputs}) EXPECT_LT(run->back(), 0.5 * run->front());
      EXPECT_NE(outputs.back(), mixed.back());  // the option changed the numbers
    }
}

TEST(Autocast, Bfloat16OutputsGenerateFromFloat32Logits) {
  // GPT::generate under the option: greedy decoding picks the argmax of the last position's logits
  // as the option computes them (bfloat16, widened), with and without the KV cache.
  Generator g(3);
  models::GPT m(16, 12, {.d_model = 32, .nhead = 2, .num_layers = 2}, g);
  const Tensor ids = randint(0, 16, {2, 3}, g);
  AutocastGuard guard({.bfloat16_outputs = true});
  const Tensor full = m.generate(ids, 6, 0.0, std::nullopt, g, false);
  ASSERT_EQ(full.shape(), (Shape{2, 9}));
  for (int64_t len = 3; len < 9; ++len) {
    NoGradGuard no_grad;
    const Variable logits = m(full.narrow(1, 0, len).contiguous());
    ASSERT_EQ(logits.dtype(), DType::BFloat16);
    const Tensor want = argmax(logits.data().narrow(1, len - 1, 1).to(DType::Float32), -1);  // (2, 1)
    EXPECT_EQ(full.narrow(1, len, 1).contiguous().to_vector<int64_t>(), want.contiguous().to_vector<int64_t>())
        << "position " << len;
  }
  // With the KV cache the first new token comes from the same forward over the prompt: the same id.
  // (Later ones read keys and values from one-row products, whose float32 sums may round to a
  // neighbouring bfloat16 value, so a near tie could go the other way on another CPU.)
  const Tensor cached = m.generate(ids, 6, 0.0, std::nullopt, g, true);
  ASSERT_EQ(cached.shape(), full.shape());
  EXPECT_EQ(cached.narrow(1, 3, 1).contiguous().to_vector<int64_t>(),
            full.narrow(1, 3, 1).contiguous().to_vector<int64_t>());
}

TEST(Autocast, SameThreadsSameBits) {
  // Two runs of the same autocast step give the same bits (fixed splits, one oneDNN thread each).
  auto run = [] {
    Generator g(1);
    models::GPT m(16, 32, {.d_model = 64, .nhead = 4, .num_layers = 1}, g);
    const Tensor x = randint(0, 16, {4, 32}, g);
    AutocastGuard guard;
    Variable l = cross_entropy(reshape(m(x), {-1, 16}), x.reshape({-1}));
    l.backward();
    return m.parameters()[2].grad().to_vector<float>();
  };
  EXPECT_EQ(run(), run());
}

TEST(Autocast, KernelIsTheExpectedOne) {
  // ctest runs this binary a second time with oneDNN capped at AVX2 (AutocastNoBf16Instructions):
  // there the products must go to sgemm on widened operands, and every test above still passes.
  const std::string kernel = blas::bf16_kernel();
  std::printf("bfloat16 products run on: %s\n", kernel.c_str());
  EXPECT_FALSE(kernel.empty());
  if (const char* want = std::getenv("MG_EXPECT_BF16_KERNEL")) {
    EXPECT_EQ(kernel, want);
    return;
  }
  // The CPU's flags, read here from /proc/cpuinfo rather than from oneDNN.
  const mgtest::ProcCpuInfo cpu = mgtest::proc_cpu_info();
  if (!cpu.read()) GTEST_SKIP() << "no /proc/cpuinfo to read the CPU's flags from";
  const auto has = [&](const char* flag) { return cpu.has(flag); };
  const bool widened = kernel.find("widened") != std::string::npos;
  if (std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA") || std::getenv("MG_GEMM"))
    GTEST_SKIP() << "the environment caps oneDNN or chooses the products' kernel; the flags below do not apply";
  const char* forced = std::getenv("MG_BF16_GEMM");
  if (forced && std::string(forced) == "onednn") {  // ctest's AutocastOnOneDnn
    // oneDNN 2.6 has bfloat16 kernels only from AVX-512 (avx512_core) up; below, the products stay on sgemm
    const bool avx512_core = has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq");
    EXPECT_EQ(widened, !avx512_core) << kernel;
    return;
  }
  if (forced) GTEST_SKIP() << "MG_BF16_GEMM=" << forced << " chooses the kernel; the rule below is for an unset one";
  // Unset: oneDNN where the CPU has AMX, or AVX512-BF16 on AMD (tensor/onednn.cpp: runs_bf16).
  const bool amx = has("amx_bf16") && has("amx_tile") && has("amx_int8");
  const bool amd = cpu.vendor == "AuthenticAMD";
  const bool onednn = amx || (has("avx512_bf16") && amd);
  EXPECT_EQ(!widened, onednn) << "flags: amx " << amx << ", avx512_bf16 " << has("avx512_bf16") << ", AMD " << amd
                              << "; kernel " << kernel;
}
