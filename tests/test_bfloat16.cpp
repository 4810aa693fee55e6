// bfloat16 and autocast: the conversion exhaustively and on every rounding case; bfloat16 tensors
// (layouts, printing, safetensors, refusals); the autocast products against a float64 reference on
// bfloat16-rounded operands (the only difference is the order of float32 sums) and against PyTorch's
// autocast (tests/golden/bf16.txt); gradients; and bfloat16 training tracking float32 training.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "file_helpers.h"
#include "helpers.h"
#include "minigrad/minigrad.h"
#include "minigrad/tensor/blas.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::rnd;

namespace {

// The nearest bfloat16 to a finite float by exact distances (computed in double, where the
// differences of these floats are exact), ties to the even one: an independent statement of the
// rounding rule, not the bit trick. A value at or past the top midpoint goes to inf.
uint16_t reference_round(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
  const uint32_t lo = mag & 0xffff0000u, hi = lo + 0x10000u;  // the neighbours toward and away from 0
  const double x = std::bit_cast<float>(mag), a = std::bit_cast<float>(lo);
  const double b = hi >= 0x7f800000u ? std::ldexp(1.0, 128) : std::bit_cast<float>(hi);  // past the top: inf
  const double da = x - a, db = b - x;
  uint32_t pick = da < db ? lo : db < da ? hi : (((lo >> 16) & 1u) == 0 ? lo : hi);
  return static_cast<uint16_t>((sign | pick) >> 16);
}

bool is_nan_bits(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

// a rounded to bfloat16 and back: what an autocast product reads
Tensor rounded(const Tensor& t) { return t.to(DType::BFloat16).to(DType::Float32); }

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to(DType::Float64).to_vector<double>(), y = b.to(DType::Float64).to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

}  // namespace

// ---------------------------------------------------------------- conversion

TEST(BFloat16, EveryBf16ValueWidensAndNarrowsBackToItself) {
  std::vector<float> widened(65536);
  std::vector<bfloat16> all(65536), back(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b] = bfloat16::from_bits(static_cast<uint16_t>(b));
  to_float32(all.data(), widened.data(), 65536);
  to_bfloat16(widened.data(), back.data(), 65536);
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = static_cast<float>(all[b]);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), b << 16) << b;  // widening appends 16 zero bits
    ASSERT_EQ(std::bit_cast<uint32_t>(widened[b]), b << 16) << b;
    const uint16_t scalar = bfloat16(f).bits, from_double = bfloat16(static_cast<double>(f)).bits;
    if (is_nan_bits(static_cast<uint16_t>(b))) {  // NaN stays NaN with its sign, made quiet
      ASSERT_TRUE(is_nan_bits(scalar)) << b;
      ASSERT_EQ(scalar, b | 0x40u) << b;
      ASSERT_EQ(back[b].bits, scalar) << b;
      ASSERT_TRUE(std::isnan(static_cast<double>(all[b])));
    } else {
      ASSERT_EQ(scalar, b) << b;
      ASSERT_EQ(back[b].bits, b) << b;
      ASSERT_EQ(from_double, b) << b;
    }
  }
}

TEST(BFloat16, EveryRoundingCaseBetweenNeighbours) {
  // For each finite bfloat16 value v and the next one up: the midpoint (a tie: to even), one float
  // step either side of it, v itself plus one float step, and the next value minus one float step.
  std::vector<float> inputs;
  for (uint32_t b = 0; b < 0x7f80; ++b)
    for (uint32_t sign : {0u, 0x80000000u}) {
      const uint32_t v = (b << 16) | sign;
      for (uint32_t low : {0x8000u, 0x7fffu, 0x8001u, 0x0001u, 0xffffu})
        inputs.push_back(std::bit_cast<float>(v | low));
    }
  std::vector<bfloat16> vec(inputs.size());
  to_bfloat16(inputs.data(), vec.data(), static_cast<int64_t>(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const uint16_t want = reference_round(inputs[i]);
    ASSERT_EQ(bfloat16(inputs[i]).bits, want) << inputs[i];
    ASSERT_EQ(vec[i].bits, want) << inputs[i];
    ASSERT_EQ(bfloat16(static_cast<double>(inputs[i])).bits, want) << inputs[i];
  }
  // Hand-checked cases: 1 + 2^-8 is the tie between 1 and 1 + 2^-7: to even, 1; just above it, up.
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + 0x1p-8f + 0x1p-23f)), 1.0f + 0x1p-7f);
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);  // tie between odd and even: up to even
  EXPECT_EQ(static_cast<float>(bfloat16(std::numeric_limits<float>::max())), INFINITY);  // past the top midpoint
  EXPECT_EQ(static_cast<float>(bfloat16(-INFINITY)), -INFINITY);
  EXPECT_EQ(bfloat16(-0.0f).bits, 0x8000);
  EXPECT_EQ(static_cast<float>(bfloat16(0x1p-133f)), 0x1p-133f);  // a subnormal bfloat16, exact
  EXPECT_EQ(static_cast<float>(bfloat16(3.14159265f)), 3.140625f);
}

TEST(BFloat16, Float64AndInt64RoundOnceNotTwice) {
  // 1 + 2^-8 + 2^-30 is above the tie; through float32 it would first round onto the tie (2^-30 is
  // below float32's half step) and then to even, 1. Rounded once it is 1 + 2^-7.
  EXPECT_EQ(static_cast<float>(bfloat16(1.0 + 0x1p-8 + 0x1p-30)), 1.0f + 0x1p-7f);
  EXPECT_EQ(static_cast<float>(bfloat16(1.0 + 0x1p-8)), 1.0f);  // the tie itself: to even
  // 2^60 + 2^52 + 1: float64 rounds it onto the tie 2^60 + 2^52; rounded once it goes up.
  const int64_t big = (int64_t{1} << 60) + (int64_t{1} << 52) + 1;
  const Tensor t = from_vector<int64_t>({big, -big, 3, 0}, {4}).to(DType::BFloat16);
  EXPECT_EQ(t.at({0}), std::ldexp(1.0, 60) + std::ldexp(1.0, 53));
  EXPECT_EQ(t.at({1}), -(std::ldexp(1.0, 60) + std::ldexp(1.0, 53)));
  EXPECT_EQ(t.at({2}), 3.0);
  const Tensor d = from_vector<double>({1.0 + 0x1p-8 + 0x1p-30}, {1}).to(DType::BFloat16);
  EXPECT_EQ(d.at({0}), 1.0 + 0x1p-7);
}

// ---------------------------------------------------------------- bfloat16 tensors

TEST(BFloat16, TensorsConvertInEveryLayout) {
  const Tensor base = rnd({4, 6}, 3).to(DType::Float32);
  const std::vector<Tensor> layouts = {base,
                                       base.transpose(0, 1),
                                       base.narrow(1, 1, 3),
                                       base.narrow(0, 1, 2).narrow(1, 2, 4),
                                       base.narrow(0, 0, 1).expand({5, 6}),
                                       base.narrow(0, 2, 1).squeeze(0).narrow(0, 3, 1).squeeze(0),
                                       base.narrow(0, 0, 0)};
  for (const Tensor& t : layouts) {
    const Tensor b = t.to(DType::BFloat16);
    ASSERT_EQ(b.dtype(), DType::BFloat16);
    ASSERT_EQ(b.shape(), t.shape());
    const auto src = t.contiguous().to_vector<float>();
    const Tensor back = b.to(DType::Float32);
    const auto got = back.to_vector<float>();
    for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(got[i], static_cast<float>(bfloat16(src[i]))) << i;
    // views of a bfloat16 tensor convert the same way
    EXPECT_EQ(b.transpose(0, b.dim() > 1 ? 1 : 0).to(DType::Float32).contiguous().to_vector<float>(),
              back.transpose(0, b.dim() > 1 ? 1 : 0).contiguous().to_vector<float>());
  }
  // to float64, int64 (truncation) and bool
  const Tensor v = from_vector<float>({2.75f, -1.5f, 0.0f, 100.3f}, {4}).to(DType::BFloat16);
  EXPECT_EQ(v.to(DType::Float64).to_vector<double>(), (std::vector<double>{2.75, -1.5, 0.0, 100.5}));
  EXPECT_EQ(v.to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{2, -1, 0, 100}));
  EXPECT_EQ(v.to(DType::Bool).to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0, 1}));
  EXPECT_THROW(from_vector<float>({NAN}, {1}).to(DType::BFloat16).to(DType::Int64), ValueError);
  // fill, full, clone, copy_
  Tensor f = full({2, 2}, 0.1, DType::BFloat16);
  EXPECT_EQ(f.at({1, 1}), static_cast<double>(bfloat16(0.1)));
  Tensor c = zeros({2, 2}, DType::BFloat16);
  c.copy_(f.transpose(0, 1));
  EXPECT_EQ(c.clone().to(DType::Float32).to_vector<float>(), std::vector<float>(4, static_cast<float>(bfloat16(0.1))));
}

TEST(BFloat16, PrintsAsPyTorchDoes) {
  // torch.tensor([1.0078125, -2.5, 3.140625], dtype=torch.bfloat16) prints these values
  const Tensor t = from_vector<float>({1.0078125f, -2.5f, 3.14159f}, {3}).to(DType::BFloat16);
  EXPECT_EQ(t.str(), "tensor([ 1.0078, -2.5000,  3.1406], dtype=bfloat16)");
}

TEST(BFloat16, ArithmeticIsRefusedWithTheOpNamed) {
  const Tensor b = ones({3}, DType::BFloat16);
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const DTypeError& e) {
      return std::string(e.what());
    }
    return std::string("no DTypeError");
  };
  EXPECT_NE(message([&] { add(b, b); }).find("add"), std::string::npos);
  EXPECT_NE(message([&] { sum(b); }).find("sum"), std::string::npos);
  EXPECT_NE(message([&] { exp(b); }).find("exp"), std::string::npos);
  EXPECT_NE(message([&] { Variable(b, true); }).find("float"), std::string::npos);  // no gradients of bfloat16
  EXPECT_NE(message([&] {
              matmul(ones({2, 2}, DType::Float64), ones({2, 2}, DType::BFloat16));
            }).find("float32 or bfloat16"),
            std::string::npos);
  nn::Linear lin(3, 2);
  const Tensor w_before = lin.weight.data().clone();
  EXPECT_NE(message([&] { lin.to(DType::BFloat16); }).find("AutocastGuard"), std::string::npos);
  EXPECT_EQ(lin.weight.dtype(), DType::Float32);
  EXPECT_EQ(max_abs_diff(lin.weight.data(), w_before), 0.0);
}

TEST(BFloat16, SafetensorsBF16RoundTripsAndLoadsIntoFloat32Models) {
  const std::string path = mgtest::temp_path("bf16.safetensors");
  const Tensor w = rnd({2, 3}, 5).to(DType::Float32).to(DType::BFloat16);
  save_safetensors(path, {{"weight", w}, {"bias", zeros({2}, DType::BFloat16)}});
  const SafeTensors st = load_safetensors(path);
  ASSERT_EQ(st.tensors.size(), 2u);
  for (const auto& [name, t] : st.tensors) {
    ASSERT_EQ(t.dtype(), DType::BFloat16) << name;
    if (name == "weight") EXPECT_EQ(max_abs_diff(t, w), 0.0);
  }
  // The file's header says BF16, as PyTorch's safetensors writes it.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("\"BF16\""), std::string::npos);
  nn::Linear lin(3, 2);
  nn::load(lin, path);
  EXPECT_EQ(lin.weight.dtype(), DType::Float32);
  EXPECT_EQ(max_abs_diff(lin.weight.data(), w), 0.0);  // widened exactly
  std::remove(path.c_str());
}

// ---------------------------------------------------------------- autocast products

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
    nn::GPT m(16, 16, {.d_model = 32, .nhead = 2, .num_layers = 2}, g);
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

TEST(Autocast, SameThreadsSameBits) {
  // Two runs of the same autocast step give the same bits (fixed splits, one oneDNN thread each).
  auto run = [] {
    Generator g(1);
    nn::GPT m(16, 32, {.d_model = 64, .nhead = 4, .num_layers = 1}, g);
    const Tensor x = randint(0, 16, {4, 32}, g);
    AutocastGuard guard;
    Variable l = cross_entropy(reshape(m(x), {-1, 16}), x.reshape({-1}));
    l.backward();
    return m.parameters()[2].grad().to_vector<float>();
  };
  EXPECT_EQ(run(), run());
}

TEST(Autocast, KernelIsTheExpectedOne) {
  // ctest runs this binary a second time with oneDNN capped at AVX2 (BFloat16NoBf16Instructions):
  // there the products must go to sgemm on widened operands, and every test above still passes.
  const std::string kernel = blas::bf16_kernel();
  std::printf("bfloat16 products run on: %s\n", kernel.c_str());
  if (const char* want = std::getenv("MG_EXPECT_BF16_KERNEL")) EXPECT_EQ(kernel, want);
  EXPECT_FALSE(kernel.empty());
}

namespace {
// Whether two bfloat16 tensors of one shape hold the same bits.
bool same_bf16_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != DType::BFloat16 || b.dtype() != DType::BFloat16) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data<bfloat16>(), y.data<bfloat16>(), static_cast<size_t>(x.numel()) * 2) == 0;
}
}  // namespace

TEST(Autocast, LayerNormAndGeluLeaveTheNextProductsOperandBeside) {
  // Under autocast, layer norm and linear_gelu round their output to bfloat16 while it is in cache
  // (Storage::bf16_copy); the next product reads that instead of converting: the same bits as
  // .to(BFloat16), for any view of the output, and never once the output has been written in place.
  Generator g(3);
  const Variable x(randn({6, 40}, g) * 3.0, true), w(randn({40}, g), true), b(randn({40}, g), true);
  const Variable fw(randn({24, 40}, g) * 0.2, true), fb(randn({24}, g), true);
  Variable y, h;
  {
    const AutocastGuard guard;
    y = layer_norm(x, {40}, w, b);
    h = linear_gelu(y, fw, fb, "tanh");
  }
  for (const Variable* v : {&y, &h}) {
    const Tensor copy = bf16_copy_of(v->data());
    ASSERT_TRUE(copy.defined());
    EXPECT_TRUE(same_bf16_bits(copy, v->data().to(DType::BFloat16)));
    const Tensor view = v->data().narrow(1, 3, 7).transpose(0, 1);  // a view reads the copy's same elements
    EXPECT_TRUE(same_bf16_bits(bf16_copy_of(view), view.to(DType::BFloat16)));
  }
  // the products that read them: the same outputs and gradients as from a fresh conversion
  Tensor with_copy;
  {
    const AutocastGuard guard;
    with_copy = linear(y, fw, fb).data();
  }
  // written in place: the copy is stale and is not used; autocast converts the new values
  y.data().narrow(0, 0, 1).fill_(2);
  EXPECT_FALSE(bf16_copy_of(y.data()).defined());
  {
    const AutocastGuard guard;
    EXPECT_TRUE(same_bf16_bits(autocast(y.data()), y.data().to(DType::BFloat16)));
    EXPECT_NE(max(abs(linear(y, fw, fb).data() - with_copy)).item(), 0.0);
  }
  // outside autocast, and in float64, nothing is made
  EXPECT_FALSE(bf16_copy_of(layer_norm(x, {40}, w, b).data()).defined());
  {
    const AutocastGuard guard;
    EXPECT_FALSE(bf16_copy_of(layer_norm(Variable(randn({2, 5}, g, DType::Float64)), {5}).data()).defined());
  }
}

TEST(Autocast, AStepReadsTheCopiesAndGivesTheConvertedOperandsBits) {
  // A bfloat16 GPT step reads layer norm's and GELU's copies; the same step with those copies gone
  // (each output written in place with its own values: the versions move, the numbers stay) converts
  // afresh. Every gradient is the same to the bit.
  Generator g(9);
  nn::GPT model(20, 8, {.d_model = 16, .nhead = 2, .num_layers = 2}, g);
  const Tensor ids = randint(0, 20, {3, 8}, g), targets = randint(0, 20, {3 * 8}, g);
  auto step = [&](bool drop_copies) {
    model.zero_grad();
    std::vector<nn::HookHandle> hooks;
    if (drop_copies)  // a forward hook on every LayerNorm writes its output onto itself; one on each
      for (auto& [name, m] : model.named_modules())  // fc sends the MLP back to linear, then gelu
        if (m->type_name() == "LayerNorm" || name.ends_with(".fc"))
          hooks.push_back(
              m->register_forward_hook([](const nn::Module&, const std::vector<Variable>&, std::vector<Variable>& out) {
                out[0].data().copy_(out[0].data().clone());
              }));
    Variable loss;
    {
      const AutocastGuard guard;
      loss = cross_entropy(model(ids).reshape({3 * 8, 20}), targets);
    }
    loss.backward();
    for (nn::HookHandle& hk : hooks) hk.remove();
    std::vector<std::vector<float>> grads;
    for (const Variable& p : model.parameters()) grads.push_back(p.grad().to_vector<float>());
    return grads;
  };
  EXPECT_EQ(step(false), step(true));
}
