#pragma once
// oneDNN, the second library behind tensor/blas.h (all of minigrad's oneDNN code is in
// tensor/onednn.cpp): its dnnl_sgemm for the float32 products blas::gemm is asked to send it, and
// its matmul primitive for bfloat16 products where the CPU's bfloat16 instructions beat sgemm. Private to
// tensor/: everything else multiplies through blas::gemm. Each call runs oneDNN's OpenMP team on
// one thread, the calling one, so that it never competes with minigrad's oneTBB pool.
#include <cstdint>
#include <string>

#include "minigrad/tensor/bfloat16.h"

namespace mg::onednn {

/// float32 C = alpha op(A) op(B) + beta C by oneDNN's sgemm, row-major (blas::gemm checked the
/// arguments). A ValueError if oneDNN reports a failure.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
/// Whether bfloat16 products run on oneDNN: where its bfloat16 kernel beats sgemm (a CPU with AMX,
/// or AVX512-BF16 on AMD), unless the environment variable MG_BF16_GEMM says "sgemm" or "onednn".
/// Decided once per run.
bool runs_bf16();
/// The bfloat16 product C = alpha op(A) op(B) + beta C (float32 C, row-major, m, n, k >= 1) on
/// oneDNN's matmul primitive: false, with C untouched, where oneDNN has no kernel for this shape.
bool bf16_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a, int64_t lda,
               const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc);
/// The name of oneDNN's bfloat16 kernel for a (256, 256) @ (256, 256) product.
std::string bf16_kernel_name();

}  // namespace mg::onednn
