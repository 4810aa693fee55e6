// bfloat16 as a format: the conversion, exhaustively and on every rounding case; bfloat16 tensors in
// every layout, printed, drawn from the samplers and stored in safetensors files. What ops compute
// with it is in test_bfloat16_ops.cpp; the products that read it (autocast) in test_autocast.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "file_helpers.h"
#include "helpers.h"
#include "minigrad/minigrad.h"
#include "minigrad/tensor/blas.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::max_abs_diff;
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

// ---------------------------------------------------------------- drawing bfloat16 values

TEST(BFloat16, SamplersDrawInDoubleAndRoundOnce) {
  // the same draws as float64's, each rounded once (bernoulli's 0 and 1 exactly)
  Generator g1(9), g2(9), g3(9), g4(9);
  EXPECT_EQ(max_abs_diff(randn({50}, g1, DType::BFloat16), randn({50}, g2, DType::Float64).to(DType::BFloat16)), 0.0);
  const Tensor b16 = bernoulli({50}, 0.3, g3, DType::BFloat16), b64 = bernoulli({50}, 0.3, g4, DType::Float64);
  ASSERT_EQ(b16.dtype(), DType::BFloat16);
  EXPECT_EQ(max_abs_diff(b16, b64), 0.0);
}

TEST(BFloat16, UniformStaysInsideItsRangeAfterRounding) {
  // A draw in [1 - 2^-9, 1) rounds to 1.0 in bfloat16 (1 in 512 draws: about 128 of these 65536
  // did before the fix); bounds that bfloat16 cannot hold (+-0.1 round to +-0.10009765625) were
  // passed by rounding too. Each such sample is now the nearest bfloat16 inside [low, high). The other
  // samples are still float64's draws rounded once.
  Generator g1(5), g2(5);
  const Tensor u16 = uniform({65536}, 0.0, 1.0, g1, DType::BFloat16);
  const Tensor u64 = uniform({65536}, 0.0, 1.0, g2, DType::Float64);
  const std::vector<float> a = u16.to_vector<float>();
  const std::vector<double> b = u64.to_vector<double>();
  int stepped = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_LT(a[i], 1.0f) << i;
    ASSERT_GE(a[i], 0.0f) << i;
    if (static_cast<float>(bfloat16(b[i])) == 1.0f) {
      ++stepped;
      EXPECT_EQ(a[i], 1.0f - 1.0f / 256) << i;  // the largest bfloat16 below 1
    } else {
      EXPECT_EQ(a[i], static_cast<float>(bfloat16(b[i]))) << i;
    }
  }
  EXPECT_GT(stepped, 64);  // (the case is exercised)
  Generator g3(6);
  const std::vector<float> c = uniform({4096}, -0.1, 0.1, g3, DType::BFloat16).to_vector<float>();
  EXPECT_LT(static_cast<double>(*std::max_element(c.begin(), c.end())), 0.1);
  EXPECT_GE(static_cast<double>(*std::min_element(c.begin(), c.end())), -0.1);
  // zero-size: nothing drawn, the generator where it was
  Generator g5(8), g6(8);
  const Tensor none = uniform({3, 0}, 0.0, 1.0, g5, DType::BFloat16);
  EXPECT_EQ(none.dtype(), DType::BFloat16);
  EXPECT_EQ(none.shape(), (Shape{3, 0}));
  EXPECT_EQ(uniform({4}, 0.0, 1.0, g5, DType::BFloat16).to_vector<float>(),
            uniform({4}, 0.0, 1.0, g6, DType::BFloat16).to_vector<float>());
  // float32 too: in [-3e-45, 0) a draw within 2^-150 of 0 (a quarter of them) rounded to -0, which
  // is not below 0; it is now -2^-149, the float32 just below 0.
  Generator g4(7);
  for (const float v : uniform({64}, -3e-45, 0.0, g4, DType::Float32).to_vector<float>()) EXPECT_LT(v, 0.0f);
}

// ---------------------------------------------------------------- files

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
