#include "minigrad/tensor/cpu.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "minigrad/tensor/error.h"

namespace mg {
namespace {

constexpr std::string_view kNames[] = {"baseline", "avx2", "avx512"};

/// The level from MG_CPU when it is set, else the best this CPU supports.
CpuLevel initial_level() {
  const char* env = std::getenv("MG_CPU");
  if (env == nullptr || *env == '\0') return best_cpu_level();
  const CpuLevel level = parse_cpu_level(env, "MG_CPU");
  MG_CHECK(cpu_supports(level), ValueError, "MG_CPU={}: this CPU cannot run it (the highest level it supports is {})",
           env, cpu_level_name(best_cpu_level()));
  return level;
}

// Read by every parallel_for. -1 until the first kernel (or cpu_level()) settles it from MG_CPU or
// the CPU; a bad MG_CPU throws there, and again on the next use, until set_cpu_level chooses.
std::atomic<int> g_level{-1};

}  // namespace

bool cpu_supports(CpuLevel level) {
  switch (level) {
    case CpuLevel::baseline:
      return true;
#if defined(__x86_64__)
    // the features run_avx2 and run_avx512 (cpu.h) are compiled for; libgcc's check includes the
    // operating system's support (XCR0) for the wider registers
    case CpuLevel::avx2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
             __builtin_cpu_supports("bmi2");
    case CpuLevel::avx512:
      return cpu_supports(CpuLevel::avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
#endif
    default:
      return false;
  }
}

CpuLevel best_cpu_level() {
  if (cpu_supports(CpuLevel::avx512)) return CpuLevel::avx512;
  if (cpu_supports(CpuLevel::avx2)) return CpuLevel::avx2;
  return CpuLevel::baseline;
}

CpuLevel cpu_level() {
  int level = g_level.load(std::memory_order_relaxed);
  if (level < 0) {  // first use (two threads may both get here: the first to store wins, as does set_cpu_level)
    int expected = -1;
    const int found = static_cast<int>(initial_level());
    level = g_level.compare_exchange_strong(expected, found, std::memory_order_relaxed) ? found : expected;
  }
  return static_cast<CpuLevel>(level);
}

std::string_view cpu_capability() { return cpu_level_name(cpu_level()); }

void set_cpu_level(CpuLevel level) {
  MG_CHECK(cpu_supports(level), ValueError,
           "set_cpu_level: this CPU cannot run {} (the highest level it supports is {})", cpu_level_name(level),
           cpu_level_name(best_cpu_level()));
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

CpuLevel parse_cpu_level(std::string_view name, std::string_view what) {
  for (int i = 0; i < 3; ++i)
    if (name == kNames[i]) return static_cast<CpuLevel>(i);
  throw ValueError(fmt::format("{}: expected baseline, avx2 or avx512, got \"{}\"", what, name));
}

std::string_view cpu_level_name(CpuLevel level) {
  const int i = static_cast<int>(level);
  MG_CHECK(i >= 0 && i < 3, ValueError, "cpu_level_name: no level {}", i);
  return kNames[i];
}

}  // namespace mg
