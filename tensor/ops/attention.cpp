// Fused scaled dot-product attention: softmax(Q K^T / sqrt(d) [+ causal mask]) V in one pass per
// (batch, head), forward and backward side by side, in the spirit of FlashAttention.
//
// The composed path (nn::MultiheadAttention's textbook forward: matmul, scale, mask, softmax,
// matmul) writes and reads the whole (B, H, T, T) score and weight tensors, and keeps them for the
// backward: O(T^2) memory per head. Here each task owns one (batch, head) and walks the queries in
// blocks of kBlock rows. For a block it computes the scores against every key the block may see
// (S is kBlock x T, in cache), takes the softmax row by row, and multiplies by V. Nothing of size
// T x T is kept: the backward recomputes S from Q and K, and P from S, as the forward did. The
// per-row log-sum-exp is returned too (O(T)), as PyTorch's fused kernels return it.
// With a causal mask, a query block never computes scores for keys after its last query.
//
// Shapes: q (B, H, Tq, d), k and v (B, H, Tk, d) (any strides with the last one 1: the head-split
// view of a (B, T, H*d) projection is read in place), out (B, H, Tq, d) stored as (B, Tq, H, d),
// so merging the heads back is a free view.
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "minigrad/tensor/ops/attention.h"
#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/matmul.h"
#include "minigrad/tensor/ops/reduce.h"

#include "minigrad/tensor/blas.h"
#include "minigrad/tensor/fastmath.h"
#include "minigrad/tensor/parallel.h"

namespace mg {
namespace {

constexpr int64_t kBlock = 64;  // query rows per block

// Whether BLAS can read each (batch, head)'s (T, d) matrix of x in place: unit steps along d and
// rows at least d apart (BLAS requires ld >= d; an expanded or squeezed view may have a row stride
// of 0 or 1). The batch and head strides may be anything, 0 included: they only move the pointer.
bool rows_readable(const Tensor& x) {
  return (x.strides()[3] == 1 || x.size(3) == 1) && (x.size(2) <= 1 || x.strides()[2] >= x.size(3));
}

// A (B, H, T, d) operand whose rows BLAS can read, addressed per (batch, head).
// Addressed by the query side's (batch, head) index bh: with grouped-query attention, keys and values
// have H heads against the queries' qH = group * H, and query head h reads key head h / group.
struct Heads {
  Tensor t;
  int64_t B, H, T, d, sb, sh, ld, qH, group;
  explicit Heads(const Tensor& x, int64_t query_heads = 0) : t(rows_readable(x) ? x : x.contiguous()) {
    B = t.size(0), H = t.size(1), T = t.size(2), d = t.size(3);
    sb = t.strides()[0], sh = t.strides()[1], ld = t.strides()[2];
    if (T <= 1 || d == 1) ld = std::max(ld, d);  // a single row (or column) is read the same with any ld >= d
    qH = query_heads > 0 ? query_heads : H;
    group = H > 0 ? qH / H : 1;
  }
  template <class T>
  T* at(int64_t bh) const {
    T* base = t.data<T>();  // null when the operand has no elements (T or d is 0): nothing is read
    return base ? base + (bh / qH) * sb + ((bh % qH) / group) * sh : nullptr;
  }
};

// An uninitialised (B, H, T, d) tensor laid out as (B, T, H, d).
Tensor empty_heads(int64_t B, int64_t H, int64_t T, int64_t d, DType dt) {
  return empty({B, T, H, d}, dt).transpose(1, 2);
}

// The first n values of buf as the operand type In: buf itself, or rounded to bfloat16 into `round`.
template <class T, class In>
const In* operand(const std::vector<T>& buf, std::vector<In>& round, int64_t n) {
  if constexpr (std::is_same_v<T, In>) {
    return buf.data();
  } else {
    to_bfloat16(buf.data(), round.data(), n);
    return round.data();
  }
}

// One head's (T, d) operand as the products read it: in place, or, for bfloat16 operands read from a
// wider tensor (the heads of a (B, T, 3E) projection), copied once per head into a dense buffer, since
// oneDNN's fast kernels take only dense matrices (blas.cpp). Sets ld to the leading dimension to use.
template <class In>
const In* head_operand(const In* p, int64_t T, int64_t d, int64_t& ld, std::vector<In>& buf) {
  if constexpr (!std::is_same_v<In, bfloat16>) return p;
  const In* dense = blas::dense_rows(p, T, d, ld, buf);
  if (dense != p) ld = d;
  return dense;
}

// Keys query row qi may attend to: [0, limit).
int64_t key_limit(int64_t qi, int64_t Tk, bool causal) { return causal ? std::min(qi + 1, Tk) : Tk; }

// One row of scores s (kend of them, the first lim visible) into softmax probabilities, in place;
// returns lse = max + log sum exp. Forward and backward both call it, so the backward's P has the
// forward's bits. NOTE: the backward does not rebuild P as exp(s - lse): lse = max + log sum is
// rounded to max's ulp (1/128 at scores of 1e5 in float32), and that error would land on every p.
template <class T>
T softmax_row(T* s, int64_t lim, int64_t kend) {
  T mx = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < lim; ++j) mx = std::max(mx, s[j]);
  for (int64_t j = 0; j < lim; ++j) s[j] = fast::exp(s[j] - mx);
  for (int64_t j = lim; j < kend; ++j) s[j] = 0;  // masked: the future
  const T l = fast::sum8(s, lim);
  const T inv = T(1) / l;
  for (int64_t j = 0; j < lim; ++j) s[j] *= inv;
  return mx + std::log(l);
}

// Forward for one (batch, head):  S = scale Q K^T,  P = softmax_rows(S),  O = P V,  lse = log sum exp S
// T is the type of the sums, S, P, O and lse; In the operands': T itself, or bfloat16 under autocast,
// when P is rounded to bfloat16 (into Pb) before it multiplies V.
template <class T, class In = T>
void forward_head(const Heads& q, const Heads& k, const Heads& v, const Heads& o, T* lse, int64_t bh, bool causal,
                  T scale, std::vector<T>& S, std::vector<In>& Pb) {
  const int64_t Tq = q.T, Tk = k.T, d = q.d;
  thread_local std::vector<In> qbuf, kbuf, vbuf;
  int64_t qld = q.ld, kld = k.ld, vld = v.ld;
  const In *qp = head_operand(q.at<In>(bh), Tq, d, qld, qbuf), *kp = head_operand(k.at<In>(bh), Tk, d, kld, kbuf),
           *vp = head_operand(v.at<In>(bh), Tk, d, vld, vbuf);
  T* op = o.at<T>(bh);
  for (int64_t q0 = 0; q0 < Tq; q0 += kBlock) {
    const int64_t rows = std::min(kBlock, Tq - q0), kend = causal ? std::min(Tk, q0 + rows) : Tk;
    blas::gemm(false, true, rows, kend, d, scale, qp + q0 * qld, qld, kp, kld, T(0), S.data(), kend);
    for (int64_t i = 0; i < rows; ++i)
      lse[q0 + i] = softmax_row(S.data() + i * kend, key_limit(q0 + i, Tk, causal), kend);
    const In* p = operand(S, Pb, rows * kend);
    blas::gemm(false, false, rows, d, kend, T(1), p, kend, vp, vld, T(0), op + q0 * o.ld, o.ld);
  }
}

// What one backward reads and writes, each a (B, H, T, d) view: q, k, v and the forward's out o;
// the output gradient in float32 (dout) and as the products read it (gin: bfloat16 under autocast);
// and the gradients dq, dk, dv it writes.
struct BackwardViews {
  Heads q, k, v, o, dout, gin, dq, dk, dv;
};

// One thread's scratch for the backward: P and dP for a block of query rows, D per query row, and
// P and dS rounded to the products' type (empty when that is T itself).
template <class T, class In>
struct BackwardScratch {
  std::vector<T> P, dP, D;
  std::vector<In> Pb, dSb;
  BackwardScratch(int64_t Tq, int64_t Tk)
      : P(kBlock * std::max<int64_t>(Tk, 1)),
        dP(P.size()),
        D(Tq),
        Pb(std::is_same_v<T, In> ? 0 : P.size()),
        dSb(Pb.size()) {}
};

// Backward for one (batch, head) bh. With P recomputed from S (as the forward made it) and
// D_i = sum_c dO_ic O_ic:
//   dV = P^T dO      dP = dO V^T      dS = P * (dP - D)      dQ = scale dS K      dK = scale dS^T Q
// Under autocast (In = bfloat16) the products read bfloat16: Q, K, V, dO (as gin) and P and dS
// rounded into Pb and dSb; D is summed in float32 from the float32 dO and O.
// zero_kv: start dK and dV of this head's key/value head at 0 (false: add to them, for the later
// query heads of a group that share it).
template <class T, class In = T>
void backward_head(const BackwardViews& h, int64_t bh, bool causal, T scale, BackwardScratch<T, In>& s, bool zero_kv) {
  const int64_t Tq = h.q.T, Tk = h.k.T, d = h.q.d;
  thread_local std::vector<In> qbuf, kbuf, vbuf, gbuf;
  int64_t qld = h.q.ld, kld = h.k.ld, vld = h.v.ld, gld = h.gin.ld;
  const In *qp = head_operand(h.q.at<In>(bh), Tq, d, qld, qbuf), *kp = head_operand(h.k.at<In>(bh), Tk, d, kld, kbuf),
           *vp = head_operand(h.v.at<In>(bh), Tk, d, vld, vbuf), *gp = head_operand(h.gin.at<In>(bh), Tq, d, gld, gbuf);
  const T *op = h.o.at<T>(bh), *g32 = h.dout.at<T>(bh);
  T *dqp = h.dq.at<T>(bh), *dkp = h.dk.at<T>(bh), *dvp = h.dv.at<T>(bh);
  std::vector<T>&P = s.P, &dP = s.dP, &D = s.D;
  if (zero_kv)
    for (int64_t j = 0; j < Tk; ++j)
      for (int64_t c = 0; c < d; ++c) dkp[j * h.dk.ld + c] = 0, dvp[j * h.dv.ld + c] = 0;  // accumulated below
  for (int64_t i = 0; i < Tq; ++i) {
    T sum = 0;
    for (int64_t c = 0; c < d; ++c) sum += g32[i * h.dout.ld + c] * op[i * h.o.ld + c];
    D[i] = sum;
  }
  for (int64_t q0 = 0; q0 < Tq; q0 += kBlock) {
    const int64_t rows = std::min(kBlock, Tq - q0), kend = causal ? std::min(Tk, q0 + rows) : Tk;
    blas::gemm(false, true, rows, kend, d, scale, qp + q0 * qld, qld, kp, kld, T(0), P.data(), kend);
    for (int64_t i = 0; i < rows; ++i) softmax_row(P.data() + i * kend, key_limit(q0 + i, Tk, causal), kend);
    const In* g = gp + q0 * gld;
    blas::gemm(true, false, kend, d, rows, T(1), operand(P, s.Pb, rows * kend), kend, g, gld, T(1), dvp, h.dv.ld);
    blas::gemm(false, true, rows, kend, d, T(1), g, gld, vp, vld, T(0), dP.data(), kend);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < kend; ++j) dP[i * kend + j] = P[i * kend + j] * (dP[i * kend + j] - D[q0 + i]);
    const In* ds = operand(dP, s.dSb, rows * kend);
    blas::gemm(false, false, rows, d, kend, scale, ds, kend, kp, kld, T(0), dqp + q0 * h.dq.ld, h.dq.ld);
    blas::gemm(true, false, kend, d, rows, scale, ds, kend, qp + q0 * qld, qld, T(1), dkp, h.dk.ld);
  }
}

void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, std::string_view op) {
  MG_CHECK(q.defined() && k.defined() && v.defined(), StateError, "{}: an operand is undefined", op);
  MG_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, ShapeError,
           "{}: expected q, k, v of shape (batch, heads, seq, head_dim), got {}, {}, {}", op, shape_str(q.shape()),
           shape_str(k.shape()), shape_str(v.shape()));
  MG_CHECK(k.shape() == v.shape() && q.size(0) == k.size(0) && k.size(1) > 0 && q.size(1) % k.size(1) == 0 &&
               q.size(3) == k.size(3),
           ShapeError,
           "{}: q {}, k {} and v {} must share batch and head_dim, k's heads must divide q's (grouped-query "
           "attention), and k and v must have one shape",
           op, shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  MG_CHECK(q.dtype() == k.dtype() && k.dtype() == v.dtype(), DTypeError, "{}: dtype mismatch, q {}, k {}, v {}", op,
           dtype_name(q.dtype()), dtype_name(k.dtype()), dtype_name(v.dtype()));
  MG_CHECK((k.size(2) > 0 || q.size(2) == 0) && q.size(3) > 0, ShapeError,
           "{}: need at least one key (unless there are no queries) and head_dim >= 1, got q {} and k {}", op,
           shape_str(q.shape()), shape_str(k.shape()));
}

// The backward's inputs must be what the forward of these q (its shape `qshape`) made: dout and
// fwd.out of q's shape, fwd.lse (B, H, Tq), all of q's dtype.
void check_backward(const Tensor& dout, const Shape& qshape, DType dt, const AttentionForward& fwd,
                    std::string_view op) {
  MG_CHECK(dout.defined() && fwd.out.defined() && fwd.lse.defined(), StateError, "{}: an operand is undefined", op);
  const Shape lse_shape(qshape.begin(), qshape.end() - 1);
  MG_CHECK(dout.shape() == qshape && fwd.out.shape() == qshape && fwd.lse.shape() == lse_shape, ShapeError,
           "{}: dout {}, out {} and lse {} do not come from a forward with q of shape {}", op, shape_str(dout.shape()),
           shape_str(fwd.out.shape()), shape_str(fwd.lse.shape()), shape_str(qshape));
  MG_CHECK(dout.dtype() == dt && fwd.out.dtype() == dt && fwd.lse.dtype() == dt, DTypeError,
           "{}: dout {}, out {} and lse {} must all be {}", op, dtype_name(dout.dtype()), dtype_name(fwd.out.dtype()),
           dtype_name(fwd.lse.dtype()), dtype_name(dt));
  MG_CHECK(fwd.lse.is_contiguous(), ValueError, "{}: lse must be contiguous, as the forward made it", op);
}

// A given scale must be a finite number (PyTorch allows any float; 0 gives uniform weights).
void check_scale(std::optional<double> scale, std::string_view op) {
  MG_CHECK(!scale || std::isfinite(*scale), ValueError, "{}: scale must be finite, got {}", op, scale.value_or(0));
}

// Whether a kernel of these operands runs in bfloat16: if any of them is.
bool any_bf16(std::initializer_list<Tensor> ts) {
  for (const Tensor& t : ts)
    if (t.dtype() == DType::BFloat16) return true;
  return false;
}

// Calls f.template operator()<T, In>(): (float, float) or (double, double) natively, (float,
// bfloat16) for bfloat16 q, k and v (the callers convert).
template <class F>
void visit_attention(DType dt, bool bf16, std::string_view op, F&& f) {
  if (bf16) return f.template operator()<float, bfloat16>();
  visit_float(dt, op, [&]<class T>() { f.template operator()<T, T>(); });
}

// The fused forward over views q, k, v (bfloat16 ones give float32 out and lse).
AttentionForward forward_all(const Heads& hq, const Heads& hk, const Heads& hv, bool is_causal,
                             std::optional<double> scale) {
  const int64_t B = hq.B, H = hq.H, Tq = hq.T, Tk = hk.T, d = hq.d;
  const bool bf16 = hq.t.dtype() == DType::BFloat16;
  const DType dt = bf16 ? DType::Float32 : hq.t.dtype();
  Tensor out = empty_heads(B, H, Tq, d, dt), lse = empty({B, H, Tq}, dt);
  const Heads ho(out);
  visit_attention(dt, bf16, "scaled_dot_product_attention", [&]<class T, class In>() {
    const T sc = scale ? static_cast<T>(*scale) : T(1) / std::sqrt(static_cast<T>(d));
    T* pl = lse.data<T>();
    parallel_for(0, B * H, 1, [&](int64_t b0, int64_t b1) {
      std::vector<T> S(kBlock * std::max<int64_t>(Tk, 1));
      std::vector<In> Pb(std::is_same_v<T, In> ? 0 : S.size());
      for (int64_t bh = b0; bh < b1; ++bh) forward_head<T, In>(hq, hk, hv, ho, pl + bh * Tq, bh, is_causal, sc, S, Pb);
    });
  });
  return {out, lse};
}

// The fused backward, writing into the views dq, dk, dv (float32 for bfloat16 q, k, v).
void backward_all(const Heads& hq, const Heads& hk, const Heads& hv, const Heads& ho, const Tensor& dy,
                  const Heads& hdq, const Heads& hdk, const Heads& hdv, bool is_causal, std::optional<double> scale) {
  const bool bf16 = hq.t.dtype() == DType::BFloat16;
  const BackwardViews views{hq, hk, hv, ho, Heads(dy), Heads(bf16 ? dy.to(DType::BFloat16) : dy), hdq, hdk, hdv};
  visit_attention(dy.dtype(), bf16, "scaled_dot_product_attention backward", [&]<class T, class In>() {
    const T sc = scale ? static_cast<T>(*scale) : T(1) / std::sqrt(static_cast<T>(hq.d));
    // One task per (batch, key/value head): it runs the group of query heads that share that head
    // one after another, adding into its dK and dV, so no two tasks write the same rows and the
    // order of the sums does not depend on the threads.
    const int64_t group = hk.group;
    parallel_for(0, hq.B * hk.H, 1, [&](int64_t t0, int64_t t1) {
      BackwardScratch<T, In> scratch(hq.T, hk.T);
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t j = 0; j < group; ++j)
          backward_head<T, In>(views, (t / hk.H) * hq.H + (t % hk.H) * group + j, is_causal, sc, scratch, j == 0);
    });
  });
}

}  // namespace

// q (B, H, Tq, d), k and v (B, Hkv, Tk, d) -> out (B, H, Tq, d), lse (B, H, Tq)
AttentionForward attention_forward(const Tensor& q0, const Tensor& k0, const Tensor& v0, bool is_causal,
                                   std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  if (!q0.defined() || !k0.defined() || !v0.defined()) check_qkv(q0, k0, v0, op);  // the StateError
  const bool bf16 = any_bf16({q0, k0, v0});
  const Tensor q = bf16 ? bf16_operand(q0, op) : q0, k = bf16 ? bf16_operand(k0, op) : k0,
               v = bf16 ? bf16_operand(v0, op) : v0;
  check_qkv(q, k, v, op);
  check_scale(scale, op);
  return forward_all(Heads(q), Heads(k, q.size(1)), Heads(v, q.size(1)), is_causal, scale);
}

// dq, dk, dv: the shapes of q, k, v, stored with the heads interleaved like `out`. With grouped
// heads, the query heads of a group add into their key/value head's dk and dv.
std::array<Tensor, 3> attention_backward(const Tensor& dout, const Tensor& q0, const Tensor& k0, const Tensor& v0,
                                         const AttentionForward& fwd, bool is_causal, std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention backward";
  if (!q0.defined() || !k0.defined() || !v0.defined()) check_qkv(q0, k0, v0, op);  // the StateError
  const bool bf16 = any_bf16({q0, k0, v0});
  const Tensor q = bf16 ? bf16_operand(q0, op) : q0, k = bf16 ? bf16_operand(k0, op) : k0,
               v = bf16 ? bf16_operand(v0, op) : v0;
  check_qkv(q, k, v, op);
  check_backward(dout, q.shape(), bf16 ? DType::Float32 : q.dtype(), fwd, op);
  check_scale(scale, op);
  const Heads hq(q), hk(k, hq.H), hv(v, hq.H);
  Tensor dq = empty_heads(hq.B, hq.H, hq.T, hq.d, dout.dtype()), dk = empty_heads(hk.B, hk.H, hk.T, hk.d, dout.dtype()),
         dv = empty_heads(hv.B, hv.H, hv.T, hv.d, dout.dtype());
  backward_all(hq, hk, hv, Heads(fwd.out), dout, Heads(dq), Heads(dk, hq.H), Heads(dv, hq.H), is_causal, scale);
  return {dq, dk, dv};
}

namespace {
// Head h of block i (0 = Q, 1 = K, 2 = V) of a (B, T, 3E) projection, as a (B, H, T, E/H) view.
Heads qkv_heads(const Tensor& qkv, int64_t num_heads, int64_t i) {
  const int64_t B = qkv.size(0), T = qkv.size(1), E = qkv.size(2) / 3;
  return Heads(qkv.narrow(2, i * E, E).view({B, T, num_heads, E / num_heads}).transpose(1, 2));
}
void check_qkv_projection(const Tensor& qkv, int64_t num_heads) {
  MG_CHECK(qkv.defined(), StateError, "self_attention_qkv: the input is undefined");
  MG_CHECK(
      num_heads > 0 && qkv.dim() == 3 && qkv.size(2) > 0 && qkv.size(2) % 3 == 0 && (qkv.size(2) / 3) % num_heads == 0,
      ShapeError,
      "self_attention_qkv: expected (batch, seq, 3 * embed_dim) with embed_dim divisible by {} heads, got {}",
      num_heads, shape_str(qkv.shape()));
  MG_CHECK(is_floating_point(qkv.dtype()), DTypeError, "self_attention_qkv: expected a floating input, got {}",
           dtype_name(qkv.dtype()));
}
}  // namespace

// qkv (B, T, 3E) -> out (B, H, T, E/H), lse (B, H, T)
AttentionForward attention_qkv_forward(const Tensor& qkv0, int64_t num_heads, bool is_causal) {
  check_qkv_projection(qkv0, num_heads);
  const bool bf16 = qkv0.dtype() == DType::BFloat16;
  const Tensor qkv = bf16 ? bf16_operand(qkv0, "self_attention_qkv").contiguous() : qkv0.contiguous();
  return forward_all(qkv_heads(qkv, num_heads, 0), qkv_heads(qkv, num_heads, 1), qkv_heads(qkv, num_heads, 2),
                     is_causal, std::nullopt);
}

// dout (B, H, T, E/H) -> dqkv (B, T, 3E)
Tensor attention_qkv_backward(const Tensor& dout, const Tensor& qkv0, int64_t num_heads, const AttentionForward& fwd,
                              bool is_causal) {
  check_qkv_projection(qkv0, num_heads);
  const int64_t B = qkv0.size(0), T = qkv0.size(1), E = qkv0.size(2) / 3;
  const bool bf16 = qkv0.dtype() == DType::BFloat16;
  check_backward(dout, {B, num_heads, T, E / num_heads}, bf16 ? DType::Float32 : qkv0.dtype(), fwd,
                 "self_attention_qkv backward");
  const Tensor qkv = bf16 ? bf16_operand(qkv0, "self_attention_qkv backward").contiguous() : qkv0.contiguous();
  Tensor dqkv = empty(qkv.shape(), dout.dtype());
  backward_all(qkv_heads(qkv, num_heads, 0), qkv_heads(qkv, num_heads, 1), qkv_heads(qkv, num_heads, 2), Heads(fwd.out),
               dout, qkv_heads(dqkv, num_heads, 0), qkv_heads(dqkv, num_heads, 1), qkv_heads(dqkv, num_heads, 2),
               is_causal, std::nullopt);
  return dqkv;
}

// ---------------------------------------------------------------- rotary position embedding

std::pair<Tensor, Tensor> rotary_tables(int64_t head_dim, int64_t max_len, double base, DType dtype) {
  const OpScope scope("rotary_tables");  // the allocator's errors name rotary_tables
  MG_CHECK(head_dim > 0 && head_dim % 2 == 0, ValueError, "rotary_tables: head_dim must be even and positive, got {}",
           head_dim);
  MG_CHECK(max_len >= 0, ValueError, "rotary_tables: max_len must be >= 0, got {}", max_len);
  MG_CHECK(std::isfinite(base) && base > 0, ValueError, "rotary_tables: base must be finite and positive, got {}",
           base);
  MG_CHECK(is_floating(dtype), DTypeError, "rotary_tables: dtype must be float32 or float64, got {}",
           dtype_name(dtype));
  const int64_t half = head_dim / 2;
  MG_CHECK(max_len <= std::numeric_limits<int64_t>::max() / half, ShapeError,
           "rotary_tables: {} positions of {} angles overflow", max_len, half);
  Tensor c = empty({max_len, half}, DType::Float64), s = empty({max_len, half}, DType::Float64);
  double *pc = c.data<double>(), *ps = s.data<double>();
  for (int64_t i = 0; i < half; ++i) {
    const double theta = 1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(head_dim));
    for (int64_t t = 0; t < max_len; ++t) {
      const double angle = static_cast<double>(t) * theta;
      pc[t * half + i] = std::cos(angle), ps[t * half + i] = std::sin(angle);
    }
  }
  return {c.to(dtype), s.to(dtype)};
}

namespace {
// One row of d = 2 half features rotated pair by pair (the layout a compile-time constant, so the
// half-split loop runs over unit strides and vectorises):
//   pair i = features (2i, 2i+1) when kInterleaved, else (i, i + half)
template <bool kInterleaved, class T>
void rotate_row(const T* a, const T* c, const T* s, T* o, int64_t half, int64_t cstep, int64_t sstep, T sgn) {
  constexpr int64_t step = kInterleaved ? 2 : 1;
  const int64_t other = kInterleaved ? 1 : half;
  for (int64_t i = 0; i < half; ++i) {
    const T xa = a[i * step], xb = a[i * step + other], ci = c[i * cstep], si = sgn * s[i * sstep];
    o[i * step] = xa * ci - xb * si;
    o[i * step + other] = xa * si + xb * ci;
  }
}

// out = x rotated by +angle (sign 1) or -angle (sign -1), per pair:
//   out_a = x_a cos - sign x_b sin      out_b = sign x_a sin + x_b cos
Tensor rotate_pairs(const Tensor& x0, const Tensor& cos0, const Tensor& sin0, bool interleaved, int sign,
                    std::string_view op) {
  MG_CHECK(x0.defined() && cos0.defined() && sin0.defined(), StateError, "{}: an operand is undefined", op);
  const auto is_bf16 = [](const Tensor& t) { return t.dtype() == DType::BFloat16; };
  if (is_bf16(x0) || is_bf16(cos0) || is_bf16(sin0)) {
    // bfloat16 anywhere (a bfloat16 x, bfloat16 tables, or both; or bfloat16 tables rotating back the
    // float32 gradient of a bfloat16 x): every operand widened (exact), rotated in float32, and the
    // result rounded to bfloat16 once if x was bfloat16
    const auto is_16_or_32 = [](DType t) { return t == DType::BFloat16 || t == DType::Float32; };
    MG_CHECK(is_16_or_32(x0.dtype()) && is_16_or_32(cos0.dtype()) && is_16_or_32(sin0.dtype()), DTypeError,
             "{}: input {}, cos {} and sin {} must be bfloat16 or float32 when one of them is bfloat16", op,
             dtype_name(x0.dtype()), dtype_name(cos0.dtype()), dtype_name(sin0.dtype()));
    const Tensor r = rotate_pairs(widened(x0), widened(cos0), widened(sin0), interleaved, sign, op);
    return x0.dtype() == DType::BFloat16 ? r.to(DType::BFloat16) : r;
  }
  MG_CHECK(is_floating(x0.dtype()), DTypeError, "{}: expected a float32, float64 or bfloat16 input, got {}", op,
           dtype_name(x0.dtype()));
  MG_CHECK(cos0.dtype() == x0.dtype() && sin0.dtype() == x0.dtype(), DTypeError,
           "{}: cos {} and sin {} must have the input's dtype {}", op, dtype_name(cos0.dtype()),
           dtype_name(sin0.dtype()), dtype_name(x0.dtype()));
  MG_CHECK(x0.dim() >= 1 && x0.size(-1) % 2 == 0, ShapeError,
           "{}: expected an input (..., seq, head_dim) with an even head_dim, got {}", op, shape_str(x0.shape()));
  const int64_t d = x0.size(-1), half = d / 2;
  if (!interleaved && half > 0 && cos0.dim() >= 1 && cos0.size(-1) == d && sin0.dim() >= 1 && sin0.size(-1) == d) {
    // Hugging Face's tables, (..., T, d) = cat(freqs, freqs): both halves hold the same angles. Read
    // their first half, after checking that they are that (another table of width d is an error).
    for (const Tensor* t : {&cos0, &sin0})
      MG_CHECK(sum(ne(t->narrow(-1, 0, half), t->narrow(-1, half, half)).to(DType::Int64)).item<int64_t>() == 0,
               ValueError,
               "{}: {} has width {} = head_dim, but its two halves differ, so it is not Hugging Face's "
               "cat(freqs, freqs) table; give (..., seq, head_dim / 2) tables",
               op, t == &cos0 ? "cos" : "sin", d);
    return rotate_pairs(x0, cos0.narrow(-1, 0, half), sin0.narrow(-1, 0, half), interleaved, sign, op);
  }
  Shape table = x0.shape();
  table.back() = half;                // (..., T, d/2)
  auto fits = [&](const Tensor& t) {  // broadcasts to (..., T, d/2) without changing it
    if (t.dim() < 1 || t.dim() > static_cast<int64_t>(table.size())) return false;
    for (int64_t k = 1; k <= t.dim(); ++k)
      if (t.size(-k) != 1 && t.size(-k) != table[table.size() - static_cast<size_t>(k)]) return false;
    return true;
  };
  MG_CHECK(cos0.shape() == sin0.shape() && fits(cos0), ShapeError,
           "{}: cos {} and sin {} must have one shape that broadcasts to {} (input {}: one angle per pair of "
           "features)",
           op, shape_str(cos0.shape()), shape_str(sin0.shape()), shape_str(table), shape_str(x0.shape()));
  const Tensor x = x0.contiguous(), cs = cos0.expand(table), sn = sin0.expand(table);
  Tensor out = empty(x.shape(), x.dtype());
  const int64_t rows = half == 0 ? 0 : x.numel() / d, nd = x.dim() - 1;
  const Shape& rs = x.shape();
  visit_float(x.dtype(), op, [&]<class T>() {
    const T *px = x.data<T>(), *pc = cs.data<T>(), *ps = sn.data<T>();
    T* po = out.data<T>();
    const int64_t cstep = cs.strides().back(), sstep = sn.strides().back();
    const T sgn = static_cast<T>(sign);
    parallel_for(0, rows, grain_for(d), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t co = 0, so = 0;  // the table rows of row r: its index over x's leading dims
        for (int64_t k = nd - 1, rem = r; k >= 0; --k) {
          const int64_t ix = rem % rs[k];
          rem /= rs[k];
          co += ix * cs.strides()[k], so += ix * sn.strides()[k];
        }
        const T *a = px + r * d, *c = pc + co, *s = ps + so;
        T* o = po + r * d;
        if (interleaved)
          rotate_row<true>(a, c, s, o, half, cstep, sstep, sgn);
        else
          rotate_row<false>(a, c, s, o, half, cstep, sstep, sgn);
      }
    });
  });
  return out;
}
}  // namespace

// x (..., T, d), cos and sin (..., T, d/2) -> (..., T, d)
Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  return rotate_pairs(x, cos, sin, interleaved, 1, "rotary_embedding");
}

// dy (..., T, d) -> dx (..., T, d): the transpose of a rotation is the rotation back
Tensor rotary_embedding_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin, bool interleaved) {
  return rotate_pairs(dy, cos, sin, interleaved, -1, "rotary_embedding_backward");
}

}  // namespace mg
