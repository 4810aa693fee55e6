#pragma once
// Autocast: mixed precision as PyTorch's torch.autocast("cpu", dtype=torch.bfloat16).
//
//   {
//     mg::AutocastGuard guard;          // bfloat16 products from here to the end of the scope
//     loss = cross_entropy(model(x), y);
//   }
//   loss.backward();                        // each product's backward runs as its forward did
//
// Inside the scope the matrix products (linear, matmul and batched matmul, and the two products of
// fused attention, Q K^T and P V) round their operands to bfloat16 and sum in float32; their outputs
// are float32 (bfloat16 with AutocastOptions::bfloat16_outputs, below). Nothing else changes: softmax,
// layer norm, GELU, the losses and every reduction run in float32 on float32 inputs, the parameters
// stay float32 and the optimizer updates them in float32.
// Gradients flow back in float32; a product's backward rounds its operands (the incoming gradient,
// and the inputs, kept as bfloat16 copies or, for linear's weight, rounded again) to bfloat16 as its
// forward did, whether or not the scope is still open.
//
// Why only the products: they are nearly all of a transformer's arithmetic, bfloat16 doubles (AMX:
// quadruples) their rate, and a dot product of bfloat16 values summed in float32 loses little (each
// term carries one bfloat16 rounding of each factor, relative 2^-9, and they do not compound). The
// rest is where rounding does compound or cancel: a softmax's exponent sums, layer norm's variance,
// the log-sum-exp of a loss, and an update lr * m / sqrt(v) added to a weight 1000x its size, which
// in bfloat16 (8 bits) would round away. PyTorch's CPU autocast keeps the same ops in float32; its
// products also write bfloat16 outputs, minigrad's write float32 (one rounding fewer), unless the
// scope asks for PyTorch's policy: AutocastGuard guard({.bfloat16_outputs = true}). Then each
// product's output is rounded to bfloat16 once (autocast_output), the ops after it that take
// bfloat16 (GELU, dropout, softmax, SwiGLU, RoPE) keep it, and the ops that minigrad's autocast
// runs in float32 widen it again (autocast_float32): the norms, every loss, conv1d/conv2d and their
// transposes, nn::RNN/GRU/LSTM, interpolate; so does a residual add onto the float32 stream. A bfloat16 value that
// leaves the scope is refused by those ops outside it: compute the loss inside, as the examples do.
//
// The policy lives in one place, autocast() below. A product (linear, matmul, attention) passes its
// float32 operands through the Variable form before its one recording call: inside the scope that
// records a cast, an op of its own ("autocast") whose output is the bfloat16 copy and whose input is
// the float32 value, as PyTorch's autocast inserts casts. The product's rule then reads the copies
// it was given, and rounds the incoming gradient as they were rounded (autocast_like); the same rule
// runs with autocast on or off, on Tensors or, under create_graph, on Variables, so the backward of
// a mixed-precision product can be differentiated again.
//
// The gradient of a bfloat16 value is float32 (PyTorch's is bfloat16). The products sum and write in
// float32, the elementwise ops that take bfloat16 compute in float32 (tensor/loops.h), and rounding
// their gradients to bfloat16 only to widen them again would throw away 16 bits. So the cast's rule
// passes the gradient through, a node records float32 as the gradient dtype of a bfloat16 input
// (Node::input_dtypes), and a bfloat16 output's gradient, given or implicit, is float32; the rules
// of the elementwise ops then compute with float32 gradients and the bfloat16 values they kept
// (float32 beside bfloat16 gives float32). A term a rule makes from kept bfloat16 values alone
// (b * b in div's, 2 y in sqrt's) is bfloat16, as every such term is in PyTorch.
//
// bfloat16 has float32's exponent range, so gradients neither underflow nor overflow where float32's
// would not: no loss scaling is needed (float16, 5 exponent bits, needs it).

#include <initializer_list>

#include "minigrad/autograd/variable.h"
#include "minigrad/tensor/tensor.h"

namespace mg {

/// What an AutocastGuard does besides rounding the products' operands.
struct AutocastOptions {
  /// false (the default): the products write float32, one rounding fewer than PyTorch. true: they
  /// write bfloat16, as PyTorch's CPU autocast does, and the activations after them stay bfloat16
  /// (GELU, dropout, softmax, SwiGLU and RoPE take and give bfloat16) until an op that reads them
  /// widened to float32: the norms, a residual add onto a float32 stream, the losses, convolutions,
  /// nn::RNN/GRU/LSTM and interpolate.
  /// Each product's output is rounded once more; speed and memory are as without (docs/06, section 7).
  bool bfloat16_outputs = false;
};

/// Thread-local autocast state (what AutocastGuard sets).
struct AutocastMode {
  /// True inside an AutocastGuard on this thread.
  static bool is_enabled();
  /// Turn autocast on or off for this thread.
  static void set_enabled(bool enabled);
  /// The options of this thread's innermost AutocastGuard, as it set them (they act only while
  /// autocast is on).
  static AutocastOptions options();
  /// Set the options for this thread.
  static void set_options(AutocastOptions options);
  /// True while autocast is on with bfloat16_outputs on this thread.
  static bool bfloat16_outputs();
};

/// The operand a matrix product reads: inside an AutocastGuard, a float32 tensor's bfloat16 copy;
/// otherwise (outside one, or float64, which autocast leaves alone as PyTorch does) `t` itself.
Tensor autocast(const Tensor& t);
/// The same for a Variable: inside an AutocastGuard, a float32 value's bfloat16 copy, recorded as
/// the op "autocast" (dx = dy, already float32) when `v` requires grad; otherwise `v` itself.
Variable autocast(const Variable& v);
/// The incoming gradient `dy` as a product's backward reads it: rounded to bfloat16 once when any of
/// the forward's operands was bfloat16, so its product was (whether or not the scope is still
/// open), else `dy`.
Tensor autocast_like(const Tensor& dy, std::initializer_list<Tensor> operands);
/// The same under create_graph: the rounding is a recorded cast, so the gradient stays differentiable.
Variable autocast_like(const Variable& dy, std::initializer_list<Variable> operands);
/// The input an op that autocast runs in float32 reads (the norms, the losses, convolutions, the
/// recurrent layers, interpolate: docs/06 section 7 says which PyTorch runs in float32 too): inside an AutocastGuard, a
/// bfloat16 value's float32 widening (exact), recorded as the op "autocast" (dx = dy); otherwise `v`
/// itself (outside the scope, each of these ops refuses bfloat16 with a DTypeError naming itself).
Variable autocast_float32(const Variable& v);
/// widened() for a Variable (tensor.h has the Tensor form), inside or outside an AutocastGuard: a
/// bfloat16 value's float32 widening, recorded as the op "autocast" (dx = dy) so that a rule that
/// reads a kept bfloat16 value under create_graph stays differentiable; any other value itself.
Variable widened(const Variable& v);
/// A product's output as the scope wants it: inside an AutocastGuard with bfloat16_outputs, a
/// float32 `y` rounded to bfloat16 once (PyTorch's autocast products write bfloat16); otherwise `y`
/// (float64 products, which autocast leaves alone, and every product outside such a scope).
Tensor autocast_output(Tensor y);
/// Whether any of the tensors is bfloat16.
bool bfloat16_involved(std::initializer_list<Tensor> tensors);

/// RAII: matrix products run with bfloat16 operands and float32 sums while one of these is alive (on
/// this thread); AutocastGuard(false) turns it off inside an enabled scope. Restores the previous state.
class AutocastGuard {
 public:
  /// Autocast on (or off, with false), products writing float32.
  explicit AutocastGuard(bool enabled = true) : AutocastGuard(enabled, {}) {}
  /// Autocast on with these options: AutocastGuard guard({.bfloat16_outputs = true}) is PyTorch's policy.
  explicit AutocastGuard(AutocastOptions options) : AutocastGuard(true, options) {}
  /// Autocast on or off; when on, with these options (a command line's flags, as char_gpt's).
  AutocastGuard(bool enabled, AutocastOptions options)
      : prev_(AutocastMode::is_enabled()), prev_options_(AutocastMode::options()) {
    AutocastMode::set_enabled(enabled);
    AutocastMode::set_options(enabled ? options : AutocastOptions{});
  }
  /// Restores the state (on or off, and the options) from before this guard.
  ~AutocastGuard() {
    AutocastMode::set_enabled(prev_);
    AutocastMode::set_options(prev_options_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool prev_;
  AutocastOptions prev_options_;
};

}  // namespace mg
