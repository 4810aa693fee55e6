// blas::gemm (tensor/blas.h): the arguments checked, then OpenBLAS, oneDNN (tensor/onednn.cpp) or
// minigrad's fixed-order kernel (tensor/portable_gemm.cpp).
#include "minigrad/tensor/blas.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <cblas.h>

#include "minigrad/tensor/cpu.h"
#include "minigrad/tensor/error.h"
#include "minigrad/tensor/onednn.h"
#include "minigrad/tensor/portable_gemm.h"

namespace mg::blas {
namespace {
CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

// 1: every product on the portable kernel, 0: OpenBLAS / oneDNN, -1: not settled yet (the first
// product reads MG_GEMM; a bad value throws there, and again on the next product).
std::atomic<int> g_portable{-1};

bool portable_now() {
  const int state = g_portable.load(std::memory_order_relaxed);
  if (state >= 0) return state == 1;
  const std::string_view v = detail::env_choice(
      "MG_GEMM", {"portable", "blas"}, "portable (minigrad's fixed-order kernel) or blas (OpenBLAS and oneDNN)");
  int expected = -1;  // two threads may both get here: the first to store wins, as does set_portable
  g_portable.compare_exchange_strong(expected, v == "portable" ? 1 : 0);
  return g_portable.load(std::memory_order_relaxed) == 1;
}

// Where float32 products asked of OpenBLAS run (settled at the first one): OpenBLAS, unless it
// fell back. OpenBLAS chooses its kernel from the CPU's model number, and a model newer than its
// table gets an old generic one: Debian's 0.3.21 runs Prescott (SSE3, 2004) on an Emerald Rapids
// Xeon (family 6, model 207), 19 GFLOP/s on a 1024^3 sgemm where its SkylakeX kernel does 105-123
// and oneDNN's sgemm, which reads the CPU's features instead, 122 (docs/06, "When OpenBLAS does
// not know the CPU"). So when the CPU has AVX2 and OpenBLAS picked a core without it by itself
// (OPENBLAS_CORETYPE unset), oneDNN runs them. MG_SGEMM=openblas or =onednn decides instead.
std::atomic<int> g_sgemm_state{-1};  // 1: oneDNN, 0: OpenBLAS, -1: not settled

bool sgemm_on_onednn() {
  const int state = g_sgemm_state.load(std::memory_order_relaxed);
  if (state >= 0) return state == 1;
  const std::string_view v = detail::env_choice(
      "MG_SGEMM", {"openblas", "onednn"},
      "openblas or onednn (the library for float32 products; unset: OpenBLAS unless it fell back to a kernel "
      "without AVX2 on a CPU that has it)");
  const bool fell_back = std::getenv("OPENBLAS_CORETYPE") == nullptr && cpu_supports(CpuLevel::avx2) &&
                         detail::openblas_fell_back(openblas_get_config(), openblas_get_corename());
  const bool use = v == "onednn" || (v.empty() && fell_back);
  int expected = -1;
  g_sgemm_state.compare_exchange_strong(expected, use ? 1 : 0);
  return g_sgemm_state.load(std::memory_order_relaxed) == 1;
}

// The arguments cblas accepts for a row-major GEMM: it "prints an error and skips the product"
// on anything else, which would leave C unwritten, so every call is checked here first. A
// failure is a bug in minigrad's layout logic, never the user's input.
void check_arguments(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  const int64_t a_cols = ta ? m : k, b_cols = tb ? k : n;  // the stored matrices' row lengths
  MG_CHECK(
      m >= 0 && n >= 0 && k >= 0 && lda >= std::max<int64_t>(1, a_cols) && ldb >= std::max<int64_t>(1, b_cols) &&
          ldc >= std::max<int64_t>(1, n) && m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && lda <= INT32_MAX &&
          ldb <= INT32_MAX && ldc <= INT32_MAX,
      ValueError,
      "blas::gemm: illegal arguments m={} n={} k={} lda={} ldb={} ldc={} (trans_a {}, trans_b {}); this is a bug in "
      "minigrad, please report it",
      m, n, k, lda, ldb, ldc, ta, tb);
}

// The product on sgemm: both operands widened to float32 (exactly), stored as they were.
void gemm_bf16_widened(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a, int64_t lda,
                       const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  std::vector<float> fa(static_cast<size_t>(a_rows * a_cols)), fb(static_cast<size_t>(b_rows * b_cols));
  mg::detail::run_at_level(cpu_level(), [&] {  // (called from inside a parallel_for's chunk: no second split)
    for (int64_t i = 0; i < a_rows; ++i) to_float32(a + i * lda, fa.data() + i * a_cols, a_cols);
    for (int64_t i = 0; i < b_rows; ++i) to_float32(b + i * ldb, fb.data() + i * b_cols, b_cols);
  });
  if (portable_now())
    portable::gemm(ta, tb, m, n, k, alpha, fa.data(), std::max<int64_t>(1, a_cols), fb.data(),
                   std::max<int64_t>(1, b_cols), beta, c, ldc);
  else
    gemm(ta, tb, m, n, k, alpha, fa.data(), std::max<int64_t>(1, a_cols), fb.data(), std::max<int64_t>(1, b_cols), beta,
         c, ldc);
}

}  // namespace

namespace detail {
std::string_view env_choice(const char* name, std::initializer_list<std::string_view> allowed,
                            std::string_view expected) {
  const char* env = std::getenv(name);
  const std::string_view v = env ? env : "";
  MG_CHECK(v.empty() || std::find(allowed.begin(), allowed.end(), v) != allowed.end(), ValueError, "{}={}: expected {}",
           name, v, expected);
  return v;
}

bool openblas_fell_back(std::string_view config, std::string_view core) {
  // Only a DYNAMIC_ARCH build chooses at run time (a build for one target reports that target,
  // in capitals); its AVX2 and AVX-512 cores: Debian's 0.3.21's, and SapphireRapids of later ones.
  if (config.find("DYNAMIC_ARCH") == std::string_view::npos) return false;
  auto same = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  };
  for (std::string_view c : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"})
    if (same(core, c)) return false;
  return true;
}
}  // namespace detail

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc, Engine engine) {
  check_arguments(ta, tb, m, n, k, lda, ldb, ldc);
  if (portable_now()) return portable::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if ((engine == Engine::OneDNN || sgemm_on_onednn()) && m > 0 && n > 0 && k > 0)  // (k = 0: C = beta C, by cblas)
    return onednn::sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  cblas_sgemm(CblasRowMajor, op(ta), op(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc, Engine) {
  check_arguments(ta, tb, m, n, k, lda, ldb, ldc);
  if (portable_now()) return portable::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  cblas_dgemm(CblasRowMajor, op(ta), op(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a, int64_t lda,
          const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  check_arguments(ta, tb, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  if (k == 0 || portable_now() || !onednn::runs_bf16()) {  // (k = 0: C = beta C, which sgemm does; oneDNN wants k >= 1)
    gemm_bf16_widened(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (!onednn::bf16_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))  // a shape oneDNN has no kernel for
    gemm_bf16_widened(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::string bf16_kernel() {
  if (portable_now()) return "portable on widened operands";
  return onednn::runs_bf16() ? onednn::bf16_kernel_name() : "sgemm on widened operands";
}

void set_portable(bool on) { g_portable.store(on ? 1 : 0, std::memory_order_relaxed); }

bool portable() { return portable_now(); }

std::string gemm_kernel() {
  if (portable_now()) return "portable";
  if (sgemm_on_onednn())
    return std::string("oneDNN sgemm (OpenBLAS's own choice here: ") + openblas_get_corename() + ")";
  return std::string("OpenBLAS ") + openblas_get_corename();
}

Engine float32_engine() { return sgemm_on_onednn() ? Engine::OneDNN : Engine::OpenBLAS; }

void use_one_thread() { openblas_set_num_threads(1); }

const char* core_name() { return openblas_get_corename(); }

}  // namespace mg::blas
