#include "minigrad/data/utf8.h"

#include <unicode/utf8.h>

namespace mg::data {

int64_t invalid_utf8_offset(const std::string& s, std::vector<int32_t>* code_points) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const int64_t n = static_cast<int64_t>(s.size());  // 64-bit: a text past 2 GiB is still read right
  for (int64_t i = 0; i < n;) {
    const int64_t start = i;
    UChar32 c;
    U8_NEXT(p, i, n, c);  // reads one code point and moves i past it; c < 0 when invalid
    if (c < 0) return start;
    if (code_points) code_points->push_back(c);
  }
  return -1;
}

}  // namespace mg::data
