#pragma once
// Recurrent-layer kernels (tensor/ops/rnn.cpp): the time loop of one layer of an Elman RNN, a
// GRU or an LSTM, in one direction, over a whole sequence, forward and backward (backpropagation
// through time). The input projection x W_ih^T + b_ih of every step is one GEMM done beforehand
// (autograd's linear); what is left is inherently sequential: each step needs the last one's h.
//
// Gate order and formulas are PyTorch's (H the hidden size, gh = h_prev W_hh^T + b_hh):
//   Tanh / ReLU  h = act(xw + gh)                                       xw, gh: (N, H)
//   GRU          r = s(xw_r + gh_r)  z = s(xw_z + gh_z)  n = tanh(xw_n + r gh_n)
//                h = (1 - z) n + z h_prev                               xw, gh: (N, 3H) as [r z n]
//   LSTM         i = s(..)  f = s(..)  g = tanh(..)  o = s(..)  of xw + gh
//                c = f c_prev + i g   h = o tanh(c)                     xw, gh: (N, 4H) as [i f g o]
// (s the logistic sigmoid).
#include "minigrad/tensor/tensor.h"

namespace mg {

/// Which recurrence: Elman with tanh or ReLU, GRU, LSTM.
enum class RNNKind { Tanh, ReLU, GRU, LSTM };
/// Gates per hidden unit: 1 (Tanh, ReLU), 3 (GRU), 4 (LSTM).
int64_t rnn_gates(RNNKind kind);

/// What recurrence_forward returns, and its backward needs.
struct RecurrenceForward {
  Tensor h;      // (L, N, H): the hidden state after each step, in time order (whichever direction ran)
  Tensor c;      // (L, N, H): LSTM's cell state after each step; undefined otherwise
  Tensor saved;  // GRU: (L, N, 4H) r, z, n, gh_n per step; LSTM: (L, N, 4H) i, f, g, o; else undefined
};
/// Run the recurrence over xw (L, N, G H) from h0 (N, H) (and c0 (N, H) for an LSTM) with
/// w_hh (G H, H) and b_hh (G H) or undefined; t = 0 .. L - 1, or L - 1 .. 0 when `reverse`.
RecurrenceForward recurrence_forward(RNNKind kind, const Tensor& xw, const Tensor& h0, const Tensor& c0,
                                     const Tensor& w_hh, const Tensor& b_hh, bool reverse);

/// The gradients recurrence_backward returns (dc0 only for an LSTM; db_hh undefined without b_hh).
struct RecurrenceGrads {
  Tensor dxw, dh0, dc0, dw_hh, db_hh;
};
/// Backpropagation through time from dh (L, N, H), the gradient of every step's h, and for an
/// LSTM dc (L, N, H) (undefined: zeros), walking the steps in the opposite order to the forward.
RecurrenceGrads recurrence_backward(RNNKind kind, const Tensor& dh, const Tensor& dc, const Tensor& xw,
                                    const Tensor& h0, const Tensor& c0, const Tensor& w_hh, const Tensor& b_hh,
                                    const RecurrenceForward& fwd, bool reverse);

}  // namespace mg
