#pragma once
// minigrad's own GEMM, for when the same numbers on every computer matter more than speed
// (blas::set_portable, tensor/blas.h). Private to tensor/: everything multiplies through blas::gemm.
//
// Why it exists. OpenBLAS picks a kernel for the CPU it runs on (Haswell, SkylakeX, Cooperlake,
// Zen, ...), and each kernel adds the k terms of a dot product in its own order and with or
// without fused multiply-adds. The sums differ in their last bits, and a training run amplifies
// the difference: the same seed then ends at 0.925 on one machine and 0.929 on another. This kernel
// fixes the arithmetic instead, for every CPU and every thread count:
//
//   C[i][j] = alpha * s + beta * C[i][j],   s = (...((0 + a_i0 b_0j) + a_i1 b_1j) + ...) + a_i(k-1) b_(k-1)j
//
// every product rounded to T, then every sum, in the order p = 0, 1, ..., k-1; no fused
// multiply-add (the build's -ffp-contract=off). alpha * s is skipped when alpha is 1, beta * C
// when beta is 0 (C is then not read, as BLAS does not read it); alpha = 0 or k = 0 gives beta * C.
// Each element's sum is its own, so how the matrix is cut into tiles, or into blocks of rows for
// threads, and how wide the CPU's vectors are, cannot change a bit.
//
// Its cost, and what it does to the tour's examples: docs/06-performance.md, "The same numbers on
// every CPU". Without fused multiply-adds it cannot reach the CPU's peak.
#include <cstdint>

namespace mg::portable {

/// C (m, n) = alpha op(A) op(B) + beta C, row-major, in the fixed order above (tensor/blas.cpp
/// checked the arguments). Runs on the calling thread, at the CPU level's copy (tensor/cpu.h).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
/// The same for float64.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

}  // namespace mg::portable
