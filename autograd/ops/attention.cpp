// Fused scaled dot-product attention: softmax(Q K^T / sqrt(d) [+ causal mask]) V in one pass per
// (batch, head), forward and backward side by side, in the spirit of FlashAttention.
//
// The composed path in nn::MultiheadAttention (matmul, scale, mask, softmax, matmul) writes and
// reads the whole (B, H, T, T) score and weight tensors, and keeps them for the backward: O(T^2)
// memory per head. Here each task owns one (batch, head) and walks the queries in blocks of
// kBlock rows. For a block it computes the scores against every key the block may see (S is
// kBlock x T, in cache), takes the softmax row by row, and multiplies by V. Only the per-row
// log-sum-exp is kept for the backward, which recomputes P from Q, K and it: O(T) extra memory.
// With a causal mask, a query block never computes scores for keys after its last query.
//
// Shapes: q (B, H, Tq, d), k and v (B, H, Tk, d) (any strides with the last one 1: the head-split
// view of a (B, T, H*d) projection is read in place), out (B, H, Tq, d) stored as (B, Tq, H, d),
// so merging the heads back is a free view.
#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "tensor/blas.h"
#include "tensor/fastmath.h"
#include "tensor/parallel.h"

namespace mg {
namespace {

constexpr int64_t kBlock = 64;  // query rows per block

// A (B, H, T, d) operand with unit last stride, addressed per (batch, head).
struct Heads {
  Tensor t;
  int64_t B, H, T, d, sb, sh, ld;
  explicit Heads(const Tensor& x) : t(x.strides()[3] == 1 ? x : x.contiguous()) {
    B = t.size(0), H = t.size(1), T = t.size(2), d = t.size(3);
    sb = t.strides()[0], sh = t.strides()[1], ld = t.strides()[2];
  }
  template <class T> T* at(int64_t bh) const { return t.data<T>() + (bh / H) * sb + (bh % H) * sh; }
};

// An uninitialised (B, H, T, d) tensor laid out as (B, T, H, d).
Tensor empty_heads(int64_t B, int64_t H, int64_t T, int64_t d, DType dt) { return empty({B, T, H, d}, dt).transpose(1, 2); }

// Keys query row qi may attend to: [0, limit).
int64_t key_limit(int64_t qi, int64_t Tk, bool causal) { return causal ? std::min(qi + 1, Tk) : Tk; }

// Forward for one (batch, head):  S = scale Q K^T,  P = softmax_rows(S),  O = P V,  lse = log sum exp S
template <class T>
void forward_head(const Heads& q, const Heads& k, const Heads& v, const Heads& o, T* lse, int64_t bh, bool causal, T scale,
                  std::vector<T>& S) {
  const int64_t Tq = q.T, Tk = k.T, d = q.d;
  const T *qp = q.at<T>(bh), *kp = k.at<T>(bh), *vp = v.at<T>(bh);
  T* op = o.at<T>(bh);
  for (int64_t q0 = 0; q0 < Tq; q0 += kBlock) {
    const int64_t rows = std::min(kBlock, Tq - q0), kend = causal ? std::min(Tk, q0 + rows) : Tk;
    blas::gemm(false, true, rows, kend, d, scale, qp + q0 * q.ld, q.ld, kp, k.ld, T(0), S.data(), kend);
    for (int64_t i = 0; i < rows; ++i) {
      T* s = S.data() + i * kend;
      const int64_t lim = key_limit(q0 + i, Tk, causal);
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < lim; ++j) mx = std::max(mx, s[j]);
      for (int64_t j = 0; j < lim; ++j) s[j] = fast::exp(s[j] - mx);
      for (int64_t j = lim; j < kend; ++j) s[j] = 0;  // masked: the future
      const T l = fast::sum8(s, lim);
      const T inv = T(1) / l;
      for (int64_t j = 0; j < lim; ++j) s[j] *= inv;
      lse[q0 + i] = mx + std::log(l);
    }
    blas::gemm(false, false, rows, d, kend, T(1), S.data(), kend, vp, v.ld, T(0), op + q0 * o.ld, o.ld);
  }
}

// Backward for one (batch, head). With P recomputed from lse and D_i = sum_c dO_ic O_ic:
//   dV = P^T dO      dP = dO V^T      dS = P * (dP - D)      dQ = scale dS K      dK = scale dS^T Q
template <class T>
void backward_head(const Heads& q, const Heads& k, const Heads& v, const Heads& o, const Heads& dout, const T* lse,
                   const Heads& dq, const Heads& dk, const Heads& dv, int64_t bh, bool causal, T scale, std::vector<T>& P,
                   std::vector<T>& dP, std::vector<T>& D) {
  const int64_t Tq = q.T, Tk = k.T, d = q.d;
  const T *qp = q.at<T>(bh), *kp = k.at<T>(bh), *vp = v.at<T>(bh), *op = o.at<T>(bh), *gp = dout.at<T>(bh);
  T *dqp = dq.at<T>(bh), *dkp = dk.at<T>(bh), *dvp = dv.at<T>(bh);
  for (int64_t j = 0; j < Tk; ++j)
    for (int64_t c = 0; c < d; ++c) dkp[j * dk.ld + c] = 0, dvp[j * dv.ld + c] = 0;  // accumulated below
  for (int64_t i = 0; i < Tq; ++i) {
    T s = 0;
    for (int64_t c = 0; c < d; ++c) s += gp[i * dout.ld + c] * op[i * o.ld + c];
    D[i] = s;
  }
  for (int64_t q0 = 0; q0 < Tq; q0 += kBlock) {
    const int64_t rows = std::min(kBlock, Tq - q0), kend = causal ? std::min(Tk, q0 + rows) : Tk;
    blas::gemm(false, true, rows, kend, d, scale, qp + q0 * q.ld, q.ld, kp, k.ld, T(0), P.data(), kend);
    for (int64_t i = 0; i < rows; ++i) {
      T* p = P.data() + i * kend;
      const int64_t lim = key_limit(q0 + i, Tk, causal);
      const T l = lse[q0 + i];
      for (int64_t j = 0; j < lim; ++j) p[j] = fast::exp(p[j] - l);
      for (int64_t j = lim; j < kend; ++j) p[j] = 0;
    }
    const T* g = gp + q0 * dout.ld;
    blas::gemm(true, false, kend, d, rows, T(1), P.data(), kend, g, dout.ld, T(1), dvp, dv.ld);
    blas::gemm(false, true, rows, kend, d, T(1), g, dout.ld, vp, v.ld, T(0), dP.data(), kend);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < kend; ++j) dP[i * kend + j] = P[i * kend + j] * (dP[i * kend + j] - D[q0 + i]);
    blas::gemm(false, false, rows, d, kend, scale, dP.data(), kend, kp, k.ld, T(0), dqp + q0 * dq.ld, dq.ld);
    blas::gemm(true, false, kend, d, rows, scale, dP.data(), kend, qp + q0 * q.ld, q.ld, T(1), dkp, dk.ld);
  }
}


// The fused forward over views q, k, v; returns (out, lse).
std::pair<Tensor, Tensor> attention_forward(const Heads& hq, const Heads& hk, const Heads& hv, bool is_causal) {
  const int64_t B = hq.B, H = hq.H, Tq = hq.T, Tk = hk.T, d = hq.d;
  Tensor out = empty_heads(B, H, Tq, d, hq.t.dtype()), lse = empty({B, H, Tq}, hq.t.dtype());
  const Heads ho(out);
  visit_float(hq.t.dtype(), "scaled_dot_product_attention", [&]<class T>() {
    const T scale = T(1) / std::sqrt(static_cast<T>(d));
    T* pl = lse.data<T>();
    parallel_for(0, B * H, 1, [&](int64_t b0, int64_t b1) {
      std::vector<T> S(kBlock * std::max<int64_t>(Tk, 1));
      for (int64_t bh = b0; bh < b1; ++bh) forward_head<T>(hq, hk, hv, ho, pl + bh * Tq, bh, is_causal, scale, S);
    });
  });
  return {out, lse};
}

// The fused backward, writing into the views dq, dk, dv.
void attention_backward(const Heads& hq, const Heads& hk, const Heads& hv, const Heads& ho, const Tensor& lse, const Tensor& dy,
                        const Heads& hdq, const Heads& hdk, const Heads& hdv, bool is_causal) {
  const Heads hg(dy);
  visit_float(dy.dtype(), "scaled_dot_product_attention backward", [&]<class T>() {
    const T scale = T(1) / std::sqrt(static_cast<T>(hq.d));
    const T* pl = lse.data<T>();
    parallel_for(0, hq.B * hq.H, 1, [&](int64_t b0, int64_t b1) {
      std::vector<T> P(kBlock * std::max<int64_t>(hk.T, 1)), dP(P.size()), D(hq.T);
      for (int64_t bh = b0; bh < b1; ++bh)
        backward_head<T>(hq, hk, hv, ho, hg, pl + bh * hq.T, hdq, hdk, hdv, bh, is_causal, scale, P, dP, D);
    });
  });
}

}  // namespace

Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v, bool is_causal) {
  MG_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, ShapeError,
           "scaled_dot_product_attention: expected q, k, v of shape (batch, heads, seq, head_dim), got {}, {}, {}",
           shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  MG_CHECK(k.shape() == v.shape() && q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3), ShapeError,
           "scaled_dot_product_attention: q {}, k {} and v {} must share batch, heads and head_dim, and k and v their shape",
           shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  MG_CHECK(q.dtype() == k.dtype() && k.dtype() == v.dtype(), DTypeError, "scaled_dot_product_attention: dtype mismatch");
  MG_CHECK(k.size(2) > 0 && q.size(3) > 0, ShapeError,
           "scaled_dot_product_attention: need at least one key and head_dim >= 1, got k {}", shape_str(k.shape()));
  const Heads hq(q.data()), hk(k.data()), hv(v.data());
  auto [out, lse] = attention_forward(hq, hk, hv, is_causal);
  return record("scaled_dot_product_attention", out, {q, k, v},
                [hq, hk, hv, ho = Heads(out), lse, is_causal](const Tensor& dy, const Node&) -> TensorList {
                  Tensor dq = empty_heads(hq.B, hq.H, hq.T, hq.d, dy.dtype()), dk = empty_heads(hk.B, hk.H, hk.T, hk.d, dy.dtype()),
                         dv = empty_heads(hv.B, hv.H, hv.T, hv.d, dy.dtype());
                  attention_backward(hq, hk, hv, ho, lse, dy, Heads(dq), Heads(dk), Heads(dv), is_causal);
                  return {dq, dk, dv};
                });
}

// The same attention reading q, k, v from one (B, T, 3E) projection [Q | K | V] (self-attention
// with the three products computed by one GEMM). Its gradient is one (B, T, 3E) tensor with
// dQ, dK, dV written into their column blocks: nothing to split or add up.
Variable self_attention_qkv(const Variable& qkv, int64_t num_heads, bool is_causal) {
  MG_CHECK(num_heads > 0 && qkv.dim() == 3 && qkv.size(1) > 0 && qkv.size(2) > 0 && qkv.size(2) % (3 * num_heads) == 0, ShapeError,
           "self_attention_qkv: expected (batch, seq, 3 * embed_dim) with embed_dim divisible by {} heads, got {}", num_heads,
           shape_str(qkv.shape()));
  const int64_t E = qkv.size(2) / 3;
  auto heads_of = [E, num_heads](const Tensor& t, int64_t i) {
    const int64_t B = t.size(0), T = t.size(1);
    return Heads(t.narrow(2, i * E, E).view({B, T, num_heads, E / num_heads}).transpose(1, 2));
  };
  const Tensor x = qkv.data().contiguous();
  const Heads hq = heads_of(x, 0), hk = heads_of(x, 1), hv = heads_of(x, 2);
  auto [out, lse] = attention_forward(hq, hk, hv, is_causal);
  return record("self_attention_qkv", out, {qkv},
                [hq, hk, hv, ho = Heads(out), lse, is_causal, heads_of, shape = x.shape()](const Tensor& dy, const Node&) -> TensorList {
                  Tensor dqkv = empty(shape, dy.dtype());
                  attention_backward(hq, hk, hv, ho, lse, dy, heads_of(dqkv, 0), heads_of(dqkv, 1), heads_of(dqkv, 2), is_causal);
                  return {dqkv};
                });
}

}  // namespace mg
