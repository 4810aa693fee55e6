#pragma once
// Row-major GEMM on raw pointers, for fused kernels that work on blocks of a tensor:
//   C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C,   op(X) = X or X^T (flag).
// Single-threaded: callers run it inside their own parallel_for (tensor/parallel.h).
#include <cstdint>

namespace mg::blas {

/// float32 GEMM (cblas_sgemm, row-major).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
/// float64 GEMM (cblas_dgemm, row-major).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

}  // namespace mg::blas
