// minigrad's fixed-order GEMM (tensor/portable_gemm.h): the same bits on every CPU.
//
// The layout is the textbook one (Goto's, as in OpenBLAS and BLIS, much simplified): C is cut into
// tiles of MR rows and NR columns; for each tile, MR x NR running sums live in vector registers
// while p walks down k, each step adding row p of a packed panel of op(B) times MR values of op(A).
//
//   op(A) (m, k)        panel of op(B): kc rows of NR      C tile (MR, NR)
//   a_i,p  (one value    b_p,j0 .. b_p,j0+NR-1              acc[r][j] += a_(i0+r),p * b_p,(j0+j)
//   per row, broadcast)  (contiguous, padded with 0)
//
// Every lane of every register holds one element of C and sees the same sequence of products and
// sums, so the widths (4 floats in SSE2, 8 in AVX2, 16 in AVX-512) and tile sizes differ between
// CPU levels while the bits do not. The running sums are GCC/clang vector types, not plain arrays:
// measured, GCC keeps a plain `float acc[8][32]` in memory and the kernel ran 12-30x slower.
// k is taken in blocks of kKc so that the panel stays in the L1/L2 cache; between blocks a
// tile's sums wait in `part` (exactly: a float stored and loaded is the same float).
#include "minigrad/tensor/portable_gemm.h"

#include <algorithm>
#include <cstring>

#include "minigrad/tensor/cpu.h"

namespace mg::portable {
namespace {

// Bytes bytes of T as one SIMD register: lanewise + and * are IEEE's, exactly what scalar code does.
template <class T, int Bytes>
struct Vec {
  typedef T type __attribute__((vector_size(Bytes)));
};

constexpr int64_t kKc = 256;    // rows of op(B) per packed panel
constexpr int kRowBlocks = 16;  // a block of rows is 16 tiles high: its partial sums stay in cache

// What a tile needs: where its rows of op(A) start (element (r, p) at a[r * ars + p * acs]), the
// panel, this k-block's length, where its partial sums wait, and where its C block is.
template <class T>
struct Tile {
  const T* a;
  int64_t ars, acs;
  const T* panel;
  int64_t kc;
  T* part;
  bool first, last;  // the first / last k-block
  T alpha, beta;
  T* c;
  int64_t ldc, cols;  // cols <= NR columns of C are real; the rest of the tile is padding
};

// ROWS rows (<= MR) of one tile: NV registers of Bytes per row.
template <class T, int Bytes, int NV, int ROWS>
inline void tile(const Tile<T>& t) {
  using V = typename Vec<T, Bytes>::type;
  constexpr int L = Bytes / static_cast<int>(sizeof(T)), NR = L * NV;
  V acc[ROWS][NV];
  for (int r = 0; r < ROWS; ++r)
    for (int v = 0; v < NV; ++v) {
      if (t.first) {
        acc[r][v] = V{};
      } else {
        std::memcpy(&acc[r][v], t.part + r * NR + v * L, sizeof(V));
      }
    }
  for (int64_t p = 0; p < t.kc; ++p) {
    V b[NV];
    for (int v = 0; v < NV; ++v) std::memcpy(&b[v], t.panel + p * NR + v * L, sizeof(V));
    for (int r = 0; r < ROWS; ++r) {
      const V av = t.a[r * t.ars + p * t.acs] - V{};                   // the value in every lane (x - 0 is x, -0 too)
      for (int v = 0; v < NV; ++v) acc[r][v] = acc[r][v] + av * b[v];  // product rounded, then the sum
    }
  }
  if (!t.last) {
    for (int r = 0; r < ROWS; ++r)
      for (int v = 0; v < NV; ++v) std::memcpy(t.part + r * NR + v * L, &acc[r][v], sizeof(V));
    return;
  }
  for (int r = 0; r < ROWS; ++r) {
    T sums[NR];
    std::memcpy(sums, acc[r], sizeof(sums));
    T* cr = t.c + r * t.ldc;
    for (int64_t j = 0; j < t.cols; ++j) {
      const T v = t.alpha * sums[j];
      cr[j] = t.beta == T(0) ? v : v + t.beta * cr[j];  // beta = 0: C is not read (it may hold NaN)
    }
  }
}

// A tile of `rows` rows, rows <= MR: the instance for exactly that many (a tile at the bottom edge).
template <class T, int Bytes, int NV, int MR>
inline void tile_rows(int64_t rows, const Tile<T>& t) {
  if constexpr (MR > 1) {
    if (rows < MR) return tile_rows<T, Bytes, NV, MR - 1>(rows, t);
  }
  tile<T, Bytes, NV, MR>(t);
}

// Rows p0 .. p0+kc-1, columns j0 .. j0+cols-1 of op(B) into panel (kc, NR), zeros past cols. A
// transposed B is read down its stored rows (each column of op(B) is contiguous there), not across
// them: a strided read per element took a tenth of the attention products' time.
template <class T, int NR>
void pack(T* panel, const T* b, bool tb, int64_t ldb, int64_t p0, int64_t kc, int64_t j0, int64_t cols) {
  if (!tb) {
    for (int64_t p = 0; p < kc; ++p) {
      const T* src = b + (p0 + p) * ldb + j0;
      T* dst = panel + p * NR;
      for (int64_t j = 0; j < cols; ++j) dst[j] = src[j];
      for (int64_t j = cols; j < NR; ++j) dst[j] = T(0);
    }
    return;
  }
  for (int64_t j = 0; j < cols; ++j) {
    const T* src = b + (j0 + j) * ldb + p0;
    for (int64_t p = 0; p < kc; ++p) panel[p * NR + j] = src[p];
  }
  for (int64_t p = 0; p < kc; ++p)
    for (int64_t j = cols; j < NR; ++j) panel[p * NR + j] = T(0);
}

// The whole product with tiles of MR rows and NV registers of Bytes.
template <class T, int Bytes, int MR, int NV>
void run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
         T beta, T* c, int64_t ldc) {
  constexpr int NR = Bytes / static_cast<int>(sizeof(T)) * NV;
  constexpr int64_t MC = kRowBlocks * MR;
  alignas(64) T panel[kKc * NR];
  alignas(64) T part[MC * NR];
  const int64_t ars = ta ? 1 : lda, acs = ta ? lda : 1;  // op(A)'s element (i, p) is a[i * ars + p * acs]
  // With k in one block no partial sums wait between blocks, so all the rows form one block and each
  // column panel is packed once; otherwise blocks of MC rows, whose partial sums stay in cache.
  const int64_t row_block = k <= kKc ? m : MC;
  for (int64_t i0 = 0; i0 < m; i0 += row_block) {
    const int64_t mc = std::min(row_block, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += NR) {
      const int64_t cols = std::min<int64_t>(NR, n - j0);
      for (int64_t p0 = 0; p0 < k; p0 += kKc) {
        const int64_t kc = std::min(kKc, k - p0);
        pack<T, NR>(panel, b, tb, ldb, p0, kc, j0, cols);
        for (int64_t r0 = 0; r0 < mc; r0 += MR) {
          // (with k in one block the tile never reads or writes partial sums, and a block of m rows
          // may be taller than `part`: no pointer into it is formed)
          T* tile_part = k <= kKc ? nullptr : part + r0 * NR;
          const Tile<T> t{
              a + (i0 + r0) * ars + p0 * acs, ars, acs, panel, kc, tile_part, p0 == 0, p0 + kc == k, alpha, beta,
              c + (i0 + r0) * ldc + j0,       ldc, cols};
          tile_rows<T, Bytes, NV, MR>(std::min<int64_t>(MR, mc - r0), t);
        }
      }
    }
  }
}

template <class T>
void gemm_any(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
              int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == T(0)) {  // no product: C = beta C (A and B not read, as in BLAS)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  // Tile sizes per level: as many running sums as the registers hold with room for the operands
  // (16 registers in SSE2 and AVX2, 32 in AVX-512), and one register per row instead of two when C
  // is narrow (attention's per-head products), so fewer lanes sum padding. They change the speed,
  // never the bits.
  const CpuLevel level = cpu_level();
  detail::run_at_level(level, [&] {
    // (the register width in bytes; rows of a tile two registers wide, and of one a register wide)
    auto at = [&]<int Bytes, int MR, int MRNarrow>() {
      if (n * static_cast<int64_t>(sizeof(T)) <= Bytes)
        run<T, Bytes, MRNarrow, 1>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      else
        run<T, Bytes, MR, 2>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    };
    switch (level) {
      case CpuLevel::avx512:
        return at.template operator()<64, 8, 12>();
      case CpuLevel::avx2:
        return at.template operator()<32, 6, 8>();
      default:
        return at.template operator()<16, 4, 6>();
    }
  });
}

}  // namespace

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_any(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm_any(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace mg::portable
