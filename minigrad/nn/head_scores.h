#pragma once
// What does each attention head do? Measured, not guessed: three scores per head of every
// MultiheadAttention in a model, each a mean attention weight in [0, 1], following "In-context
// Learning and Induction Heads" (Olsson et al., 2022):
//
//   previous-token  mean over queries t >= 1 of  w[t, t-1]        on the probe batch
//   first-token     mean over queries t >= 1 of  w[t, 0]          on the probe batch
//   induction       mean over queries t in the second copy of     on random tokens r_1..r_n
//                   w[t, t-n+1]: the key just after the token's   repeated twice (prefix matching)
//                   earlier occurrence
//
// A head that copies the previous token scores ~1 on the first; a head that "looks for what
// followed this token last time" scores high on the third. The label is the largest score when
// it reaches `threshold`, else "mixed".
#include <functional>
#include <string>
#include <vector>

#include "minigrad/nn/capture.h"

namespace mg::nn {

/// The scores of one head (see the file comment).
struct HeadScore {
  std::string layer;  // the attention module's dotted name ("blocks.1.attn")
  int64_t head = 0;
  double previous_token = 0, first_token = 0, induction = 0;
  std::string label;  // "previous token", "first token", "induction" or "mixed"
};

/// Options of score_heads.
struct HeadScoreOptions {
  int64_t induction_length = 0;  // n, the length of the random span repeated twice; 0: half the probe's length
  int64_t induction_batch = 16;  // repeated random sequences
  double threshold = 0.3;        // the least score that earns a label
  uint64_t seed = 1234;          // the random spans
};

/// Score every head of every MultiheadAttention in `model`. `forward` runs the model on ids
/// (B, T) (Int64, tokens in [0, vocab)); `probe` (B, T) is typical input for the previous- and
/// first-token scores; the induction score uses random tokens repeated twice (2n <= T). Runs
/// without recording gradients; the model is left as it was.
std::vector<HeadScore> score_heads(Module& model, const std::function<void(const Tensor& ids)>& forward, const Tensor& probe,
                                   int64_t vocab, const HeadScoreOptions& options = {});

}  // namespace mg::nn
