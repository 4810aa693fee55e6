// The time loops of recurrent layers, forward and backward, one GEMM per step each way.
//
// Forward, step t (h_prev: h0, or the h of the step before in processing order):
//   gh = b_hh + h_prev W_hh^T                          (N, G H), one GEMM
//   then the gates, elementwise, from xw[t] and gh (formulas in tensor/ops/rnn.h).
//
// Backward, the steps in reverse processing order, carrying dh (and an LSTM's dc) backwards:
//   dh_t = dh[t] + carried dh
//   Tanh:  da = dh_t (1 - h^2)          ReLU: da = dh_t [h > 0]          dxw = dgh = da
//   GRU:   dn = dh_t (1 - z)   dz = dh_t (h_prev - n)   dan = dn (1 - n^2)
//          daz = dz z (1 - z)  dar = dan gh_n r (1 - r)
//          dxw = [dar, daz, dan]    dgh = [dar, daz, dan r]    carried dh gets dh_t z directly
//   LSTM:  dc_t = dc[t] + carried dc + dh_t o (1 - tanh(c)^2)
//          dai = dc_t g i (1 - i)   daf = dc_t c_prev f (1 - f)   dag = dc_t i (1 - g^2)
//          dao = dh_t tanh(c) o (1 - o)         dxw = dgh = [dai daf dag dao]   carried dc = dc_t f
//   and for every kind:
//   dW_hh += dgh^T h_prev   db_hh += sum_n dgh   carried dh (+)= dgh W_hh        (two GEMMs)
// The sums over steps run in a fixed order. Within a step the work is split into pieces, one per
// thread (tensor/parallel.h's pool): the gates and the carried dh by rows of the batch, dW_hh and
// db_hh by their rows. The pieces depend only on the thread count, so the same thread count gives
// the same bits.
#include "minigrad/tensor/ops/rnn.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "minigrad/tensor/blas.h"
#include "minigrad/tensor/cpu.h"
#include "minigrad/tensor/fastmath.h"
#include "minigrad/tensor/parallel.h"

namespace mg {
namespace {

// The gates' nonlinearities: for float, fast::'s vectorisable exp and tanh (tensor/fastmath.h,
// within 2 ulp); for double, libm's.
template <class T>
T sigmoid1(T a) {
  return T(1) / (T(1) + fast::exp(-a));
}

// One batch row of the gates, forward, for H hidden units (x: that row of xw, gh: of the
// recurrent product). The __restrict parameters tell the compiler the rows do not overlap, so
// that each loop is vectorised as one.
template <class T>
void tanh_row(int64_t H, const T* __restrict x, const T* __restrict gh, T* __restrict h) {
  for (int64_t j = 0; j < H; ++j) h[j] = fast::tanh(x[j] + gh[j]);
}
template <class T>
void relu_row(int64_t H, const T* __restrict x, const T* __restrict gh, T* __restrict h) {
  for (int64_t j = 0; j < H; ++j) {
    const T a = x[j] + gh[j];
    h[j] = a > 0 || a != a ? a : T(0);  // NaN passes through
  }
}
// GRU: r, z, n as tensor/ops/rnn.h states; saved: r, z, n and gh's n part, for the backward.
template <class T>
void gru_row(int64_t H, const T* __restrict x, const T* __restrict gh, const T* __restrict h_prev, T* __restrict h,
             T* __restrict saved) {
  for (int64_t j = 0; j < H; ++j) {
    const T r = sigmoid1(x[j] + gh[j]), z = sigmoid1(x[H + j] + gh[H + j]);
    const T n = fast::tanh(x[2 * H + j] + r * gh[2 * H + j]);
    h[j] = (T(1) - z) * n + z * h_prev[j];
    saved[j] = r, saved[H + j] = z, saved[2 * H + j] = n, saved[3 * H + j] = gh[2 * H + j];
  }
}
// LSTM: i, f, g, o, then c = f c_prev + i g and h = o tanh(c); saved: i, f, g, o.
template <class T>
void lstm_row(int64_t H, const T* __restrict x, const T* __restrict gh, const T* __restrict c_prev, T* __restrict c,
              T* __restrict h, T* __restrict saved) {
  for (int64_t j = 0; j < H; ++j) {
    const T i = sigmoid1(x[j] + gh[j]), f = sigmoid1(x[H + j] + gh[H + j]);
    const T g = fast::tanh(x[2 * H + j] + gh[2 * H + j]), o = sigmoid1(x[3 * H + j] + gh[3 * H + j]);
    c[j] = f * c_prev[j] + i * g;
    h[j] = o * fast::tanh(c[j]);
    saved[j] = i, saved[H + j] = f, saved[2 * H + j] = g, saved[3 * H + j] = o;
  }
}

// One batch row of the gates, backward (the formulas at the top of this file). dh: dh_t for the
// row; dx: that row of dxw (and, but for a GRU, of dgh); carry_h and carry_c are updated.
template <class T>
void tanh_back_row(int64_t H, const T* __restrict dh, const T* __restrict h, T* __restrict dx) {
  for (int64_t j = 0; j < H; ++j) dx[j] = dh[j] * (T(1) - h[j] * h[j]);
}
template <class T>
void relu_back_row(int64_t H, const T* __restrict dh, const T* __restrict h, T* __restrict dx) {
  for (int64_t j = 0; j < H; ++j) dx[j] = h[j] > 0 ? dh[j] : T(0);
}
template <class T>
void gru_back_row(int64_t H, const T* __restrict dh, const T* __restrict h_prev, const T* __restrict saved,
                  T* __restrict dx, T* __restrict dgh, T* __restrict carry_h) {
  for (int64_t j = 0; j < H; ++j) {
    const T r = saved[j], z = saved[H + j], n = saved[2 * H + j], ghn = saved[3 * H + j];
    const T dan = dh[j] * (T(1) - z) * (T(1) - n * n);
    const T daz = dh[j] * (h_prev[j] - n) * z * (T(1) - z);
    const T dar = dan * ghn * r * (T(1) - r);
    dx[j] = dar, dx[H + j] = daz, dx[2 * H + j] = dan;
    dgh[j] = dar, dgh[H + j] = daz, dgh[2 * H + j] = dan * r;
    carry_h[j] = dh[j] * z;  // h = .. + z h_prev: the direct path (the GEMM adds onto it)
  }
}
// dc_in: the row of the dc given from outside, or null.
template <class T>
void lstm_back_row(int64_t H, const T* __restrict dh, const T* __restrict dc_in, const T* __restrict c,
                   const T* __restrict c_prev, const T* __restrict saved, T* __restrict dx, T* __restrict carry_c) {
  for (int64_t j = 0; j < H; ++j) {
    const T i = saved[j], f = saved[H + j], g = saved[2 * H + j], o = saved[3 * H + j];
    const T tc = fast::tanh(c[j]);
    const T dc = (dc_in ? dc_in[j] : T(0)) + carry_c[j] + dh[j] * o * (T(1) - tc * tc);
    dx[j] = dc * g * i * (T(1) - i);
    dx[H + j] = dc * c_prev[j] * f * (T(1) - f);
    dx[2 * H + j] = dc * i * (T(1) - g * g);
    dx[3 * H + j] = dh[j] * tc * o * (T(1) - o);
    carry_c[j] = dc * f;
  }
}

struct Dims {
  int64_t L, N, H, G;
};

Dims check_recurrence(RNNKind kind, const Tensor& xw, const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                      const Tensor& b_hh, std::string_view op) {
  MG_CHECK(xw.defined() && h0.defined() && w_hh.defined(), StateError, "{}: an operand is undefined", op);
  const int64_t G = rnn_gates(kind);
  MG_CHECK(w_hh.dim() == 2 && w_hh.size(1) >= 1 && w_hh.size(0) == G * w_hh.size(1), ShapeError,
           "{}: expected w_hh ({} H, H) with H >= 1, got shape {}", op, G, shape_str(w_hh.shape()));
  const int64_t H = w_hh.size(1);
  MG_CHECK(xw.dim() == 3 && xw.size(2) == G * H, ShapeError,
           "{}: expected xw (L, N, {}) for hidden size {}, got shape {}", op, G * H, H, shape_str(xw.shape()));
  const int64_t L = xw.size(0), N = xw.size(1);
  MG_CHECK(h0.shape() == (Shape{N, H}), ShapeError, "{}: expected h0 ({}, {}), got shape {}", op, N, H,
           shape_str(h0.shape()));
  MG_CHECK(kind != RNNKind::LSTM || (c0.defined() && c0.shape() == Shape{N, H}), ShapeError,
           "{}: expected c0 ({}, {}), got {}", op, N, H, c0.defined() ? shape_str(c0.shape()) : "an undefined tensor");
  MG_CHECK(!b_hh.defined() || b_hh.shape() == Shape{G * H}, ShapeError, "{}: expected b_hh ({},), got shape {}", op,
           G * H, shape_str(b_hh.shape()));
  const DType dt = xw.dtype();
  MG_CHECK(is_floating(dt) && h0.dtype() == dt && w_hh.dtype() == dt && (!c0.defined() || c0.dtype() == dt) &&
               (!b_hh.defined() || b_hh.dtype() == dt),
           DTypeError, "{}: xw, h0, c0, w_hh and b_hh must be one floating dtype (xw is {})", op, dtype_name(dt));
  return {L, N, H, G};
}

constexpr int64_t kSplitWork = 1 << 20;  // multiply-adds of a product worth splitting over threads

// f(i0, i1) for pieces [i0, i1) covering [0, n): one piece per thread (a multiple of `align` long)
// when the step has `work` multiply-adds worth splitting, else one piece.
template <class F>
void by_pieces(int64_t n, int64_t work, int64_t align, F&& f) {
  const int64_t pieces = work >= kSplitWork ? std::min<int64_t>(get_num_threads(), (n + align - 1) / align) : 1;
  if (pieces <= 1) return detail::run_at_level(cpu_level(), [&] { f(int64_t{0}, n); });
  const int64_t step = ((n + pieces - 1) / pieces + align - 1) / align * align;
  parallel_for(0, pieces, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      if (p * step < n) f(p * step, std::min(n, (p + 1) * step));
  });
}

}  // namespace

int64_t rnn_gates(RNNKind kind) {
  switch (kind) {
    case RNNKind::Tanh:
    case RNNKind::ReLU:
      return 1;
    case RNNKind::GRU:
      return 3;
    case RNNKind::LSTM:
      return 4;
  }
  return 1;
}

RecurrenceForward recurrence_forward(RNNKind kind, const Tensor& xw0, const Tensor& h00, const Tensor& c00,
                                     const Tensor& w0, const Tensor& b0, bool reverse) {
  const Dims d = check_recurrence(kind, xw0, h00, c00, w0, b0, "recurrence_forward");
  const Tensor xw = xw0.contiguous(), h0 = h00.contiguous(), w = w0.contiguous();
  const Tensor c0 = c00.defined() ? c00.contiguous() : Tensor(), b = b0.defined() ? b0.contiguous() : Tensor();
  const int64_t NH = d.N * d.H, GH = d.G * d.H;
  RecurrenceForward f;
  f.h = empty({d.L, d.N, d.H}, xw.dtype());
  if (kind == RNNKind::LSTM) f.c = empty({d.L, d.N, d.H}, xw.dtype());
  if (kind == RNNKind::GRU || kind == RNNKind::LSTM) f.saved = empty({d.L, d.N, 4 * d.H}, xw.dtype());
  visit_float(xw.dtype(), "recurrence_forward", [&]<class T>() {
    std::vector<T> gh(d.N * GH);
    T* ph = f.h.data<T>();
    T* pc = f.c.defined() ? f.c.data<T>() : nullptr;
    T* ps = f.saved.defined() ? f.saved.data<T>() : nullptr;
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    for (int64_t s = 0; s < d.L; ++s) {
      const int64_t t = reverse ? d.L - 1 - s : s, tp = reverse ? t + 1 : t - 1;
      const T* h_prev = s == 0 ? h0.data<T>() : ph + tp * NH;
      const T* x = xw.data<T>() + t * d.N * GH;
      T* h = ph + t * NH;
      by_pieces(d.N, d.N * GH * d.H, 1, [&](int64_t n0, int64_t n1) {
        // gh rows [n0, n1) = b + h_prev W^T, then those rows' gates
        for (int64_t n = n0; n < n1; ++n)
          for (int64_t j = 0; j < GH; ++j) gh[n * GH + j] = pb ? pb[j] : T(0);
        if (n1 > n0)
          blas::gemm(false, true, n1 - n0, GH, d.H, T(1), h_prev + n0 * d.H, d.H, w.data<T>(), d.H, T(1),
                     gh.data() + n0 * GH, GH);
        for (int64_t n = n0; n < n1; ++n) {
          const T* xn = x + n * GH;
          const T* gn = gh.data() + n * GH;
          T* sv = ps ? ps + (t * d.N + n) * 4 * d.H : nullptr;
          switch (kind) {
            case RNNKind::Tanh:
              tanh_row(d.H, xn, gn, h + n * d.H);
              break;
            case RNNKind::ReLU:
              relu_row(d.H, xn, gn, h + n * d.H);
              break;
            case RNNKind::GRU:
              gru_row(d.H, xn, gn, h_prev + n * d.H, h + n * d.H, sv);
              break;
            case RNNKind::LSTM: {
              const T* c_prev = (s == 0 ? c0.data<T>() : pc + tp * NH) + n * d.H;
              lstm_row(d.H, xn, gn, c_prev, pc + t * NH + n * d.H, h + n * d.H, sv);
              break;
            }
          }
        }
      });
    }
  });
  return f;
}

RecurrenceGrads recurrence_backward(RNNKind kind, const Tensor& dh0_, const Tensor& dc0_, const Tensor& xw0,
                                    const Tensor& h00, const Tensor& c00, const Tensor& w0, const Tensor& b0,
                                    const RecurrenceForward& f, bool reverse) {
  const Dims d = check_recurrence(kind, xw0, h00, c00, w0, b0, "recurrence_backward");
  const Shape seq{d.L, d.N, d.H};
  MG_CHECK(dh0_.defined() && dh0_.shape() == seq && dh0_.dtype() == xw0.dtype(), ShapeError,
           "recurrence_backward: expected dh {} of xw's dtype, got {}", shape_str(seq),
           dh0_.defined() ? shape_str(dh0_.shape()) : "an undefined tensor");
  MG_CHECK(!dc0_.defined() || (kind == RNNKind::LSTM && dc0_.shape() == seq && dc0_.dtype() == xw0.dtype()), ShapeError,
           "recurrence_backward: dc must be undefined or, for an LSTM, {} of xw's dtype", shape_str(seq));
  MG_CHECK(f.h.defined() && f.h.shape() == seq && (kind != RNNKind::LSTM || (f.c.defined() && f.c.shape() == seq)) &&
               ((kind != RNNKind::GRU && kind != RNNKind::LSTM) ||
                (f.saved.defined() && f.saved.shape() == Shape{d.L, d.N, 4 * d.H})),
           StateError, "recurrence_backward: the forward's saved tensors do not fit these inputs");
  const Tensor dhs = dh0_.contiguous(), dcs = dc0_.defined() ? dc0_.contiguous() : Tensor();
  const Tensor h0 = h00.contiguous(), w = w0.contiguous(), c0 = c00.defined() ? c00.contiguous() : Tensor();
  const Tensor fh = f.h.contiguous(), fc = f.c.defined() ? f.c.contiguous() : Tensor();
  const Tensor fs = f.saved.defined() ? f.saved.contiguous() : Tensor();
  const int64_t NH = d.N * d.H, GH = d.G * d.H;
  RecurrenceGrads g;
  g.dxw = empty({d.L, d.N, GH}, xw0.dtype());
  g.dw_hh = zeros({GH, d.H}, xw0.dtype());
  if (b0.defined()) g.db_hh = zeros({GH}, xw0.dtype());
  g.dh0 = zeros({d.N, d.H}, xw0.dtype());
  if (kind == RNNKind::LSTM) g.dc0 = zeros({d.N, d.H}, xw0.dtype());
  visit_float(xw0.dtype(), "recurrence_backward", [&]<class T>() {
    T* carry_h = g.dh0.data<T>();  // the carried dh, which ends as dh0
    T* carry_c = g.dc0.defined() ? g.dc0.data<T>() : nullptr;
    std::vector<T> dht(NH), dgh_buf(kind == RNNKind::GRU ? d.N * GH : 0);
    const T *ph = fh.data<T>(), *pw = w.data<T>();
    T* pdw = g.dw_hh.data<T>();
    T* pdb = g.db_hh.defined() ? g.db_hh.data<T>() : nullptr;
    for (int64_t s = d.L - 1; s >= 0; --s) {
      const int64_t t = reverse ? d.L - 1 - s : s, tp = reverse ? t + 1 : t - 1;
      const T* h_prev = s == 0 ? h0.data<T>() : ph + tp * NH;
      const T* h = ph + t * NH;
      T* dx = g.dxw.data<T>() + t * d.N * GH;
      T* dgh = kind == RNNKind::GRU ? dgh_buf.data() : dx;
      // By rows of the batch: dh_t, the gates' derivatives, then carried dh (+)= dgh W for those rows.
      by_pieces(d.N, d.N * GH * d.H, 1, [&](int64_t n0, int64_t n1) {
        for (int64_t k = n0 * d.H; k < n1 * d.H; ++k) dht[k] = dhs.data<T>()[t * NH + k] + carry_h[k];
        for (int64_t n = n0; n < n1; ++n) {
          const int64_t k = n * d.H;
          const T* sv = fs.defined() ? fs.data<T>() + (t * d.N + n) * 4 * d.H : nullptr;
          switch (kind) {
            case RNNKind::Tanh:
              tanh_back_row(d.H, dht.data() + k, h + k, dx + n * GH);
              break;
            case RNNKind::ReLU:
              relu_back_row(d.H, dht.data() + k, h + k, dx + n * GH);
              break;
            case RNNKind::GRU:
              gru_back_row(d.H, dht.data() + k, h_prev + k, sv, dx + n * GH, dgh + n * GH, carry_h + k);
              break;
            case RNNKind::LSTM: {
              const T* c_prev = s == 0 ? c0.data<T>() + k : fc.data<T>() + tp * NH + k;
              lstm_back_row(d.H, dht.data() + k, dcs.defined() ? dcs.data<T>() + t * NH + k : nullptr,
                            fc.data<T>() + t * NH + k, c_prev, sv, dx + n * GH, carry_c + k);
              break;
            }
          }
        }
        if (n1 > n0)
          blas::gemm(false, false, n1 - n0, d.H, GH, T(1), dgh + n0 * GH, GH, pw, d.H,
                     kind == RNNKind::GRU ? T(1) : T(0), carry_h + n0 * d.H, d.H);
      });
      if (d.N == 0) continue;
      // By rows of dW_hh: dW += dgh^T h_prev, db += the sum of dgh over the batch (n in order).
      by_pieces(GH, d.N * GH * d.H, 16, [&](int64_t j0, int64_t j1) {
        blas::gemm(true, false, j1 - j0, d.H, d.N, T(1), dgh + j0, GH, h_prev, d.H, T(1), pdw + j0 * d.H, d.H);
        if (pdb)
          for (int64_t n = 0; n < d.N; ++n)
            for (int64_t j = j0; j < j1; ++j) pdb[j] += dgh[n * GH + j];
      });
    }
  });
  return g;
}

}  // namespace mg
