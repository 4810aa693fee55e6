#pragma once
// A seeded random number generator: the same seed gives the same numbers on every machine.
//
// xoshiro256++ (Blackman & Vigna) for the raw bits, seeded through splitmix64; normals by the
// Box-Muller transform. Written out here rather than taken from <random> because the standard
// distributions are allowed to differ between library implementations.
#include <cstdint>

namespace mg {

/// Seeded source of random numbers. Draws are sequential, so results never depend on threads.
class Generator {
 public:
  /// A generator started from `seed`.
  explicit Generator(uint64_t seed = 0);
  /// Restart the sequence from `seed`.
  void manual_seed(uint64_t seed);
  /// 64 random bits.
  uint64_t next_u64();
  /// Uniform on {0, ..., n - 1}, without modulo bias (n = 0: all 2^64 values).
  uint64_t next_below(uint64_t n);
  /// Uniform on [0, 1), 53 bits of precision.
  double next_double();
  /// Standard normal N(0, 1).
  double next_normal();

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

/// The generator used when an op is not given one (randn, dropout, ...).
Generator& default_generator();
/// Reseed the default generator, like torch.manual_seed.
void manual_seed(uint64_t seed);

}  // namespace mg
