#include "minigrad/tensor/scratch.h"

#include <algorithm>
#include <limits>
#include <new>
#include <vector>

#include "minigrad/tensor/error.h"
#include "minigrad/tensor/sanitizer.h"

namespace mg::detail {
namespace {

constexpr std::size_t kAlign = 64;                              // a cache line, and enough for any SIMD load
constexpr std::size_t kMaxCached = 8;                           // buffers kept per thread; more are freed
constexpr std::size_t kMaxCachedBytes = std::size_t{64} << 20;  // and bytes: a large buffer is not kept

constexpr bool kCache = !detail::kAddressSanitizer;  // no reuse under ASan (tensor/sanitizer.h)

struct Block {
  void* p;
  std::size_t bytes;
};

// The calling thread's free buffers; freed when the thread exits.
struct Cache {
  std::vector<Block> free;
  std::size_t bytes = 0;  // held in `free`
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
    cache().bytes -= best->bytes;
    free.erase(best);
    return p;
  }
  MG_CHECK(bytes <= std::numeric_limits<std::size_t>::max() - kAlign, ValueError, "scratch: {} bytes is too large",
           bytes);
  const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  capacity = rounded;
  try {
    return ::operator new(rounded, std::align_val_t(kAlign));
  } catch (const std::bad_alloc&) {
    throw MemoryError(
        fmt::format("out of memory: cannot allocate {} bytes of scratch space (a kernel's work buffer)", rounded));
  }
}

bool scratch_reuses_buffers() { return kCache; }

void scratch_release(void* p, std::size_t capacity) noexcept {
  Cache& c = cache();
  if (!kCache || capacity > kMaxCachedBytes) {
    ::operator delete(p, std::align_val_t(kAlign));
    return;
  }
  // make room: drop the smallest cached buffers (keep the large ones, the costly ones to remake)
  while (!c.free.empty() && (c.free.size() >= kMaxCached || c.bytes + capacity > kMaxCachedBytes)) {
    auto smallest = std::min_element(c.free.begin(), c.free.end(),
                                     [](const Block& x, const Block& y) { return x.bytes < y.bytes; });
    if (smallest->bytes >= capacity) {  // this one is the smallest: free it instead
      ::operator delete(p, std::align_val_t(kAlign));
      return;
    }
    c.bytes -= smallest->bytes;
    ::operator delete(smallest->p, std::align_val_t(kAlign));
    c.free.erase(smallest);
  }
  try {
    c.free.push_back({p, capacity});
    c.bytes += capacity;
  } catch (...) {
    ::operator delete(p, std::align_val_t(kAlign));
  }
}

}  // namespace mg::detail
