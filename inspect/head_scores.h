#pragma once
// What does each attention head do? Measured, not guessed: scores per head of every
// MultiheadAttention in a model, following "In-context Learning and Induction Heads" (Olsson et
// al., 2022) and "A Mathematical Framework for Transformer Circuits" (Elhage et al., 2021). With
// w[t, s] a head's attention weight from query t to key s:
//
//   previous-token  mean over queries t >= 1 of  w[t, t-1]            on the probe batch
//   first-token     mean over queries t >= 1 of  w[t, 0]              on the probe batch
//   induction       mean over queries t in the second copy of         on random tokens r_1..r_n
//                   w[t, t-n+1]: the key just after the token's       repeated twice (prefix
//                   earlier occurrence                                matching)
//   copying         mean over the same queries t of                   on the same repeated tokens,
//                   d_t[x_s*] - mean_j d_t[j], where s* = argmax_s    only with options.logits
//                   w[t, s] is the key the head looks at most and
//                   d_t = logits_t - logits_t(with this head removed)
//
// A head that copies the previous token scores ~1 on the first; a head that "looks for what
// followed this token last time" scores high on the third. Copying (in logits, not [0, 1]) is
// positive when the head raises the logit of the token it attends to more than the others: the
// behaviour Elhage et al. read from the eigenvalues of the OV circuit, measured here as the
// head's total effect through HeadAblation, so it needs no access to the model's unembedding.
// The label is the largest of the first three scores when it reaches `threshold`, else "mixed".
//
// All four read keys as positions of the queries' own sequence, so they describe self-attention
// only: query and key the same Variable (MultiheadAttention's KV cache asks the same).
// In a cross-attention (a decoder reading an encoder's output) key t-1 is not the token before
// query t, so its heads get NaN scores and the label "cross-attention".
//
// icl_score is the model's in-context learning score (Olsson et al.: loss late in the context
// minus loss early in it): on random tokens repeated twice, the mean next-token loss over the
// second copy minus the mean over the first. Random tokens cannot be predicted the first time;
// a model that reads its context predicts them the second time, so the score is negative.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "minigrad/inspect/capture.h"
#include "minigrad/nn/module.h"

namespace mg::inspect {

/// The scores of one head (see the file comment).
struct HeadScore {
  std::string layer;  // the attention module's dotted name ("blocks.1.attn")
  int64_t head = 0;
  double previous_token = 0, first_token = 0, induction = 0;
  double copying = NAN;  // NaN when not measured (no HeadScoreOptions::logits)
  std::string label;     // "previous token", "first token", "induction", "mixed" or "cross-attention" (no scores)
};

/// Options of score_heads.
struct HeadScoreOptions {
  /// N, the length of the random span repeated twice; 0: half the probe's length.
  int64_t induction_length = 0;
  /// Repeated random sequences.
  int64_t induction_batch = 16;
  /// The least score that earns a label.
  double threshold = 0.3;
  /// The random spans.
  uint64_t seed = 1234;
  /// The model's logits (B, T, vocab) for ids (B, T), position t predicting token t+1; when
  /// set, the copying score is measured too (one extra forward per head).
  std::function<Variable(const Tensor& ids)> logits;
};

/// Score every head of every MultiheadAttention in `model`. `forward` runs the model on ids
/// (B, T) (Int64, tokens in [0, vocab)); `probe` (B, T) is typical input for the previous- and
/// first-token scores; the induction score uses random tokens repeated twice (2n <= T). Heads of
/// a cross-attention get NaN scores (see the file comment). Runs without recording gradients;
/// the model is left as it was.
std::vector<HeadScore> score_heads(nn::Module& model, const std::function<void(const Tensor& ids)>& forward,
                                   const Tensor& probe, int64_t vocab, const HeadScoreOptions& options = {});

/// The in-context learning score and its two halves (see the file comment).
struct IclScore {
  double early = 0;  // mean next-token loss over the first copy (targets r_2..r_n)
  double late = 0;   // mean next-token loss over the second copy (targets r_1..r_n again)
  double score = 0;  // late - early: negative when the model learns from its context
};

/// icl_score on `batch` sequences of n random tokens in [0, vocab) repeated twice; `logits`
/// maps ids (B, 2n) to (B, 2n, vocab). Runs without recording gradients.
IclScore icl_score(const std::function<Variable(const Tensor& ids)>& logits, int64_t vocab, int64_t n,
                   int64_t batch = 16, uint64_t seed = 1234);

/// What head `head` of `mha` writes from each key before its attention weights apply:
/// u_j = W_O^h v_j^h, (B, Tk, E) for a value input (B, Tk, E), where v^h is the head's slice of
/// w_v(value) (with grouped heads, value head head / group) and W_O^h its columns of W_O. The
/// head's part of the module's output is weights_h (B, Tq, Tk) @ u; the output is the sum of the
/// parts over the heads plus W_O's bias. A ValueError when the head does not exist.
Variable head_value_writes(const nn::MultiheadAttention& mha, const Variable& value, int64_t head);

/// Remove heads of one MultiheadAttention from every forward while this object lives: a forward
/// hook subtracts each listed head's contribution (its weights times its values, through its
/// columns of W_O) from the module's output, the same numbers as passing head_mask with zeros
/// there. It works on any model without changing its code; gradients flow through it. The module
/// should be in eval mode (the contribution is recomputed without attention dropout).
class HeadAblation {
 public:
  /// Hook the MultiheadAttention at dotted path `layer` of `model`; heads must be in [0, H).
  HeadAblation(nn::Module& model, const std::string& layer, std::vector<int64_t> heads);
  ~HeadAblation() { hook_.remove(); }
  HeadAblation(const HeadAblation&) = delete;
  HeadAblation& operator=(const HeadAblation&) = delete;

 private:
  nn::HookHandle hook_;
};

}  // namespace mg::inspect
