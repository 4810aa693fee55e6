#include "minigrad/tensor/scratch.h"

#include <algorithm>
#include <limits>
#include <new>
#include <vector>

#include "minigrad/tensor/error.h"

namespace mg::detail {
namespace {

constexpr std::size_t kAlign = 64;     // a cache line, and enough for any SIMD load
constexpr std::size_t kMaxCached = 8;  // buffers kept per thread; more are freed

struct Block {
  void* p;
  std::size_t bytes;
};

// The calling thread's free buffers; freed when the thread exits.
struct Cache {
  std::vector<Block> free;
  ~Cache() {
    for (const Block& b : free) ::operator delete(b.p, std::align_val_t(kAlign));
  }
};

Cache& cache() {
  thread_local Cache c;
  return c;
}

}  // namespace

void* scratch_acquire(std::size_t bytes, std::size_t& capacity) {
  auto& free = cache().free;
  // the smallest cached buffer that is big enough
  auto best = free.end();
  for (auto it = free.begin(); it != free.end(); ++it)
    if (it->bytes >= bytes && (best == free.end() || it->bytes < best->bytes)) best = it;
  if (best != free.end()) {
    void* p = best->p;
    capacity = best->bytes;
    free.erase(best);
    return p;
  }
  MG_CHECK(bytes <= std::numeric_limits<std::size_t>::max() - kAlign, ValueError, "scratch: {} bytes is too large", bytes);
  const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  capacity = rounded;
  return ::operator new(rounded, std::align_val_t(kAlign));
}

void scratch_release(void* p, std::size_t capacity) noexcept {
  auto& free = cache().free;
  if (free.size() >= kMaxCached) {
    // keep the larger buffers: drop the smallest of the cached ones and this one
    auto smallest = std::min_element(free.begin(), free.end(), [](const Block& a, const Block& b) { return a.bytes < b.bytes; });
    if (smallest->bytes >= capacity) {
      ::operator delete(p, std::align_val_t(kAlign));
      return;
    }
    ::operator delete(smallest->p, std::align_val_t(kAlign));
    free.erase(smallest);
  }
  try {
    free.push_back({p, capacity});
  } catch (...) {
    ::operator delete(p, std::align_val_t(kAlign));
  }
}

}  // namespace mg::detail
