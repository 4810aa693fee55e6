// The recurrence's derivative rule: backpropagation through time, one kernel
// (tensor/ops/rnn.cpp:recurrence_backward) for every input's gradient at once.
#include "minigrad/autograd/ops/rnn.h"

#include "minigrad/autograd/engine.h"
#include "minigrad/tensor/ops/shape.h"

namespace mg {

// y = the h of every step (and c, for an LSTM), h_t = step(xw[t], h_{t-1}; w_hh, b_hh)
// dxw, dh0, dc0, dw_hh, db_hh: BPTT from dy (formulas in tensor/ops/rnn.cpp)
Variable recurrence(RNNKind kind, const Variable& xw, const Variable& h0, const Variable& c0, const Variable& w_hh,
                    const Variable& b_hh, bool reverse) {
  MG_CHECK(xw.defined() && h0.defined() && w_hh.defined(), StateError, "recurrence: an operand is undefined");
  const bool lstm = kind == RNNKind::LSTM;
  MG_CHECK(lstm == c0.defined(), StateError, "recurrence: c0 is {} an LSTM", lstm ? "required for" : "only for");
  const Tensor c0t = lstm ? c0.data() : Tensor(), bt = b_hh.defined() ? b_hh.data() : Tensor();
  RecurrenceForward f = recurrence_forward(kind, xw.data(), h0.data(), c0t, w_hh.data(), bt, reverse);
  const Tensor y = lstm ? stack({f.h, f.c}, 0) : f.h;
  // (c0 and b_hh keep their slots when not given: a GRU's or RNN's c0, a layer without bias)
  return record("recurrence", y, {xw, h0, w_hh, c0, b_hh}, keep(0, 1, 2, 3, 4),
                [kind, f, xw = xw.data(), h0 = h0.data(), c0t, w = w_hh.data(), bt, reverse, lstm](
                    const Tensor& dy, const Node&) -> TensorList {
                  const Tensor dh = lstm ? dy.narrow(0, 0, 1).squeeze(0) : dy;
                  const Tensor dc = lstm ? dy.narrow(0, 1, 1).squeeze(0) : Tensor();
                  RecurrenceGrads g = recurrence_backward(kind, dh, dc, xw, h0, c0t, w, bt, f, reverse);
                  return {g.dxw, g.dh0, g.dw_hh, lstm ? g.dc0 : Tensor(), bt.defined() ? g.db_hh : Tensor()};
                });
}

}  // namespace mg
