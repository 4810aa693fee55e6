#pragma once
// A reference-counted block of memory. Several tensors (views) can share one Storage.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace mg {

/// Raw bytes owned by one or more tensors, 64-byte aligned (a cache line, and wide enough for
/// AVX-512 loads).
class Storage {
 public:
  /// Allocate `nbytes` uninitialised bytes (zeroed when `zero` is true).
  explicit Storage(size_t nbytes, bool zero = false) : nbytes_(nbytes) {
    const size_t rounded = (nbytes + 63) / 64 * 64;
    ptr_ = rounded ? std::aligned_alloc(64, rounded) : nullptr;
    if (rounded && !ptr_) throw std::bad_alloc();
    if (zero && nbytes) std::memset(ptr_, 0, nbytes);
  }
  ~Storage() { std::free(ptr_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// First byte.
  void* data() const { return ptr_; }
  /// Size in bytes.
  size_t nbytes() const { return nbytes_; }

 private:
  void* ptr_;
  size_t nbytes_;
};

}  // namespace mg
