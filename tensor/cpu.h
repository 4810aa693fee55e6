#pragma once
// Which instruction set the kernels run with, chosen when the program runs, not when it was built.
//
// The library is compiled for the x86-64 baseline (SSE2), so one binary runs on any x86-64 CPU.
// Every kernel does its work through parallel_for (tensor/parallel.h), and parallel_for runs each
// chunk through run_at_level below: the chunk's code, inlined whole ([[gnu::flatten]]), is
// compiled once more for AVX2+FMA and once for AVX-512, and the level settled at the first kernel
// from the CPU's features (cpuid) decides which copy runs. The kernels themselves are written
// once, as plain loops; the compiler vectorises each copy for its level.
//
// The copies compute the same bits: the library is built with -ffp-contract=off, so no level
// fuses a*b+c into one rounding where another does not (the AVX2 level's FMA is then used only by
// an explicit std::fma), and no loop is reassociated. Only the lane width differs. (A program's
// own parallel_for bodies get copies too, compiled with the program's flags: GCC's default
// contracts, so for them the promise holds only with -ffp-contract=off.)
//
// MG_CPU=baseline|avx2|avx512 in the environment forces a level (for tests and comparisons); a
// level this CPU cannot run is a ValueError at the first kernel, not a crash. GCC inlines through
// every level of calls under flatten; clang 14 only the direct ones, so a library built with clang
// gets little from the copies (they are still correct).
#include <cstdint>
#include <string_view>

namespace mg {

/// The instruction-set levels kernels can run at, from lowest to highest.
enum class CpuLevel : int {
  baseline = 0,  ///< x86-64's SSE2: every x86-64 CPU (and any level on other architectures)
  avx2 = 1,      ///< AVX2 + FMA (x86-64-v3: Intel Haswell, 2013; AMD Zen, 2017; and later)
  avx512 = 2,    ///< AVX-512 F/BW/CD/DQ/VL (x86-64-v4: Intel Skylake-SP, 2017; AMD Zen 4, 2022)
};

/// The level the kernels run at now: the highest this CPU supports, unless MG_CPU or set_cpu_level chose.
CpuLevel cpu_level();
/// The name of cpu_level(): "baseline", "avx2" or "avx512" (PyTorch's torch.backends.cpu.get_cpu_capability()
/// says "DEFAULT", "AVX2", "AVX512").
std::string_view cpu_capability();
/// Whether this CPU and its operating system can run kernels at `level`.
bool cpu_supports(CpuLevel level);
/// The highest level this CPU supports.
CpuLevel best_cpu_level();
/// Run the kernels at `level` from now on (tests, comparisons); ValueError if this CPU cannot.
void set_cpu_level(CpuLevel level);
/// The level named `name` ("baseline", "avx2", "avx512"); ValueError naming `what` otherwise.
CpuLevel parse_cpu_level(std::string_view name, std::string_view what = "cpu level");
/// The name of `level`.
std::string_view cpu_level_name(CpuLevel level);

namespace detail {

#if defined(__x86_64__) && !defined(MG_ONE_KERNEL_COPY)
// One copy of f's code per level. [[gnu::flatten]] inlines every call in f (and in what it
// calls) into the copy, so the copy's loops are compiled for the copy's instruction set; a call
// that cannot be inlined (libm, BLAS, allocation) runs the baseline code, which is always legal.
// The feature lists are what cpu_supports checks (the vector parts of x86-64-v3 and -v4); no
// arch= or tune=, which would stop the inlining.
template <class F>
[[gnu::flatten, gnu::target("avx2,fma,bmi,bmi2")]] void run_avx2(F& f) {
  f();
}
template <class F>
[[gnu::flatten, gnu::target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx2,fma,bmi,bmi2")]] void run_avx512(F& f) {
  f();
}

/// f() at `level`'s copy.
template <class F>
void run_at_level(CpuLevel level, F&& f) {
  switch (level) {
    case CpuLevel::avx512:
      run_avx512(f);
      break;
    case CpuLevel::avx2:
      run_avx2(f);
      break;
    default:
      f();
  }
}
#else
// Not x86-64 (cpu_supports says baseline only), or the sanitizer and fuzz builds (MG_ONE_KERNEL_COPY,
// set by CMakeLists.txt): one copy, the build's own, whatever the level says.
template <class F>
void run_at_level(CpuLevel, F&& f) {
  f();
}
#endif

}  // namespace detail
}  // namespace mg
