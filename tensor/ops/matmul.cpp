// Matrix products on OpenBLAS (through tensor/blas.h). Each 2-D operand is handed to the GEMM as it
// lies in memory: a row-major matrix, or a transposed view of one (the transpose flag), so
// .transpose(-2, -1) costs no copy. Only layouts BLAS cannot describe (e.g. a column slice with two strides != 1) are
// copied.
//
// Threads: OpenBLAS itself runs single-threaded (tensor/parallel.cpp) and minigrad splits the
// work over its one oneTBB pool: a batch of products is shared out by batch entry, a single large
// product by blocks of rows of the output. Two pools never compete for the cores, and the split
// is fixed for a given thread count, so the bits are too.
#include "minigrad/tensor/ops/matmul.h"

#include "minigrad/tensor/blas.h"
#include "minigrad/tensor/parallel.h"

namespace mg {
namespace {

// How BLAS should read one (rows, cols) matrix at some offset with strides (s0, s1).
struct BlasMat {
  bool trans;  // stored as the transpose: element (i, j) at j * ld + i
  int64_t ld;
};

bool blas_layout(int64_t rows, int64_t cols, int64_t s0, int64_t s1, BlasMat& m) {
  if ((s1 == 1 || cols == 1) && s0 >= std::max<int64_t>(1, cols)) {
    m = {false, s0};
    return true;
  }
  if ((s0 == 1 || rows == 1) && s1 >= std::max<int64_t>(1, rows)) {
    m = {true, s1};
    return true;
  }
  return false;
}

// One single-threaded GEMM: C (n, m) = A (n, k) @ B (k, m) + beta C, C row-major with leading
// dim m. beta = 1 adds the product to what C holds (a bias already written there). In is the
// operands' type, T the result's: the same, or bfloat16 operands with a float32 result.
template <class T, class In = T>
void gemm1(BlasMat a, BlasMat b, int64_t n, int64_t m, int64_t k, const In* pa, const In* pb, T* pc, T beta = 0) {
  blas::gemm(a.trans, b.trans, n, m, k, T(1), pa, a.ld, pb, b.ld, beta, pc, m);
}

// Below this many multiply-adds a product stays on one thread.
constexpr int64_t kParallelGemmWork = 1 << 18;

// C = A @ B, split into one block of rows per thread when it is large enough. Row block r of C
// needs row block r of A: rows start at i*ld (no transpose) or column i (transposed storage).
template <class T, class In = T>
void gemm(BlasMat a, BlasMat b, int64_t n, int64_t m, int64_t k, const In* pa, const In* pb, T* pc, T beta = 0) {
  const int64_t threads = get_num_threads();
  if (threads == 1 || static_cast<double>(n) * m * k < kParallelGemmWork || n < 2 * threads) {
    gemm1<T, In>(a, b, n, m, k, pa, pb, pc, beta);
    return;
  }
  const int64_t rows = (n + threads - 1) / threads;
  tbb::parallel_for(
      int64_t{0}, threads,
      [&](int64_t t) {
        const int64_t r0 = t * rows, r1 = std::min(n, r0 + rows);
        if (r0 >= r1) return;
        const In* a0 = !a.trans ? pa + r0 * a.ld : pa + r0;
        gemm1<T, In>(a, b, r1 - r0, m, k, a0, pb, pc + r0 * m, beta);
      },
      tbb::static_partitioner());
}

// Calls f.template operator()<T, In>() for the product's result and operand types: (float, float)
// or (double, double) natively, (float, bfloat16) for a bfloat16 product.
template <class F>
decltype(auto) visit_product(DType dt, bool bf16, std::string_view op, F&& f) {
  if (bf16) return f.template operator()<float, bfloat16>();
  return visit_float(dt, op, [&]<class T>() { return f.template operator()<T, T>(); });
}

// The products of a batched matmul, C[i] = A[i] B[i] for every index i of `batch` (A's and B's
// batch strides broadcast, 0 where shared; C dense): one GEMM over all rows when every A[i] is a
// block of one row-major matrix and B is shared, else one GEMM per product shared out over the pool.
template <class T, class In>
void batched_gemm(const BlasMat& la, const BlasMat& lb, int64_t n, int64_t m, int64_t k, const In* pa, const In* pb,
                  T* pc, const Shape& batch, const Strides& ast2, const Strides& bst2) {
  const int64_t nb = numel_of(batch);
  // (B..., n, k) @ (k, m) with a row-major A: one GEMM over all B*n rows.
  bool b_shared = true, a_flat = !la.trans;
  for (size_t d = 0; d < batch.size(); ++d) b_shared = b_shared && bst2[d] == 0;
  int64_t expect = n * la.ld;
  for (size_t d = batch.size(); d-- > 0;) {
    if (batch[d] == 1) continue;
    a_flat = a_flat && ast2[d] == expect;
    expect *= batch[d];
  }
  if (nb > 1 && b_shared && a_flat) {
    gemm<T, In>(la, lb, nb * n, m, k, pa, pb, pc);
  } else if (nb == 1) {
    gemm<T, In>(la, lb, n, m, k, pa, pb, pc);
  } else {
    // Many products (attention's B*H heads): one single-threaded GEMM per batch entry, shared
    // out over the pool.
    auto offsets = [&](int64_t i, int64_t& oa, int64_t& ob) {
      oa = ob = 0;
      for (size_t d = batch.size(); d-- > 0;) {
        const int64_t id = i % batch[d];
        i /= batch[d];
        oa += id * ast2[d], ob += id * bst2[d];
      }
    };
    const double work = static_cast<double>(n) * m * k;  // per product; a double cannot overflow here
    parallel_for(0, nb, work >= kParallelGemmWork ? 1 : kParallelGemmWork / static_cast<int64_t>(work),
                 [&](int64_t i0, int64_t i1) {
                   for (int64_t i = i0; i < i1; ++i) {
                     int64_t oa, ob;
                     offsets(i, oa, ob);
                     gemm1<T, In>(la, lb, n, m, k, pa + oa, pb + ob, pc + i * n * m);
                   }
                 });
  }
}

}  // namespace

Tensor bf16_operand(const Tensor& t, std::string_view op) {
  MG_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::BFloat16, DTypeError,
           "{}: a bfloat16 product takes float32 or bfloat16 operands, got {}", op, dtype_name(t.dtype()));
  return t.to(DType::BFloat16);
}

Tensor linear(const Tensor& x0, const Tensor& w0, const Tensor& bias) {
  MG_CHECK(x0.defined() && w0.defined(), StateError, "linear: an operand is undefined");
  MG_CHECK(w0.dim() == 2, ShapeError, "linear: weight must be 2-D (out, in), got shape {}", shape_str(w0.shape()));
  MG_CHECK(x0.dim() >= 1 && x0.size(-1) == w0.size(1), ShapeError,
           "linear: input of shape {} does not fit weight of shape {} (expected last dim {})", shape_str(x0.shape()),
           shape_str(w0.shape()), w0.size(1));
  const bool bf16 = x0.dtype() == DType::BFloat16 || w0.dtype() == DType::BFloat16;
  MG_CHECK(bf16 || (x0.dtype() == w0.dtype() && (!bias.defined() || bias.dtype() == w0.dtype())), DTypeError,
           "linear: dtype mismatch between input {}, weight {}{}", dtype_name(x0.dtype()), dtype_name(w0.dtype()),
           bias.defined() ? fmt::format(" and bias {}", dtype_name(bias.dtype())) : "");
  MG_CHECK(!bf16 || !bias.defined() || bias.dtype() == DType::Float32, DTypeError,
           "linear: a bfloat16 product adds a float32 bias, got {}", dtype_name(bias.dtype()));
  const Tensor x1 = bf16 ? bf16_operand(x0, "linear") : x0, w = bf16 ? bf16_operand(w0, "linear") : w0;
  const DType out_dt = bf16 ? DType::Float32 : x0.dtype();
  const int64_t in = w.size(1), out = w.size(0);
  MG_CHECK(!bias.defined() || bias.shape() == Shape{out}, ShapeError,
           "linear: bias has shape {} but weight {} needs ({},)", shape_str(bias.shape()), shape_str(w.shape()), out);
  const int64_t rows = numel_of(Shape(x1.shape().begin(), x1.shape().end() - 1));
  const Tensor x = x1.reshape({rows, in});  // all leading dims are rows of one GEMM
  Shape out_shape = x1.shape();
  out_shape.back() = out;
  Tensor y = empty(out_shape, out_dt);
  if (bias.defined()) y.view({rows, out}).copy_(bias);  // then beta = 1 adds the product to it
  return visit_product(out_dt, bf16, "linear", [&]<class T, class In>() {
    if (rows == 0 || out == 0) return y;
    if (in == 0) {
      if (!bias.defined()) y.fill_(0);
      return y;
    }
    Tensor X = x, W = w;
    BlasMat lx, lw;
    if (!blas_layout(rows, in, X.strides()[0], X.strides()[1], lx)) X = X.contiguous(), lx = {false, in};
    // y = x W^T: W (out, in) row-major read as its transpose
    if (!blas_layout(in, out, W.strides()[1], W.strides()[0], lw)) W = W.contiguous(), lw = {true, in};
    gemm<T, In>(lx, lw, rows, out, in, X.data<In>(), W.data<In>(), y.data<T>(), bias.defined() ? T(1) : T(0));
    return y;
  });
}

Tensor matmul(const Tensor& a1, const Tensor& b1) {
  MG_CHECK(a1.defined() && b1.defined(), StateError, "matmul: an operand is undefined");
  const bool bf16 = a1.dtype() == DType::BFloat16 || b1.dtype() == DType::BFloat16;
  const Tensor a0 = bf16 ? bf16_operand(a1, "matmul") : a1, b0 = bf16 ? bf16_operand(b1, "matmul") : b1;
  MG_CHECK(a0.dim() >= 1 && b0.dim() >= 1, ShapeError,
           "matmul: both operands need at least 1 dim, got shapes {} and {}", shape_str(a0.shape()),
           shape_str(b0.shape()));
  MG_CHECK(a0.dtype() == b0.dtype(), DTypeError, "matmul: dtype mismatch, {} and {}", dtype_name(a0.dtype()),
           dtype_name(b0.dtype()));
  // A vector on the left is a (1, k) row, on the right a (k, 1) column; that dim is dropped after.
  const Tensor a = a0.dim() == 1 ? a0.unsqueeze(0) : a0;
  const Tensor b = b0.dim() == 1 ? b0.unsqueeze(1) : b0;
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  MG_CHECK(b.size(-2) == k, ShapeError, "matmul: shapes {} and {} cannot be multiplied ({} != {})",
           shape_str(a0.shape()), shape_str(b0.shape()), k, b.size(-2));

  const Shape abatch(a.shape().begin(), a.shape().end() - 2);
  const Shape bbatch(b.shape().begin(), b.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(abatch, bbatch, "matmul");
  } catch (const ShapeError&) {
    // Attention's heads are the batch dim before the matrices; fewer key/value heads than query
    // heads (grouped-query attention) is the usual way to get here.
    const bool heads = !abatch.empty() && !bbatch.empty() && abatch.back() != bbatch.back() &&
                       std::min(abatch.back(), bbatch.back()) > 0 &&
                       std::max(abatch.back(), bbatch.back()) % std::min(abatch.back(), bbatch.back()) == 0;
    throw ShapeError(fmt::format(
        "matmul: shapes {} and {} cannot be multiplied: their batch dims {} and {} do not broadcast{}",
        shape_str(a0.shape()), shape_str(b0.shape()), shape_str(abatch), shape_str(bbatch),
        heads ? fmt::format(" (if dim -3 holds attention heads, {} query heads and {} key/value heads is grouped-query "
                            "attention: repeat each key/value head with nn::repeat_kv_heads, or call "
                            "scaled_dot_product_attention with enable_gqa = true)",
                            std::max(abatch.back(), bbatch.back()), std::min(abatch.back(), bbatch.back()))
              : ""));
  }
  const Strides ast = broadcast_strides(abatch, Strides(a.strides().begin(), a.strides().end() - 2), batch);
  const Strides bst = broadcast_strides(bbatch, Strides(b.strides().begin(), b.strides().end() - 2), batch);
  Shape out_shape = batch;
  out_shape.push_back(n);
  out_shape.push_back(m);

  Tensor out = visit_product(a.dtype(), bf16, "matmul", [&]<class T, class In>() {
    Tensor out = empty(out_shape, dtype_of<T>());
    if (out.numel() > 0 && k == 0) out.fill_(0);  // a sum over nothing
    if (out.numel() == 0 || k == 0) return out;
    Tensor A = a, B = b;
    BlasMat la, lb;
    if (!blas_layout(n, k, A.strides()[A.dim() - 2], A.strides()[A.dim() - 1], la)) A = A.contiguous(), la = {false, k};
    if (!blas_layout(k, m, B.strides()[B.dim() - 2], B.strides()[B.dim() - 1], lb)) B = B.contiguous(), lb = {false, m};
    const Strides ast2 = A.is_contiguous() && !a.is_contiguous()
                             ? broadcast_strides(abatch, Strides(A.strides().begin(), A.strides().end() - 2), batch)
                             : ast;
    const Strides bst2 = B.is_contiguous() && !b.is_contiguous()
                             ? broadcast_strides(bbatch, Strides(B.strides().begin(), B.strides().end() - 2), batch)
                             : bst;
    batched_gemm<T, In>(la, lb, n, m, k, A.data<In>(), B.data<In>(), out.data<T>(), batch, ast2, bst2);
    return out;
  });
  // The vector dims go again: (..., 1, m) for a left vector, (..., n, 1) for a right one.
  if (a0.dim() == 1) out = out.squeeze(-2);
  if (b0.dim() == 1) out = out.squeeze(-1);
  return out;
}

}  // namespace mg
