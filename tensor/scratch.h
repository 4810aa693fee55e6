#pragma once
// Scratch memory for kernels. A kernel that needs a temporary buffer on every call (conv2d's
// im2col columns, for one) would otherwise ask malloc for it each time; buffers of a few hundred
// KB are handed back to the OS on free and come back as fresh pages, and the page faults can cost
// more than the arithmetic. Scratch keeps a few freed buffers per thread and hands them out again.
//
//   Scratch<float> cols(n);  // n floats, contents undefined; returned to this thread's cache at scope exit
//
// A buffer goes back to the cache of the thread that destroys its Scratch (a local inside a
// parallel_for body: the thread that made it). A thread keeps at most 8 buffers and 64 MB; larger
// buffers are freed at once. Under AddressSanitizer nothing is kept, so that ASan sees every
// buffer's true bounds and lifetime (as tensor/storage.cpp's cache does).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "minigrad/tensor/error.h"

namespace mg {

namespace detail {
/// A buffer of at least `bytes` bytes (64-byte aligned) from the calling thread's cache, or a new one.
void* scratch_acquire(std::size_t bytes, std::size_t& capacity);
/// Whether released buffers are kept for reuse (not under AddressSanitizer).
bool scratch_reuses_buffers();
/// Give a buffer from scratch_acquire back to the calling thread's cache (freed if the cache is full).
void scratch_release(void* p, std::size_t capacity) noexcept;
}  // namespace detail

/// An uninitialised buffer of n elements of a trivial type T, reused across calls on one thread.
template <class T>
class Scratch {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  /// n elements (n >= 0; 0 gives a null pointer); the contents are undefined until written.
  explicit Scratch(int64_t n) {
    MG_CHECK(n >= 0 && static_cast<uint64_t>(n) <= std::numeric_limits<std::size_t>::max() / sizeof(T) / 2, ValueError,
             "scratch: a buffer of {} elements of {} bytes is too large", n, sizeof(T));
    if (n > 0) p_ = static_cast<T*>(detail::scratch_acquire(static_cast<std::size_t>(n) * sizeof(T), capacity_));
  }
  ~Scratch() {
    if (p_) detail::scratch_release(p_, capacity_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  /// The first element (null when n was 0).
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
  std::size_t capacity_ = 0;  // bytes actually held
};

}  // namespace mg
