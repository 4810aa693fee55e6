#pragma once
// Shared by the bad-input tests (test_bad_inputs.cpp with its catalogue bad_inputs_*.cpp,
// test_bad_kernel_inputs.cpp): BAD(E, op, call) runs `call`, which must throw the typed mg::Error E
// with a message naming `op`, and counts it.
#include <functional>
#include <limits>
#include <string>

#include "helpers.h"

namespace mgtest {

/// How many bad calls this test binary has made (each file checks its own minimum).
inline int g_cases = 0;

/// Run `call`, which must throw E whose message contains `op`; `code` is the call's text.
template <class E>
void expect_error(const char* code, const std::function<void()>& call, const std::string& op) {
  ++g_cases;
  try {
    call();
    ADD_FAILURE() << code << ": no error";
  } catch (const E& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr(op)) << code;
  } catch (const std::exception& e) {  // (E may be mg::Error itself: any typed error naming op)
    if (dynamic_cast<const mg::Error*>(&e)) {
      ADD_FAILURE() << code << ": the wrong error class: " << e.what();
      return;
    }
    ADD_FAILURE() << code << ": not an mg::Error: " << e.what();
  }
}

inline constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
/// An int64 vector as a 1-D tensor of indices.
inline mg::Tensor ids(std::vector<int64_t> v) { return mg::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

}  // namespace mgtest

#define BAD(ErrorType, op, ...)    \
  mgtest::expect_error<ErrorType>( \
      #__VA_ARGS__, [&] { (void)(__VA_ARGS__); }, op)
