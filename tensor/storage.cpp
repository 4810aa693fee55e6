#include "minigrad/tensor/storage.h"

#include "minigrad/tensor/error.h"
#include "minigrad/tensor/sanitizer.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>

namespace mg {
namespace {

constexpr bool kCache = !detail::kAddressSanitizer;  // no reuse under ASan (tensor/sanitizer.h)

// Size classes: powers of two up to 4 KiB, then 8 steps per doubling (at most 12.5% waste).
size_t size_class(size_t n) {
  if (n <= 64) return 64;
  size_t p = 64;
  while (p < n && p < 4096) p <<= 1;
  if (n <= p) return p;
  size_t top = 4096;
  while (top < n) top <<= 1;
  const size_t step = top / 16;  // classes top/2 + k * top/16
  return (n + step - 1) / step * step;
}

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free;
  size_t bytes = 0;
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may outlive static destructors
  return *c;
}

void* allocate(size_t cls) {
  if (kCache) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free.find(cls);
    if (it != c.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.bytes -= cls;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, cls);
  if (!p) {
    empty_cache();  // give back what is cached and try once more
    p = std::aligned_alloc(64, cls);
    MG_CHECK(p != nullptr, MemoryError, "out of memory: cannot allocate {} bytes for a tensor", cls);
  }
  return p;
}

void release(void* p, size_t cls) {
  if (!kCache) {
    std::free(p);
    return;
  }
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.free[cls].push_back(p);
  c.bytes += cls;
}

// Bytes of live storages, and the most there have been (memory_allocated and its peak).
std::atomic<size_t> live_bytes{0}, peak_bytes{0};

void count_allocation(size_t cls) {
  const size_t now = live_bytes.fetch_add(cls, std::memory_order_relaxed) + cls;
  size_t peak = peak_bytes.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

}  // namespace

Storage::Storage(size_t nbytes, bool zero) : ptr_(nullptr), nbytes_(nbytes) {
  if (nbytes == 0) return;
  // Far beyond any machine's memory (and where the size classes below would overflow).
  MG_CHECK(nbytes <= (size_t{1} << 62), MemoryError, "out of memory: cannot allocate {} bytes for a tensor", nbytes);
  ptr_ = allocate(size_class(nbytes));
  count_allocation(size_class(nbytes));
  if (zero) std::memset(ptr_, 0, nbytes);
}

Storage::~Storage() {
  if (!ptr_) return;
  live_bytes.fetch_sub(size_class(nbytes_), std::memory_order_relaxed);
  release(ptr_, size_class(nbytes_));
}

size_t memory_allocated() { return live_bytes.load(std::memory_order_relaxed); }
size_t max_memory_allocated() { return peak_bytes.load(std::memory_order_relaxed); }
void reset_peak_memory_stats() {
  peak_bytes.store(live_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

size_t cached_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.bytes;
}

void empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [cls, list] : c.free)
    for (void* p : list) std::free(p);
  c.free.clear();
  c.bytes = 0;
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
}

void check_fits_in_memory(double bytes, const std::string& what) {
  const double have = physical_memory_bytes();
  MG_CHECK(!(bytes > have) || have == 0, MemoryError,
           "{} needs {:.3g} bytes, more than this machine's {:.3g} bytes of memory", what, bytes, have);
}

}  // namespace mg
