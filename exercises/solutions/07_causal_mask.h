#pragma once
// Exercise 7, the reference solution (docs/04-nn.md, section "The layers").
#include <cstdint>

#include "exercise.h"

namespace exercises {

/// The causal mask for T tokens: Bool (T, T), true where key j comes after query i (j > i).
inline mg::Tensor causal_mask(int64_t T) {
  // Every pair starts masked; triu keeps the part on and above diagonal 1 (j >= i + 1) and clears
  // the rest, so query i keeps keys 0 .. i visible. (The library builds it the same way.)
  return mg::triu(mg::ones({T, T}, mg::DType::Bool), 1);
}

}  // namespace exercises
