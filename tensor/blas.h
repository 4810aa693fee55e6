#pragma once
// The one door to BLAS. Every matrix product in minigrad ends in blas::gemm on row-major matrices:
//
//   C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C,     op(X) = X, or X^T when flagged
//
// A is stored with leading dimension lda (the distance between its stored rows), likewise B and C.
// Which library runs it: OpenBLAS (cblas_sgemm, cblas_dgemm) by default and for every float64
// product; oneDNN for the float32 products asked of it and the bfloat16 ones (tensor/onednn.cpp,
// all of minigrad's oneDNN code). tensor/blas.cpp checks the arguments and picks.
// BLAS runs single-threaded: minigrad splits the work over its one oneTBB pool (tensor/parallel.h)
// and calls gemm on each piece, so two thread pools never compete for the cores.
//
// A float32 product may instead go to oneDNN's dnnl_sgemm, with Engine::OneDNN, for the shapes where it
// is measured faster: OpenBLAS stays the reference and the default. oneDNN brings its own OpenMP
// pool; each call runs it on one thread, the calling one, for the same reason. Every float32
// product goes to oneDNN where OpenBLAS did not recognise the CPU and fell back to an SSE kernel
// (float32_engine below; 6x slower on the CPU where it was found).
//
// Or every product, whatever the engine asked, on minigrad's own kernel (tensor/portable_gemm.h),
// with set_portable(true) or MG_GEMM=portable: the sums in a fixed order, so the same inputs give
// the same bits on every CPU and thread count; OpenBLAS's kernels for Haswell, SkylakeX or Zen each
// add in their own order. The tour's examples run this way (docs/06-performance.md, "The same
// numbers on every CPU").
//
// bfloat16 products (autocast's, autograd/autocast.h) read bfloat16 A and B and accumulate and write
// float32 C. They run on oneDNN's matmul primitive where its bfloat16 kernel beats sgemm (AMX, or
// AVX512-BF16 on AMD: onednn.cpp's runs_bf16 says why); elsewhere minigrad widens the operands
// (exactly) and calls sgemm instead: the same products, other summation order.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "minigrad/tensor/bfloat16.h"

namespace mg::blas {

/// The library that runs a float32 product. float64 always runs on OpenBLAS (oneDNN has no dgemm).
enum class Engine {
  OpenBLAS,  ///< cblas_sgemm: the default
  OneDNN,    ///< dnnl_sgemm: AVX-512 kernels whatever OpenBLAS picked; faster on conv2d's small products
};

/// float32 GEMM (cblas_sgemm, or dnnl_sgemm with Engine::OneDNN; row-major).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc, Engine engine = Engine::OpenBLAS);
/// float64 GEMM (cblas_dgemm, row-major; `engine` is ignored).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc, Engine engine = Engine::OpenBLAS);

/// bfloat16 GEMM, float32 accumulation and C: C = alpha op(A) op(B) + beta C (row-major), on one thread.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a, int64_t lda,
          const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc);
/// What runs bfloat16 products here: oneDNN's kernel name (e.g. "brg:avx512_core_amx_bf16"), or
/// "sgemm on widened operands" where that is faster (onednn.cpp: runs_bf16) or MG_BF16_GEMM=sgemm is set.
std::string bf16_kernel();

/// A (rows, cols) matrix stored with leading dimension ld, as a dense one (ld == cols): `x` itself
/// when it already is (or has at most one row), else a copy in `buf`. oneDNN's fast kernels take
/// only dense matrices; a column block of a wider one (attention's heads) is copied first.
template <class T>
const T* dense_rows(const T* x, int64_t rows, int64_t cols, int64_t ld, std::vector<T>& buf) {
  if (ld == cols || rows <= 1) return x;
  buf.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(buf.data() + i * cols, x + i * ld, static_cast<size_t>(cols) * sizeof(T));
  return buf.data();
}

/// Every product from now on (float32, float64, bfloat16; whichever engine a call asks for) on
/// minigrad's fixed-order kernel, the same bits on every CPU (on = true), or back on OpenBLAS and
/// oneDNN (false). The first product reads MG_GEMM (portable or blas) unless this was called first.
void set_portable(bool on);
/// Whether products run on the fixed-order kernel (set_portable, or MG_GEMM=portable).
bool portable();
/// What runs float32 products now: "portable", "OpenBLAS <core>" (the kernel OpenBLAS picked) or
/// "oneDNN sgemm (...)" where OpenBLAS fell back (float32_engine).
std::string gemm_kernel();
/// The library that runs the float32 products that do not ask for one (Engine::OpenBLAS, the
/// default): OpenBLAS, or oneDNN when OpenBLAS picked by itself a kernel without AVX2 on a CPU
/// that has it (a CPU model newer than its table); MG_SGEMM=openblas or =onednn decides instead.
/// Settled at the first product (a bad MG_SGEMM is a ValueError there).
Engine float32_engine();

namespace detail {
/// Whether OpenBLAS, configured as `config` (openblas_get_config()), fell back when it chose `core`
/// (openblas_get_corename()): a DYNAMIC_ARCH build that picked none of its AVX2 or AVX-512 cores.
bool openblas_fell_back(std::string_view config, std::string_view core);
/// The environment variable `name` that chooses a kernel (MG_GEMM, MG_SGEMM, MG_BF16_GEMM): "" when
/// unset or empty, else one of `allowed`. Any other value is a ValueError "NAME=value: expected
/// <expected>", so a misspelt choice is never silently ignored.
std::string_view env_choice(const char* name, std::initializer_list<std::string_view> allowed,
                            std::string_view expected);
}  // namespace detail

/// Switch BLAS's own threading off (minigrad hands it one block of work per thread).
void use_one_thread();
/// The CPU kernel OpenBLAS picked ("Haswell", "SkylakeX", ...), for benchmark reports.
const char* core_name();

}  // namespace mg::blas
