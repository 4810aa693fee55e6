#pragma once
// Exercise 7 (chapter 5, attention): the causal mask.
//
// A decoder predicts token t + 1 from tokens 0 .. t, so query t must not see any later key: its
// scores with keys t + 1, t + 2, ... are set to -inf before the softmax. The mask says where.
#include <cstdint>

#include "exercise.h"

namespace exercises {

/// The causal mask for T tokens, as nn::MultiheadAttention's attn_mask takes it: Bool (T, T), true
/// where query i may NOT look at key j, that is where j > i (above the diagonal). T = 3:
///   false true  true
///   false false true
///   false false false
/// Useful: mg::ones(shape, mg::DType::Bool), mg::triu / mg::tril (tensor/ops/shape.h), or
/// mg::zeros(shape, mg::DType::Bool) and m.data<bool>() to fill it element by element.
/// Hint: docs/04-nn.md, section "The layers" (attn_mask and is_causal, AttentionForwardOptions in
/// nn/attention.h).
inline mg::Tensor causal_mask(int64_t T) { throw NotDone("07_causal_mask", "docs/04-nn.md, section \"The layers\""); }

}  // namespace exercises
