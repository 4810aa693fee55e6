// Runtime CPU dispatch (tensor/cpu.h): which level runs, MG_CPU, and every level computing the same
// bits. ctest also runs the kernel test binaries once per level (tests/CMakeLists.txt, the
// "AtLevel" tests), so every kernel test passes at every level this CPU has.
#include <cstdlib>
#include <cstring>

#include "helpers.h"

using namespace mg;

namespace {

std::vector<CpuLevel> supported_levels() {
  std::vector<CpuLevel> out;
  for (CpuLevel l : {CpuLevel::baseline, CpuLevel::avx2, CpuLevel::avx512})
    if (cpu_supports(l)) out.push_back(l);
  return out;
}

// Puts back the level a test found.
struct LevelGuard {
  CpuLevel saved = cpu_level();
  ~LevelGuard() { set_cpu_level(saved); }
};

// Each tensor's bytes, to compare levels exactly (NaN payloads included).
std::vector<std::string> bytes_of(const std::vector<Tensor>& ts) {
  std::vector<std::string> out;
  for (const Tensor& t : ts) {
    const Tensor c = t.contiguous();
    if (c.numel() == 0) {  // (its storage may be null: no pointer is formed into it)
      out.emplace_back();
      continue;
    }
    const char* p = static_cast<const char*>(c.data_ptr());
    out.emplace_back(p, static_cast<size_t>(c.numel()) * itemsize(c.dtype()));
  }
  return out;
}

// fn() at every level this CPU supports, compared byte for byte with the baseline's result.
void expect_same_bits_at_every_level(const std::string& what, const std::function<std::vector<Tensor>()>& fn) {
  LevelGuard guard;
  set_cpu_level(CpuLevel::baseline);
  const std::vector<std::string> base = bytes_of(fn());
  for (CpuLevel level : supported_levels()) {
    set_cpu_level(level);
    const std::vector<std::string> got = bytes_of(fn());
    ASSERT_EQ(got.size(), base.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(got[i] == base[i]) << what << ", result " << i << ": " << cpu_level_name(level)
                                     << " differs from baseline";
  }
}

// Values that exercise every branch of the fast exp/erf: NaN, +-inf, huge, tiny, subnormal, the
// clamps at -104 and 88.8, and plain random numbers; 1031 of them, so vector loops have a tail.
Tensor awkward_values(DType dtype) {
  Generator g(5);
  Tensor x = randn({1031}, g) * 4.0;
  std::vector<double> v = x.to_vector<double>();
  const double special[] = {NAN,    INFINITY, -INFINITY, 1e30, -1e30, 1e-40, -1e-40, 0.0,  -0.0,
                            -103.9, -104.1,   88.7,      88.9, -87.3, 1e-8,  20.0,   -20.0};
  for (size_t i = 0; i < std::size(special); ++i) v[i * 37] = special[i];
  return from_vector(v, {1031}).to(dtype);
}

}  // namespace

TEST(Cpu, PicksTheBestLevelThisCpuSupportsUnlessMgCpuChose) {
  const char* env = std::getenv("MG_CPU");
  if (env != nullptr && *env != '\0') {
    EXPECT_EQ(cpu_capability(), std::string(env));
  } else {
    EXPECT_EQ(cpu_level(), best_cpu_level());
  }
  std::printf("kernels run at: %s (best on this CPU: %s)\n", std::string(cpu_capability()).c_str(),
              std::string(cpu_level_name(best_cpu_level())).c_str());
  EXPECT_TRUE(cpu_supports(cpu_level()));
  EXPECT_TRUE(cpu_supports(CpuLevel::baseline));
  if (cpu_supports(CpuLevel::avx512)) EXPECT_TRUE(cpu_supports(CpuLevel::avx2));  // the levels nest
}

#if defined(__x86_64__)
TEST(Cpu, AgreesWithTheFlagsInProcCpuinfo) {
  const mgtest::ProcCpuInfo cpu = mgtest::proc_cpu_info();
  if (!cpu.read()) GTEST_SKIP() << "no /proc/cpuinfo here";
  auto has = [&](const char* f) { return cpu.has(f); };
  EXPECT_EQ(cpu_supports(CpuLevel::avx2), has("avx2") && has("fma") && has("bmi1") && has("bmi2"));
  EXPECT_EQ(cpu_supports(CpuLevel::avx512), cpu_supports(CpuLevel::avx2) && has("avx512f") && has("avx512bw") &&
                                                has("avx512cd") && has("avx512dq") && has("avx512vl"));
}
#endif

TEST(Cpu, LevelNamesRoundTripAndBadNamesAreTypedErrors) {
  for (CpuLevel l : {CpuLevel::baseline, CpuLevel::avx2, CpuLevel::avx512})
    EXPECT_EQ(parse_cpu_level(cpu_level_name(l)), l);
  try {
    parse_cpu_level("AVX2", "MG_CPU");
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("MG_CPU: expected baseline, avx2 or avx512, got \"AVX2\""));
  }
}

TEST(Cpu, SetLevelRefusesALevelThisCpuCannotRun) {
  LevelGuard guard;
  for (CpuLevel level : supported_levels()) {
    set_cpu_level(level);
    EXPECT_EQ(cpu_level(), level);
  }
  if (cpu_supports(CpuLevel::avx512)) GTEST_SKIP() << "this CPU runs every level";
  const CpuLevel before = cpu_level();
  try {
    set_cpu_level(CpuLevel::avx512);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("set_cpu_level: this CPU cannot run avx512"));
  }
  EXPECT_EQ(cpu_level(), before);
}

// ctest runs this one with MG_CPU set to a bad name and to a level above this CPU's
// (tests/CMakeLists.txt): the first kernel call says what is wrong, instead of running or crashing.
TEST(CpuEnv, ABadMgCpuIsATypedErrorAtTheFirstKernel) {
  const char* expected = std::getenv("MG_EXPECT_CPU_ERROR");
  if (expected == nullptr) GTEST_SKIP() << "run by ctest with MG_CPU set to something wrong";
  if (std::string(expected) == "unsupported" && cpu_supports(CpuLevel::avx512))
    GTEST_SKIP() << "this CPU runs every level";
  try {
    (void)(ones({4}) + ones({4}));
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(std::string("MG_CPU") + (std::string(expected) == "unsupported"
                                                                            ? "=avx512: this CPU cannot run it"
                                                                            : ": expected baseline, avx2 or avx512")));
  }
  // the program can still choose a level itself, and then runs
  set_cpu_level(CpuLevel::baseline);
  EXPECT_EQ(cpu_level(), CpuLevel::baseline);
  EXPECT_EQ(sum(ones({4}) + ones({4})).item(), 8.0);
}

TEST(Cpu, EveryLevelComputesTheSameBits) {
  // The kernels whose loops are vectorised differently per level, on float32 and float64, with a
  // tail after the last full vector and a transposed (strided) operand.
  Generator g(7);
  for (DType dt : {DType::Float32, DType::Float64}) {
    const std::string name = dt == DType::Float32 ? "float32 " : "float64 ";
    const Tensor v = awkward_values(dt);
    const Tensor x = (randn({37, 53}, g) * 3.0).to(dt), w = randn({53}, g).to(dt), b = randn({53}, g).to(dt);
    const Tensor xt = (randn({53, 37}, g) * 3.0).to(dt).transpose(0, 1);  // a strided view
    expect_same_bits_at_every_level(name + "exp, tanh, sigmoid, gelu, silu", [&] {
      return std::vector<Tensor>{exp(v),  tanh(v), sigmoid(v), gelu(v), gelu(v, GeluApproximate::Tanh),
                                 silu(v), relu(v)};
    });
    expect_same_bits_at_every_level(name + "log, log1p, expm1, softplus, elu, logsumexp", [&] {
      return std::vector<Tensor>{log(v),
                                 log1p(v),
                                 expm1(v),
                                 softplus(v),
                                 elu(v),
                                 softplus_backward(v, v),
                                 elu_backward(v, v),
                                 logsumexp(x, {1}),
                                 logsumexp(xt, {0}),
                                 softmax(xt, 0)};
    });
    expect_same_bits_at_every_level(name + "binary cross-entropy and KL divergence", [&] {
      const Tensor p = sigmoid(x), t = sigmoid(xt);
      const auto [bx, bt] = binary_cross_entropy_backward(ones({}, dt), p, t, {.reduction = Reduction::Sum});
      const auto [lx, lt] = binary_cross_entropy_with_logits_backward(ones({}, dt), x, t, {.pos_weight = b});
      const auto [kx, kt] = kl_div_backward(ones({}, dt), x, t, {.reduction = Reduction::Sum});
      return std::vector<Tensor>{
          binary_cross_entropy(p, t, {.reduction = Reduction::None}),
          binary_cross_entropy_with_logits(x, t, {.pos_weight = b, .reduction = Reduction::None}),
          kl_div(x, t, {.reduction = Reduction::None}),
          kl_div(x, xt, {.reduction = Reduction::None, .log_target = true}),
          bx,
          bt,
          lx,
          lt,
          kx,
          kt};
    });
    expect_same_bits_at_every_level(name + "LSTM and GRU recurrences, forward and backward", [&] {
      std::vector<Tensor> out;
      for (RNNKind kind : {RNNKind::Tanh, RNNKind::GRU, RNNKind::LSTM}) {
        const int64_t G = rnn_gates(kind), H = 37, N = 3, L = 4;  // 37: a tail after the last full vector
        Generator gr(11);
        const Tensor xw = (randn({L, N, G * H}, gr) * 2.0).to(dt), h0 = randn({N, H}, gr).to(dt);
        const Tensor w = (randn({G * H, H}, gr) * 0.2).to(dt), bb = randn({G * H}, gr).to(dt);
        const Tensor c0 = kind == RNNKind::LSTM ? randn({N, H}, gr).to(dt) : Tensor(), dh = randn({L, N, H}, gr).to(dt);
        const RecurrenceForward f = recurrence_forward(kind, xw, h0, c0, w, bb, false);
        const RecurrenceGrads gg = recurrence_backward(kind, dh, Tensor(), xw, h0, c0, w, bb, f, false);
        for (const Tensor& t : {f.h, f.c, f.saved, gg.dxw, gg.dw_hh, gg.db_hh, gg.dh0, gg.dc0})
          if (t.defined()) out.push_back(t);
      }
      return out;
    });
    expect_same_bits_at_every_level(name + "activation gradients", [&] {
      return std::vector<Tensor>{gelu_backward(v, v, GeluApproximate::None), gelu_backward(v, v, GeluApproximate::Tanh),
                                 silu_backward(v, v)};
    });
    expect_same_bits_at_every_level(name + "elementwise with broadcasting and strides", [&] {
      return std::vector<Tensor>{x + w, x * xt, xt / (x * x + 1.0), x - b};
    });
    expect_same_bits_at_every_level(name + "reductions", [&] {
      return std::vector<Tensor>{sum(x), sum(x, {0}), sum(xt, {1}), mean(x, {0}), max(x, 1).first, var(xt, {0})};
    });
    expect_same_bits_at_every_level(name + "softmax and layer norm", [&] {
      const LayerNormForward f = layer_norm_forward(xt, {53}, w, b, 1e-5);
      const LayerNormGrads gr = layer_norm_backward(x, xt, w, f.mean, f.rstd, {53}, true, true);
      return std::vector<Tensor>{softmax(x, 1), log_softmax(xt, 0), f.y, gr.dx, gr.dweight, gr.dbias};
    });
  }
}

TEST(Cpu, TrainingAGptGivesTheSameBitsAtEveryLevel) {
  // Three AdamW steps of a small GPT, in float32 and under bfloat16 autocast: every parameter after
  // the steps, at every level, equal to the baseline's to the bit.
  for (bool bf16 : {false, true}) {
    expect_same_bits_at_every_level(bf16 ? "GPT steps under autocast" : "GPT steps in float32", [bf16] {
      Generator g(0);
      models::GPT m(16, 16, {.d_model = 32, .nhead = 2, .num_layers = 2}, g);
      optim::AdamW opt(m.parameters(), {.lr = 3e-3});
      const Tensor x = randint(0, 16, {8, 16}, g);
      for (int step = 0; step < 3; ++step) {
        Variable l;
        {
          AutocastGuard guard(bf16);
          l = cross_entropy(reshape(m(x), {-1, 16}), x.reshape({-1}));
        }
        opt.zero_grad();
        l.backward();
        opt.step();
      }
      std::vector<Tensor> out;
      for (const Variable& p : m.parameters()) out.push_back(p.data());
      return out;
    });
  }
}
