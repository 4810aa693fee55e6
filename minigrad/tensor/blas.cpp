#include "minigrad/tensor/blas.h"

#include <algorithm>
#include <climits>

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include "minigrad/tensor/error.h"

// libgomp's, the OpenMP runtime Debian's oneDNN is built on (declared here rather than through
// <omp.h>, which would be the compiler's own runtime under clang).
extern "C" void omp_set_num_threads(int);
extern "C" int omp_get_max_threads();

namespace mg::blas {
namespace {
CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

// The arguments cblas accepts for a row-major GEMM: it "prints an error and skips the product"
// on anything else, which would leave C unwritten, so every call is checked here first. A
// failure is a bug in minigrad's layout logic, never the user's input.
void check_arguments(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  const int64_t a_cols = ta ? m : k, b_cols = tb ? k : n;  // the stored matrices' row lengths
  MG_CHECK(m >= 0 && n >= 0 && k >= 0 && lda >= std::max<int64_t>(1, a_cols) && ldb >= std::max<int64_t>(1, b_cols) &&
               ldc >= std::max<int64_t>(1, n) && m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && lda <= INT32_MAX &&
               ldb <= INT32_MAX && ldc <= INT32_MAX,
           ValueError,
           "blas::gemm: illegal arguments m={} n={} k={} lda={} ldb={} ldc={} (trans_a {}, trans_b {}); this is a bug in "
           "minigrad, please report it",
           m, n, k, lda, ldb, ldc, ta, tb);
}
}  // namespace

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc, Engine engine) {
  check_arguments(ta, tb, m, n, k, lda, ldb, ldc);
  if (engine == Engine::OneDNN && m > 0 && n > 0) {
    // oneDNN sizes its OpenMP team from this thread's setting: one thread, this one, as for OpenBLAS;
    // the caller's own setting is put back afterwards (this may be a user's thread that uses OpenMP).
    const int before = omp_get_max_threads();
    omp_set_num_threads(1);
    const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    omp_set_num_threads(before);
    MG_CHECK(st == dnnl_success, ValueError,
             "blas::gemm: dnnl_sgemm failed (status {}) on m={} n={} k={} lda={} ldb={} ldc={}; this is a bug in minigrad, "
             "please report it",
             static_cast<int>(st), m, n, k, lda, ldb, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, op(ta), op(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda, const double* b,
          int64_t ldb, double beta, double* c, int64_t ldc, Engine) {
  check_arguments(ta, tb, m, n, k, lda, ldb, ldc);
  cblas_dgemm(CblasRowMajor, op(ta), op(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void use_one_thread() { openblas_set_num_threads(1); }

const char* core_name() { return openblas_get_corename(); }

}  // namespace mg::blas
