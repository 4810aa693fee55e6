#pragma once
// The time loop of a recurrent layer as one differentiable op (autograd/ops/rnn.cpp), the
// kernels of tensor/ops/rnn.cpp. nn::RNN, nn::GRU and nn::LSTM call it once per layer and
// direction; nn::RNNCell, nn::GRUCell and nn::LSTMCell write the same step out of ordinary ops.
#include "minigrad/autograd/variable.h"
#include "minigrad/tensor/ops/rnn.h"

namespace mg {

/// One recurrent layer in one direction over a time-major sequence (formulas in tensor/ops/rnn.h):
/// xw (L, N, G H) = x W_ih^T + b_ih for every step, h0 (N, H), c0 (N, H) for an LSTM (else
/// undefined), w_hh (G H, H), b_hh (G H) or undefined. Returns the h of every step (L, N, H),
/// and for an LSTM (2, L, N, H): the h and the c of every step. `reverse` runs t = L - 1 .. 0.
Variable recurrence(RNNKind kind, const Variable& xw, const Variable& h0, const Variable& c0, const Variable& w_hh,
                    const Variable& b_hh = Variable(), bool reverse = false);

}  // namespace mg
