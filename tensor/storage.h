#pragma once
// A reference-counted block of memory. Several tensors (views) can share one Storage.
//
// Blocks come from a caching allocator (tensor/storage.cpp): a freed block goes on a free list
// for its size class and the next request of that class takes it back. A training step allocates
// the same sizes as the one before, so after the first step no memory is requested from the
// system at all: no mmap, no page faults, no zeroing by the kernel. (Under AddressSanitizer the
// cache is off, so every use-after-free is still caught.)
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mg {

/// Raw bytes owned by one or more tensors, 64-byte aligned (a cache line, and wide enough for
/// AVX-512 loads).
class Storage {
 public:
  /// Allocate `nbytes` uninitialised bytes (zeroed when `zero` is true).
  explicit Storage(size_t nbytes, bool zero = false);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// First byte.
  void* data() const { return ptr_; }
  /// Size in bytes.
  size_t nbytes() const { return nbytes_; }

  /// How many in-place writes this memory has seen (PyTorch's version counter, `t._version`): every
  /// in-place op (copy_, fill_, add_, an optimizer step, ...) adds one, through whichever view it
  /// wrote. A recorded op notes the versions of the tensors it saves for backward, and backward
  /// refuses to use one that has changed since (autograd/engine.cpp), instead of computing a
  /// gradient from the new numbers. Writes through a raw pointer (`data<T>()`) are not counted.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  /// Count one in-place write (the in-place ops call it; call it after writing through data<T>()).
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  /// A bfloat16 copy of this float32 memory, element for element, that the kernel writing the values
  /// made beside them (layer norm and GELU under autocast, while each row was still in cache): the
  /// next matrix product reads it instead of converting the values in a pass of its own
  /// (autograd/autocast.h). Null when none was made, or when the memory has been written in place
  /// since (version() moved on): then the values and the copy may differ, and the copy is not used.
  std::shared_ptr<const Storage> bf16_copy() const {
    return bf16_copy_ && bf16_copy_version_ == version() ? bf16_copy_ : nullptr;
  }
  /// Attach `copy` (nbytes() / 2 bytes: element i is this memory's float i, rounded as
  /// Tensor::to(BFloat16) rounds) as the copy of the values as they are now.
  void set_bf16_copy(std::shared_ptr<const Storage> copy) {
    bf16_copy_ = std::move(copy);
    bf16_copy_version_ = version();
  }

 private:
  void* ptr_;
  size_t nbytes_;
  std::atomic<uint64_t> version_{0};
  std::shared_ptr<const Storage> bf16_copy_;
  uint64_t bf16_copy_version_ = 0;
};

/// Bytes held by the allocator's free lists (allocated from the system but not in use).
size_t cached_bytes();
/// Bytes of every live Storage (each counted as its size class), as torch.cuda.memory_allocated
/// counts a GPU's: what the tensors in existence hold right now.
size_t memory_allocated();
/// The most memory_allocated() has been since the start or the last reset_peak_memory_stats():
/// around a training step, the memory the step needs (weights, activations kept for the
/// backward, gradients, optimizer state).
size_t max_memory_allocated();
/// Start max_memory_allocated() again from memory_allocated().
void reset_peak_memory_stats();
/// Return every cached block to the system.
void empty_cache();
/// The machine's physical memory in bytes (0 if the system does not say): what a model read from a
/// config file is checked against before any of it is allocated.
double physical_memory_bytes();
/// A MemoryError naming `what` unless `bytes` fit in the machine's physical memory (a config that asks
/// for 2^40 layers is refused at once, instead of allocating until the system kills the process).
void check_fits_in_memory(double bytes, const std::string& what);

}  // namespace mg
