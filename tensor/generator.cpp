#include "minigrad/tensor/generator.h"

#include <bit>
#include <cmath>
#include <numbers>
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg {
namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Generator::Generator(uint64_t seed) { manual_seed(seed); }

void Generator::manual_seed(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
  has_spare_ = false;
}

uint64_t Generator::next_u64() {
  const uint64_t result = rotl(s_[0] + s_[3], 23) + s_[0];
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint64_t Generator::next_below(uint64_t n) {
  // u % n favours small results when 2^64 is not a multiple of n; drawing again for the few u
  // below 2^64 mod n (t below) makes every result equally likely.
  if (n == 0) return next_u64();  // n = 0 stands for the whole 2^64
  const uint64_t t = (0 - n) % n;
  for (;;) {
    const uint64_t u = next_u64();
    if (u >= t) return u % n;
  }
}

Tensor Generator::get_state() const {
  std::vector<int64_t> v;
  for (uint64_t w : s_) v.push_back(std::bit_cast<int64_t>(w));
  v.push_back(has_spare_ ? 1 : 0);
  v.push_back(std::bit_cast<int64_t>(spare_));
  return from_vector(v, {6});
}

void Generator::set_state(const Tensor& state) {
  MG_CHECK(state.defined(), StateError, "Generator::set_state: the state is undefined");
  MG_CHECK(state.dtype() == DType::Int64 && state.shape() == Shape{6}, ValueError,
           "Generator::set_state: expected an int64 tensor (6) as get_state() returns, got {} {}",
           dtype_name(state.dtype()), shape_str(state.shape()));
  const std::vector<int64_t> v = state.to_vector<int64_t>();
  MG_CHECK(v[4] == 0 || v[4] == 1, ValueError,
           "Generator::set_state: element 4 (a normal is kept) must be 0 or 1, got {}", v[4]);
  MG_CHECK(
      v[0] != 0 || v[1] != 0 || v[2] != 0 || v[3] != 0, ValueError,
      "Generator::set_state: the four state words are all 0, which xoshiro256++ never reaches (it would give only zeros)");
  for (int i = 0; i < 4; ++i) s_[i] = std::bit_cast<uint64_t>(v[i]);
  has_spare_ = v[4] == 1;
  spare_ = std::bit_cast<double>(v[5]);
}

double Generator::next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::next_normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // Box-Muller: two uniforms give two independent normals; keep the second for the next call.
  const double u1 = 1.0 - next_double();  // in (0, 1], so log(u1) is finite
  const double u2 = next_double();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
  has_spare_ = true;
  return r * std::cos(2.0 * std::numbers::pi * u2);
}

Generator& default_generator() {
  static Generator g(0);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }
Tensor get_rng_state() { return default_generator().get_state(); }
void set_rng_state(const Tensor& state) { default_generator().set_state(state); }

}  // namespace mg
