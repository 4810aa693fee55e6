#pragma once
// Whether this build runs under AddressSanitizer. The caches that keep freed memory for reuse
// (tensor/storage.cpp, tensor/scratch.cpp) turn themselves off then, so that ASan sees every
// buffer's true bounds and lifetime.

namespace mg::detail {

#if defined(__SANITIZE_ADDRESS__)  // GCC's name
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)  // clang's
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace mg::detail
