// Bulk conversions between float32 and bfloat16 (tensor/bfloat16.h): plain loops over the bits that
// the compiler vectorises (no branch: the NaN case is a select).
#include "minigrad/tensor/bfloat16.h"

namespace mg {

void to_bfloat16(const float* in, bfloat16* out, int64_t n) {
  const uint32_t* u = reinterpret_cast<const uint32_t*>(in);
  uint16_t* o = reinterpret_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t x = u[i];
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (x >> 16) | 0x0040u;
    o[i] = static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

void to_float32(const bfloat16* in, float* out, int64_t n) {
  const uint16_t* u = reinterpret_cast<const uint16_t*>(in);
  uint32_t* o = reinterpret_cast<uint32_t*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<uint32_t>(u[i]) << 16;
}

}  // namespace mg
