// oneDNN behind blas::gemm (tensor/onednn.h): dnnl_sgemm, and a cache of bfloat16 matmul
// primitives, one per product shape and thread.
#include "minigrad/tensor/onednn.h"

#include <algorithm>
#include <bit>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "minigrad/tensor/blas.h"
#include "minigrad/tensor/error.h"

// libgomp's, the OpenMP runtime Debian's oneDNN is built on (declared here rather than through
// <omp.h>, which would be the compiler's own runtime under clang).
extern "C" void omp_set_num_threads(int);
extern "C" int omp_get_max_threads();

namespace mg::onednn {
namespace {
// Runs fn with oneDNN's OpenMP team sized to one thread, this one; the caller's setting is put back.
template <class F>
void on_this_thread(F&& fn) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  try {
    fn();
  } catch (...) {
    omp_set_num_threads(before);
    throw;
  }
  omp_set_num_threads(before);
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One oneDNN matmul primitive per product shape, made on first use and kept per thread (creating
// one costs a few microseconds; attention's per-head products take about as long to run).
struct Bf16Key {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  uint32_t alpha, beta;  // their bits
  bool operator==(const Bf16Key&) const = default;
};
struct Bf16KeyHash {
  size_t operator()(const Bf16Key& key) const {
    size_t h = key.ta * 2 + key.tb;
    for (int64_t v : {key.m, key.n, key.k, key.lda, key.ldb, key.ldc, int64_t{key.alpha}, int64_t{key.beta}})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};
struct Bf16Matmul {
  dnnl::matmul prim;
  dnnl::memory a, b, c;
};

// The primitive for `key`, or null where oneDNN has no kernel for it (remembered too, so such a
// shape goes straight to sgemm the next time). Made with oneDNN's OpenMP sized to one thread: its
// kernels fix their thread count when they are created, not when they run.
Bf16Matmul* bf16_primitive(const Bf16Key& key) {
  thread_local std::unordered_map<Bf16Key, std::unique_ptr<Bf16Matmul>, Bf16KeyHash> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();
  if (cache.size() >= 512) cache.clear();  // a bound for programs that see endless shapes
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // Row-major (rows, cols) with leading dimension ld; a transposed operand has its strides swapped.
  const dnnl::memory::desc ad(dims{key.m, key.k}, dt::bf16, key.ta ? dims{1, key.lda} : dims{key.lda, 1});
  const dnnl::memory::desc bd(dims{key.k, key.n}, dt::bf16, key.tb ? dims{1, key.ldb} : dims{key.ldb, 1});
  const dnnl::memory::desc cd(dims{key.m, key.n}, dt::f32, dims{key.ldc, 1});
  dnnl::primitive_attr attr;
  const float alpha = std::bit_cast<float>(key.alpha), beta = std::bit_cast<float>(key.beta);
  if (alpha != 1) attr.set_output_scales(0, {alpha});
  if (beta != 0) {
    dnnl::post_ops ops;
    ops.append_sum(beta);  // C = alpha A B + beta C
    attr.set_post_ops(ops);
  }
  std::unique_ptr<Bf16Matmul> entry;
  try {
    on_this_thread([&] {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, cpu_engine());
      entry = std::make_unique<Bf16Matmul>(Bf16Matmul{dnnl::matmul(pd), dnnl::memory(ad, cpu_engine(), nullptr),
                                                      dnnl::memory(bd, cpu_engine(), nullptr),
                                                      dnnl::memory(cd, cpu_engine(), nullptr)});
    });
  } catch (const dnnl::error&) {
    entry.reset();  // no kernel for this shape: sgemm from now on
  }
  return cache.emplace(key, std::move(entry)).first->second.get();
}

}  // namespace

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
           int64_t ldb, float beta, float* c, int64_t ldc) {
  // oneDNN sizes its OpenMP team from this thread's setting: one thread, this one, as for OpenBLAS;
  // the caller's own setting is put back afterwards (this may be a user's thread that uses OpenMP).
  dnnl_status_t st = dnnl_success;
  on_this_thread(
      [&] { st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
  MG_CHECK(
      st == dnnl_success, ValueError,
      "blas::gemm: dnnl_sgemm failed (status {}) on m={} n={} k={} lda={} ldb={} ldc={}; this is a bug in minigrad, "
      "please report it",
      static_cast<int>(st), m, n, k, lda, ldb, ldc);
}

// Whether bfloat16 products go to oneDNN, decided once, so every product of a run sums the same
// way. MG_BF16_GEMM ("onednn" or "sgemm") decides if set; a bad value throws at the first bfloat16
// product (and at the next: nothing was decided). Unset, oneDNN runs them only where its bfloat16
// kernel is the faster one, as measured (docs/06 section 7):
//   - AMX (Intel's tile unit): oneDNN's amx kernel, several times sgemm's rate;
//   - AVX512-BF16 on AMD (Zen 4 and later): the bfloat16 step ran faster than float32's there;
//   - AVX512-BF16 on an Intel core without AMX (Cooper Lake, or a Xeon whose AMX the hypervisor
//     hides): on such a Xeon one core ran 1.35 bfloat16 dot products (vdpbf16ps) per ns against
//     5.4 float32 FMAs, 43 multiply-adds per ns against 87, and oneDNN's kernel ran 1024^3 at 144
//     GFLOP/s on 2 threads against 221 for sgemm on widened operands: sgemm;
//   - no bfloat16 instructions: oneDNN could only emulate them (34 GFLOP/s against 140): sgemm.
// oneDNN's effective ISA is the one ONEDNN_MAX_CPU_ISA allows, so capping it moves the choice too.
bool runs_bf16() {
  static const bool use = [] {
    const std::string_view v = blas::detail::env_choice(
        "MG_BF16_GEMM", {"onednn", "sgemm"},
        "onednn (bfloat16 products on oneDNN) or sgemm (widened to float32; unset: oneDNN where the CPU has "
        "AMX, or AVX512-BF16 on AMD)");
    if (v == "sgemm") return false;
    if (v == "onednn") return true;
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    auto has = [isa](dnnl::cpu_isa level) {
      const auto bits = static_cast<unsigned>(level);
      return (isa & bits) == bits;
    };
    if (has(dnnl::cpu_isa::avx512_core_amx)) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();  // (safe to call first: this may run during static initialisation)
    return has(dnnl::cpu_isa::avx512_core_bf16) && __builtin_cpu_is("amd");
#else
    return false;
#endif
  }();
  return use;
}

bool bf16_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a, int64_t lda,
               const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  Bf16Matmul* found = bf16_primitive(
      {ta, tb, m, n, k, a_cols, b_cols, n, std::bit_cast<uint32_t>(alpha), std::bit_cast<uint32_t>(beta)});
  if (!found) return false;
  // oneDNN's fast kernels (brgemm, AMX) take only dense matrices; with a leading dimension wider than
  // the rows (a column block of a wider matrix: attention's heads, one thread's share of a product)
  // it falls back to a kernel measured 3-10x slower. Such operands are copied into dense per-thread
  // buffers first: O(mk + kn + mn) copying against O(mnk) arithmetic.
  thread_local std::vector<bfloat16> dense_a, dense_b;
  thread_local std::vector<float> dense_c;
  const bfloat16* da = blas::dense_rows(a, a_rows, a_cols, lda, dense_a);
  const bfloat16* db = blas::dense_rows(b, b_rows, b_cols, ldb, dense_b);
  float* dc = c;
  if (ldc != n && m > 1) {  // C as well, copied in when beta adds it, and back out after
    dense_c.resize(static_cast<size_t>(m * n));
    dc = dense_c.data();
    if (beta != 0)
      for (int64_t i = 0; i < m; ++i) std::copy(c + i * ldc, c + i * ldc + n, dc + i * n);
  }
  Bf16Matmul& mm = *found;
  mm.a.set_data_handle(const_cast<bfloat16*>(da));
  mm.b.set_data_handle(const_cast<bfloat16*>(db));
  mm.c.set_data_handle(dc);
  thread_local dnnl::stream stream(cpu_engine());
  on_this_thread([&] {
    mm.prim.execute(stream, {{DNNL_ARG_SRC, mm.a}, {DNNL_ARG_WEIGHTS, mm.b}, {DNNL_ARG_DST, mm.c}});
    stream.wait();
  });
  if (dc != c)
    for (int64_t i = 0; i < m; ++i) std::copy(dc + i * n, dc + (i + 1) * n, c + i * ldc);
  return true;
}

std::string bf16_kernel_name() {
  // The kernel a (256, 256) @ (256, 256) product gets: the same one the model's products get.
  const dnnl::memory::desc d({256, 256}, dnnl::memory::data_type::bf16, dnnl::memory::dims{256, 1});
  const dnnl::memory::desc c({256, 256}, dnnl::memory::data_type::f32, dnnl::memory::dims{256, 1});
  std::string name;
  on_this_thread([&] {
    try {
      name = dnnl::matmul::primitive_desc(dnnl::matmul::desc(d, d, c), cpu_engine()).impl_info_str();
    } catch (const dnnl::error&) {  // oneDNN 2.6 has bfloat16 kernels only from AVX-512 up
      name = "sgemm on widened operands (oneDNN has no bfloat16 kernel on this CPU)";
    }
  });
  return name;
}

}  // namespace mg::onednn
