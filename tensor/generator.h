#pragma once
// A seeded random number generator: the same seed gives the same numbers on every machine.
//
// xoshiro256++ (Blackman & Vigna) for the raw bits, seeded through splitmix64; normals by the
// Box-Muller transform. Written out here rather than taken from <random> because the standard
// distributions are allowed to differ between library implementations.
#include <cstdint>

namespace mg {

class Tensor;

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
  /// The whole state, to continue the same sequence later (torch.Generator.get_state): an int64
  /// tensor (6): the four xoshiro256++ words, whether a Box-Muller normal is kept for the next
  /// call (0 or 1), and that normal's bits.
  Tensor get_state() const;
  /// Continue from a state that get_state() returned. A ValueError, and the generator unchanged,
  /// when `state` is not one (dtype, shape, a flag other than 0 or 1, or all four words 0).
  void set_state(const Tensor& state);

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

/// The generator used when an op is not given one (randn, dropout, ...).
Generator& default_generator();
/// Reseed the default generator, like torch.manual_seed.
void manual_seed(uint64_t seed);
/// The default generator's state (torch.get_rng_state).
Tensor get_rng_state();
/// Continue the default generator from a saved state (torch.set_rng_state).
void set_rng_state(const Tensor& state);

}  // namespace mg
