// Differentiable matmul and linear.
#include <cblas.h>

#include "helpers.h"
#include "minigrad/tensor/blas.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

TEST(Matmul, HandComputedGradients) {
  // y = a @ b, loss = sum(y): da = 1 @ b^T (row sums of b), db = a^T @ 1 (column sums of a)
  Variable a(tensor({1, 2, 3, 4, 5, 6}, {2, 3}), true), b(tensor({1, 2, 3, 4, 5, 6}, {3, 2}), true);
  sum(matmul(a, b)).backward();
  expect_values(a.grad(), {2, 3}, {3, 7, 11, 3, 7, 11});
  expect_values(b.grad(), {3, 2}, {5, 5, 7, 7, 9, 9});
}

TEST(Matmul, Gradcheck) {
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({3, 4}, 1), rnd({4, 2}, 2)});
  // batched with broadcast batch dims: b's gradient is summed over a's batch
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({2, 1, 3, 4}, 3), rnd({5, 4, 2}, 4)});
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({2, 3, 4}, 5), rnd({4, 2}, 6)});
  // transposed (non-contiguous) operands
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); },
                   {rnd({4, 3}, 7).transpose(0, 1), rnd({2, 4}, 8).transpose(0, 1)});
  // vectors
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({4}, 9), rnd({4, 3}, 10)});
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({3, 4}, 11), rnd({4}, 12)});
  expect_gradcheck([](const V& v) { return linear(v[0], v[1], v[2]); },
                   {rnd({2, 3, 4}, 13), rnd({5, 4}, 14), rnd({5}, 15)});
}

TEST(Matmul, GoldenPyTorch) {
  expect_golden("matmul_2d", [](const V& v) { return matmul(v[0], v[1]); });
  expect_golden("matmul_batched_broadcast", [](const V& v) { return matmul(v[0], v[1]); });
  expect_golden("matmul_vec_mat", [](const V& v) { return matmul(v[0], v[1]); });
  expect_golden("matmul_mat_vec", [](const V& v) { return matmul(v[0], v[1]); });
  expect_golden("linear", [](const V& v) { return linear(v[0], v[1], v[2]); });
}

TEST(Matmul, ErrorsNameBothShapes) {
  Variable a(zeros({2, 3}), true), b(zeros({4, 5}), true);
  try {
    matmul(a, b);
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("matmul: shapes (2, 3) and (4, 5) cannot be multiplied"));
  }
  try {
    linear(Variable(zeros({2, 3})), Variable(zeros({4, 5})));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("linear: input of shape (2, 3) does not fit weight of shape (4, 5)"));
  }
}

TEST(Matmul, VectorsAndEmptySumsFollowTorch) {
  // A dot product of two vectors is a 0-dim tensor, and differentiable (it once was an IndexError).
  Variable a(tensor({1, 2, 3}, {3}), true), b(tensor({4, 5, 6}, {3}), true);
  Variable d = matmul(a, b);
  EXPECT_EQ(d.dim(), 0);
  EXPECT_EQ(d.item(), 32);
  d.backward();
  expect_values(a.grad(), {3}, {4, 5, 6});
  expect_values(b.grad(), {3}, {1, 2, 3});
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({4}, 20), rnd({4}, 21)});
  // with k = 0 the products are sums over nothing, and the vector dims still go
  EXPECT_EQ(matmul(zeros({0}), zeros({0})).shape(), (Shape{}));
  EXPECT_EQ(matmul(zeros({0}), zeros({0})).item(), 0);
  expect_values(matmul(zeros({2, 0}), zeros({0})), {2}, {0, 0});
  EXPECT_EQ(matmul(zeros({0, 3}), ones({3})).shape(), (Shape{0}));
  // linear with in_features = 0: the bias alone, as in PyTorch (once a reshape error)
  Variable w(zeros({2, 0}), true), bias(tensor({1, 2}, {2}), true), x(zeros({3, 0}), true);
  Variable y = linear(x, w, bias);
  expect_values(y.data(), {3, 2}, {1, 2, 1, 2, 1, 2});
  sum(y).backward();
  expect_values(bias.grad(), {2}, {3, 3});
  EXPECT_EQ(w.grad().shape(), (Shape{2, 0}));
}

TEST(Matmul, BatchMismatchNamesBothShapes) {
  try {
    matmul(zeros({2, 3, 4}), zeros({3, 4, 5}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(
        e.what(),
        HasSubstr("matmul: shapes (2, 3, 4) and (3, 4, 5) cannot be multiplied: their batch dims (2,) and (3,)"));
  }
}

TEST(Matmul, BlasRefusesIllegalArguments) {
  // cblas only prints a warning and skips the product on a bad leading dimension; blas::gemm
  // checks every call first (no caller of minigrad's should ever see this error).
  float a[4] = {1, 2, 3, 4}, c[4] = {0, 0, 0, 0};
  EXPECT_THROW(blas::gemm(false, false, 2, 2, 2, 1.f, a, 1, a, 2, 0.f, c, 2), ValueError);  // lda < k
  EXPECT_THROW(blas::gemm(false, true, 2, 2, 2, 1.f, a, 2, a, 0, 0.f, c, 2), ValueError);   // ldb 0
  EXPECT_NO_THROW(blas::gemm(false, false, 2, 2, 2, 1.f, a, 2, a, 2, 0.f, c, 2));
  EXPECT_EQ(c[0], 7);  // 1*1 + 2*3
  EXPECT_THROW(blas::gemm(false, false, 2, 2, 2, 1.f, a, 1, a, 2, 0.f, c, 2, blas::Engine::OneDNN), ValueError);
}

TEST(Matmul, BothBlasEnginesComputeTheSameProduct) {
  // C (2, 3) = alpha op(A) op(B) + beta C with leading dimensions wider than the rows, every
  // transpose combination, against the sums written out; OpenBLAS and oneDNN alike.
  const float A[2][4] = {{1, 2, 3, 9}, {4, 5, 6, 9}};                // (2, 3) in a row of 4
  const float At[3][3] = {{1, 4, 9}, {2, 5, 9}, {3, 6, 9}};          // its transpose (3, 2) in rows of 3
  const float B[3][4] = {{1, 0, 2, 9}, {0, 1, 3, 9}, {1, 1, 1, 9}};  // (3, 3) in rows of 4
  const float Bt[3][3] = {{1, 0, 1}, {0, 1, 1}, {2, 3, 1}};          // its transpose
  float expected[2][3];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float s = 0;
      for (int k = 0; k < 3; ++k) s += A[i][k] * B[k][j];
      expected[i][j] = 2 * s + 0.5f * 10;  // alpha 2, beta 0.5 on C = 10
    }
  for (blas::Engine e : {blas::Engine::OpenBLAS, blas::Engine::OneDNN})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(fmt::format("engine {}, trans_a {}, trans_b {}", e == blas::Engine::OneDNN ? "oneDNN" : "OpenBLAS",
                                 ta, tb));
        float C[2][5];
        for (auto& row : C)
          for (float& v : row) v = 10;
        blas::gemm(ta, tb, 2, 3, 3, 2.f, ta ? &At[0][0] : &A[0][0], ta ? 3 : 4, tb ? &Bt[0][0] : &B[0][0], tb ? 3 : 4,
                   0.5f, &C[0][0], 5, e);
        for (int i = 0; i < 2; ++i) {
          for (int j = 0; j < 3; ++j) EXPECT_EQ(C[i][j], expected[i][j]) << i << "," << j;
          EXPECT_EQ(C[i][3], 10);  // outside the product: untouched
        }
      }
}

// ---- the portable kernel (tensor/portable_gemm.h): the same bits on every CPU ----

namespace {

// Restores the GEMM and the CPU level a test changed.
struct PortableGuard {
  bool was = blas::portable();
  CpuLevel level = cpu_level();
  ~PortableGuard() {
    blas::set_portable(was);
    set_cpu_level(level);
  }
};

// C = alpha op(A) op(B) + beta C as the portable kernel promises to compute it, written as a plain
// loop: for each element, 0 + a_i0 b_0j + a_i1 b_1j + ... in order, each product and each sum
// rounded to T (the volatile keeps the compiler from fusing them into one rounding).
template <class T>
void ordered_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const std::vector<T>& a, int64_t lda,
                  const std::vector<T>& b, int64_t ldb, T beta, std::vector<T>& c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T s = 0;
      for (int64_t p = 0; p < k; ++p) {
        volatile T prod = (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
        s = s + prod;
      }
      const T v = alpha * s;
      c[i * ldc + j] = beta == T(0) ? v : v + beta * c[i * ldc + j];
    }
}

template <class T>
std::vector<T> random_values(int64_t n, uint64_t seed) {
  Generator g(seed);
  return randn({n}, g).to(dtype_of<T>()).template to_vector<T>();
}

// Whether two float32 tensors hold the same bits.
bool same_bits(const Tensor& x, const Tensor& y) {
  const std::vector<float> a = x.to_vector<float>(), b = y.to_vector<float>();
  return x.shape() == y.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every element of the portable product equals the ordered sum bit for bit: sizes that leave
// partial tiles at both edges, k past one k-block (256) and past two, leading dimensions wider than
// the rows, every transpose, alpha and beta; at each CPU level this machine runs.
template <class T>
void expect_portable_is_ordered_sum() {
  PortableGuard guard;
  blas::set_portable(true);
  struct Case {
    int64_t m, n, k;
  };
  for (CpuLevel level : {CpuLevel::baseline, CpuLevel::avx2, CpuLevel::avx512}) {
    if (!cpu_supports(level)) continue;
    set_cpu_level(level);
    for (Case s : {Case{1, 1, 1}, Case{3, 5, 2}, Case{9, 37, 7}, Case{17, 33, 300}, Case{130, 19, 513}, Case{2, 70, 1}})
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (auto [alpha, beta] : {std::pair<T, T>{1, 0}, {T(0.5), 1}, {-2, T(-0.25)}}) {
            SCOPED_TRACE(fmt::format("{} level {}: m {} n {} k {} trans_a {} trans_b {} alpha {} beta {}",
                                     sizeof(T) == 4 ? "float32" : "float64", cpu_level_name(level), s.m, s.n, s.k, ta,
                                     tb, alpha, beta));
            const int64_t lda = (ta ? s.m : s.k) + 3, ldb = (tb ? s.k : s.n) + 1, ldc = s.n + 2;
            const std::vector<T> a = random_values<T>((ta ? s.k : s.m) * lda, 1),
                                 b = random_values<T>((tb ? s.n : s.k) * ldb, 2), c0 = random_values<T>(s.m * ldc, 3);
            std::vector<T> want = c0, got = c0;
            ordered_gemm<T>(ta, tb, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, want, ldc);
            blas::gemm(ta, tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, got.data(), ldc);
            int64_t differ = 0;
            for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], sizeof(T)) != 0;
            EXPECT_EQ(differ, 0) << "elements differing from the ordered sum (the padding of C included)";
          }
  }
}

}  // namespace

TEST(PortableGemm, EveryElementIsTheSumInItsFixedOrder) {
  expect_portable_is_ordered_sum<float>();
  expect_portable_is_ordered_sum<double>();
}

TEST(PortableGemm, FollowsBlasOnZerosNaNAndEmptySums) {
  PortableGuard guard;
  blas::set_portable(true);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1};
  // beta = 0: C is written, never read (the NaN it held is gone)
  float c[4] = {nan, nan, nan, nan};
  blas::gemm(false, false, 2, 2, 2, 1.f, a, 2, b, 2, 0.f, c, 2);
  EXPECT_THAT(std::vector<float>(c, c + 4), testing::ElementsAre(1, 2, 3, 4));
  // alpha = 0: C = beta C, and A and B are not read (an inf there gives no NaN)
  const float ai[4] = {inf, 1, 1, 1};
  float c2[4] = {1, 2, 3, 4};
  blas::gemm(false, false, 2, 2, 2, 0.f, ai, 2, b, 2, 2.f, c2, 2);
  EXPECT_THAT(std::vector<float>(c2, c2 + 4), testing::ElementsAre(2, 4, 6, 8));
  // k = 0: the empty sum, 0 (beta 0) or beta C
  float c3[4] = {nan, nan, 1, 1};
  blas::gemm(false, false, 2, 2, 0, 1.f, a, 1, b, 2, 0.f, c3, 2);
  EXPECT_THAT(std::vector<float>(c3, c3 + 4), testing::ElementsAre(0, 0, 0, 0));
  // a NaN or inf in A reaches exactly its row of C (B without zeros: inf * 0 would be NaN)
  const float an[4] = {nan, 1, 1, inf}, b2[4] = {1, 2, 3, 4};
  float c4[4];
  blas::gemm(false, false, 2, 2, 2, 1.f, an, 2, b2, 2, 0.f, c4, 2);
  EXPECT_TRUE(std::isnan(c4[0]) && std::isnan(c4[1]));
  EXPECT_EQ(c4[2], inf);
  EXPECT_EQ(c4[3], inf);
}

TEST(PortableGemm, MatmulGivesTheSameBitsForEveryThreadCountAndLevel) {
  // Through the op: a product big enough to be split into blocks of rows over the threads, a
  // batched one shared out by batch entry, and a linear layer's backward (transposed operands).
  PortableGuard guard;
  blas::set_portable(true);
  const int threads = get_num_threads();
  Generator g(11);
  const Tensor a = randn({300, 70}, g), b = randn({70, 45}, g), x = randn({6, 40, 33}, g), w = randn({33, 21}, g);
  auto run = [&] {
    Variable xv(x, true), wv(w, true);
    Variable y = matmul(xv, wv);
    sum(y * y).backward();
    return std::vector<Tensor>{matmul(a, b), y.data(), xv.grad(), wv.grad()};
  };
  const std::vector<Tensor> first = run();
  std::vector<std::pair<int, CpuLevel>> settings;
  for (int t : {1, 2, 3})
    for (CpuLevel level : {CpuLevel::baseline, CpuLevel::avx2, CpuLevel::avx512})
      if (cpu_supports(level)) settings.push_back({t, level});
  for (auto [t, level] : settings) {
    SCOPED_TRACE(fmt::format("{} threads, level {}", t, cpu_level_name(level)));
    set_num_threads(t);
    set_cpu_level(level);
    const std::vector<Tensor> again = run();
    for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(same_bits(first[i], again[i])) << "result " << i;
  }
  set_num_threads(threads);
  // and it is the product: within float32 rounding of OpenBLAS's
  blas::set_portable(false);
  mgtest::expect_close(first[0], matmul(a, b), 1e-4, 1e-5);
}

TEST(PortableGemm, SwitchesAndNamesTheKernel) {
  PortableGuard guard;
  blas::set_portable(true);
  EXPECT_TRUE(blas::portable());
  EXPECT_EQ(blas::gemm_kernel(), "portable");
  EXPECT_EQ(blas::bf16_kernel(), "portable on widened operands");
  blas::set_portable(false);
  EXPECT_FALSE(blas::portable());
  EXPECT_THAT(blas::gemm_kernel(),
              HasSubstr(blas::float32_engine() == blas::Engine::OneDNN ? "oneDNN sgemm" : "OpenBLAS "));
}

TEST(GemmEnv, ABadMgGemmIsATypedErrorAtTheFirstProduct) {
  if (std::getenv("MG_EXPECT_GEMM_ERROR") == nullptr)
    GTEST_SKIP() << "run by ctest with MG_GEMM set to something wrong";
  try {
    (void)matmul(ones({2, 2}), ones({2, 2}));
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("MG_GEMM=fastest: expected portable"));
  }
  blas::set_portable(true);  // the program can still choose, and then runs
  EXPECT_EQ(sum(matmul(ones({2, 2}), ones({2, 2}))).item(), 8.0);
}

TEST(Gemm, Float32ProductsGoToOneDnnExactlyWhereOpenBlasFellBack) {
  // OpenBLAS picks its kernel from the CPU's model number and falls back to an SSE one for a model
  // newer than its table (Debian's 0.3.21 on an Emerald Rapids Xeon: Prescott, 6x slower than
  // oneDNN's sgemm there). Then, and only then, float32 products run on oneDNN, unless MG_SGEMM says.
  const std::string dyn = "DYNAMIC_ARCH Haswell MAX_THREADS=64";
  EXPECT_TRUE(blas::detail::openblas_fell_back(dyn, "Prescott"));
  EXPECT_TRUE(blas::detail::openblas_fell_back(dyn, "Sandybridge"));  // AVX without AVX2
  EXPECT_TRUE(blas::detail::openblas_fell_back(dyn, "Nehalem"));
  EXPECT_FALSE(blas::detail::openblas_fell_back(dyn, "Haswell"));
  EXPECT_FALSE(blas::detail::openblas_fell_back(dyn, "SkylakeX"));
  EXPECT_FALSE(blas::detail::openblas_fell_back(dyn, "ZEN"));  // any case
  EXPECT_FALSE(blas::detail::openblas_fell_back(dyn, "Cooperlake"));
  EXPECT_FALSE(blas::detail::openblas_fell_back("OpenBLAS 0.3.21 NO_AFFINITY SANDYBRIDGE MAX_THREADS=8", "Sandybridge"))
      << "a build for one target chose nothing at run time";
  // this process: what the rule says for this CPU and this OpenBLAS, unless MG_SGEMM chose
  const char* env = std::getenv("MG_SGEMM");
  const bool expect_onednn = env != nullptr
                                 ? std::string(env) == "onednn"
                                 : std::getenv("OPENBLAS_CORETYPE") == nullptr && cpu_supports(CpuLevel::avx2) &&
                                       blas::detail::openblas_fell_back(openblas_get_config(), blas::core_name());
  EXPECT_EQ(blas::float32_engine() == blas::Engine::OneDNN, expect_onednn) << "OpenBLAS's core: " << blas::core_name();
  PortableGuard guard;
  blas::set_portable(false);
  EXPECT_THAT(blas::gemm_kernel(),
              HasSubstr(expect_onednn ? "oneDNN sgemm" : std::string("OpenBLAS ") + blas::core_name()));
  // whichever runs them, the products are right: a transposed, offset operand against float64
  Generator g(9);
  const Tensor a = randn({33, 40}, g), b = randn({75, 40}, g).narrow(0, 3, 70).transpose(0, 1);
  mgtest::expect_close(matmul(a, b), matmul(a.to(DType::Float64), b.to(DType::Float64)).to(DType::Float32), 1e-4, 1e-5);
}

TEST(GemmEnv, ABadMgBf16GemmIsATypedErrorAtTheFirstBfloat16Product) {
  if (std::getenv("MG_EXPECT_BF16_GEMM_ERROR") == nullptr)
    GTEST_SKIP() << "run by ctest with MG_BF16_GEMM set to something wrong";
  // float32 products do not read it
  EXPECT_EQ(sum(matmul(ones({2, 2}), ones({2, 2}))).item(), 8.0);
  // a bfloat16 one does, and the misspelt choice is an error there, not silently the default (it was)
  const Tensor b = ones({2, 2}).to(DType::BFloat16);
  for (int attempt = 0; attempt < 2; ++attempt) {  // and again at the next: nothing was decided
    try {
      (void)matmul(b, b);
      FAIL() << "no error";
    } catch (const ValueError& e) {
      EXPECT_THAT(e.what(), HasSubstr("MG_BF16_GEMM=amx: expected onednn (bfloat16 products on oneDNN) or sgemm"));
    }
  }
}

TEST(GemmEnv, ABadMgSgemmIsATypedErrorAtTheFirstProduct) {
  if (std::getenv("MG_EXPECT_SGEMM_ERROR") == nullptr)
    GTEST_SKIP() << "run by ctest with MG_SGEMM set to something wrong";
  try {
    (void)matmul(ones({2, 2}), ones({2, 2}));
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("MG_SGEMM=mkl: expected openblas or onednn"));
  }
}
