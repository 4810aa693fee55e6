// The float32 fast functions (tensor/fastmath.h) against libm, over the whole float range: every
// 97th bit pattern (44 million floats, all exponents and sign, subnormals included) plus the
// special values and each function's branch points. exp, log, log1p, expm1 and tanh are checked as
// the library's kernels compute them (the ops on float32 tensors, compiled with the library's
// flags), erf directly.
#include <bit>
#include <cmath>
#include <limits>

#include "helpers.h"
#include "minigrad/tensor/fastmath.h"

using namespace mg;

namespace {
constexpr float kMinNormal = std::numeric_limits<float>::min();  // 1.2e-38: below it, subnormals
constexpr uint64_t kStride = 97;

// The floats of the sweep, in chunks of n, with the special values in the first chunk.
template <class F>
void for_each_chunk(int64_t n, F f) {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           INFINITY,
                           -INFINITY,
                           NAN,
                           -NAN,
                           kMinNormal,
                           -kMinNormal,
                           std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::lowest(),
                           88.72283f,
                           88.72284f,
                           88.8f,
                           89.0f,
                           -87.3f,
                           -103.2f,
                           -103.97f,
                           -104.0f,
                           -104.1f,
                           -1000.0f,
                           1.0f,   // log(1) = +0
                           -1.0f,  // log1p(-1) = -inf
                           -0.99999994f,
                           -1.0000001f,
                           -18.0f,  // expm1's floor
                           -17.9f,
                           -18.1f,
                           0.625f,  // tanh's two forms meet
                           -0.625f,
                           0.62499994f,
                           9.5f,  // tanh's clamp
                           -9.5f,
                           -0.29289322f,  // log1p's reduced range
                           -0.29289325f,
                           0.41421356f,
                           0.4142136f,
                           0.34657359f,  // ln2 / 2: expm1's reduction changes n
                           -0.34657359f,
                           16777216.0f,  // 2^24: 1 + x stops being exact
                           16777218.0f};
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += kStride) {
    xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
    if (static_cast<int64_t>(xs.size()) == n) f(xs), xs.clear();
  }
  if (!xs.empty()) f(xs);
}
}  // namespace

TEST(FastMath, ExpMatchesLibmOverEveryExponent) {
  // Relative error <= 2 ulp for normal results; subnormal results within 2^-148 (they have fewer
  // bits); inf above ln(FLT_MAX), 0 far below, NaN for NaN: what libm gives.
  int64_t checked = 0, wrong = 0;
  double worst = 0;
  for_each_chunk(1 << 20, [&](const std::vector<float>& xs) {
    const std::vector<float> got = exp(from_vector(xs, {static_cast<int64_t>(xs.size())})).to_vector<float>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const float want = static_cast<float>(std::exp(static_cast<double>(xs[i]))), f = got[i];
      bool ok;
      if (std::isnan(want))
        ok = std::isnan(f);
      else if (std::isinf(want))
        ok = f == want;
      else if (want < kMinNormal)
        ok = std::abs(static_cast<double>(f) - want) <= 0x1p-148;
      else {
        const double rel = std::abs(static_cast<double>(f) - want) / want;
        worst = std::max(worst, rel);
        ok = rel <= 2.5e-7;
      }
      if (!ok && ++wrong <= 5) ADD_FAILURE() << "exp(" << xs[i] << ") = " << f << ", libm " << want;
      ++checked;
    }
  });
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(checked, 44'000'000);
  EXPECT_LT(worst, 2.5e-7);
  // the cases that once went wrong: exp clamped its input at 88.3 and returned a finite number
  EXPECT_TRUE(std::isinf(exp(tensor({89.0f, INFINITY}, {2})).to_vector<float>()[0]));
  EXPECT_TRUE(std::isinf(exp(tensor({89.0f, INFINITY}, {2})).to_vector<float>()[1]));
  EXPECT_EQ(exp(tensor({-INFINITY}, {1})).item(), 0.0);  // a masked score gives weight 0 exactly
}

TEST(FastMath, ErfMatchesLibmOverEveryExponent) {
  // Abramowitz & Stegun 7.1.26: 1.5e-7 in exact arithmetic; evaluated in float (with or without
  // fused multiply-adds) below 7e-7 everywhere (6.6e-7 measured); +-1 at +-inf; NaN for NaN.
  int64_t wrong = 0;
  for_each_chunk(1 << 20, [&](const std::vector<float>& xs) {
    for (float x : xs) {
      const float f = fast::erf(x);
      const double want = std::erf(static_cast<double>(x));
      const bool ok = std::isnan(want) ? std::isnan(f) : std::abs(f - want) <= 7e-7;
      if (!ok && ++wrong <= 5) ADD_FAILURE() << "erf(" << x << ") = " << f << ", libm " << want;
    }
  });
  EXPECT_EQ(wrong, 0);
}

namespace {
// The error of float32 results against libm's double function, in units of the last place of the
// exact result (rounded to float): for a result below the smallest normal float, the subnormal
// spacing 2^-149. Special values must agree: NaN for NaN, the same infinity, the same signed zero.
struct UlpReport {
  int64_t checked = 0, wrong = 0;
  double worst = 0;
  float worst_at = 0;
};
template <class Op, class Ref>
UlpReport ulp_sweep(const char* name, Op op, Ref ref, double limit) {
  UlpReport rep;
  for_each_chunk(1 << 20, [&](const std::vector<float>& xs) {
    const std::vector<float> got = op(from_vector(xs, {static_cast<int64_t>(xs.size())})).template to_vector<float>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = ref(static_cast<double>(xs[i]));
      const float f = got[i];
      bool ok;
      if (std::isnan(want))
        ok = std::isnan(f);
      else if (std::isinf(want) || static_cast<float>(want) == 0 || std::isinf(static_cast<float>(want)))
        ok = f == static_cast<float>(want) && std::signbit(f) == std::signbit(want);
      else {
        const double a = std::abs(want);
        const double ulp = a < kMinNormal ? 0x1p-149 : std::ldexp(1.0, std::ilogb(a) - 23);
        const double err = std::abs(static_cast<double>(f) - want) / ulp;
        if (err > rep.worst) rep.worst = err, rep.worst_at = xs[i];
        ok = err <= limit;
      }
      if (!ok && ++rep.wrong <= 5) ADD_FAILURE() << name << "(" << xs[i] << ") = " << f << ", libm " << want;
      ++rep.checked;
    }
  });
  return rep;
}
}  // namespace

TEST(FastMath, LogLog1pExpm1TanhWithinTheirStatedUlp) {
  // tensor/fastmath.h states each bound; here it is checked over every 97th float (all exponents,
  // both signs, subnormals) and the special values, through the library's float32 kernels.
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&);
    double (*ref)(double);
    double limit;
  };
  const Case cases[] = {
      {"log", [](const Tensor& t) { return mg::log(t); }, [](double v) { return std::log(v); }, 1.0},
      {"log1p", [](const Tensor& t) { return mg::log1p(t); }, [](double v) { return std::log1p(v); }, 2.0},
      {"expm1", [](const Tensor& t) { return mg::expm1(t); }, [](double v) { return std::expm1(v); }, 2.0},
      {"tanh", [](const Tensor& t) { return mg::tanh(t); }, [](double v) { return std::tanh(v); }, 2.0},
  };
  for (const Case& c : cases) {
    const UlpReport r = ulp_sweep(c.name, c.op, c.ref, c.limit);
    RecordProperty(std::string(c.name) + "_worst_ulp", std::to_string(r.worst));
    std::printf("%s: worst %.3f ulp at %a over %lld floats\n", c.name, r.worst, r.worst_at,
                static_cast<long long>(r.checked));
    EXPECT_EQ(r.wrong, 0) << c.name;
    EXPECT_GT(r.checked, 44'000'000) << c.name;
  }
}

TEST(FastMath, ANanComesOutAsTheNanThatWentIn) {
  // Each function returns its NaN argument itself, sign and payload kept. A NaN made by the
  // arithmetic inside would have its sign flipped or replaced, and a kernel that combines it with
  // x (GELU's x * (1 + erf x)) would get whichever NaN the compiler put first, which differed
  // between the baseline and AVX copies (tests/test_cpu.cpp:Cpu.EveryLevelComputesTheSameBits).
  for (const uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7FC12345u, 0xFFD00001u}) {
    const float x = std::bit_cast<float>(bits);
    for (const auto& [name, f] : std::initializer_list<std::pair<const char*, float (*)(float)>>{
             {"exp", [](float v) { return fast::exp(v); }},
             {"erf", [](float v) { return fast::erf(v); }},
             {"log", [](float v) { return fast::log(v); }},
             {"log1p", [](float v) { return fast::log1p(v); }},
             {"expm1", [](float v) { return fast::expm1(v); }},
             {"tanh", [](float v) { return fast::tanh(v); }}})
      EXPECT_EQ(std::bit_cast<uint32_t>(f(x)), bits) << name << std::hex << " of the NaN 0x" << bits;
  }
}
