// Matrix products. The transposes in the backward are views; BLAS reads them through its
// transpose flags, so no matrix is copied to compute a gradient.
//
// Under autocast (autograd/autocast.h), with float32 operands, each product rounds its operands to
// bfloat16, multiplies them summing in float32, and keeps the bfloat16 copies of its inputs for the
// backward (half the memory of float32 ones; linear's weight is rounded again instead); the backward
// rounds the incoming gradient too, once, and runs its two products the same way. The gradients it
// returns are float32.
#include "minigrad/autograd/ops/matmul.h"

#include "minigrad/autograd/autocast.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops.h"

namespace mg {
namespace {
// Whether a product of these float operands runs in bfloat16: inside autocast, for float32 (float64
// stays float64, as in PyTorch, where autocast only lowers float32).
bool autocast_bf16(const Tensor& a, const Tensor& b) {
  return AutocastMode::is_enabled() && a.dtype() == DType::Float32 && b.dtype() == DType::Float32;
}
}  // namespace

// y = a @ b            a: (..., n, k)  b: (..., k, m)  y: (..., n, m)
// da = dy @ b^T        db = a^T @ dy   (summed over broadcast batch dims by the engine)
Variable matmul(const Variable& a, const Variable& b) {
  // Vectors are promoted to matrices by differentiable reshapes, so the core only sees >= 2-D:
  // a left vector is a (1, k) row, a right one a (k, 1) column, and that dim goes again after.
  MG_CHECK(a.defined() && b.defined(), StateError, "matmul: an operand is undefined");
  if (a.dim() == 1 && b.dim() == 1) return reshape(matmul(unsqueeze(a, 0), unsqueeze(b, 1)), {});  // a dot product
  if (a.dim() == 1) return squeeze(matmul(unsqueeze(a, 0), b), -2);
  if (b.dim() == 1) return squeeze(matmul(a, unsqueeze(b, 1)), -1);
  if (autocast_bf16(a.data(), b.data())) {
    const Tensor ab = bf16_operand(a.data(), "matmul"), bb = bf16_operand(b.data(), "matmul");
    return record("matmul", mg::matmul(ab, bb, Precision::BFloat16), {a, b},
                  [ab, bb](const Tensor& dy, const Node& n) -> TensorList {
                    const Tensor g = dy.to(DType::BFloat16);
                    return {n.needs(0) ? mg::matmul(g, bb.transpose(-2, -1), Precision::BFloat16) : Tensor(),
                            n.needs(1) ? mg::matmul(ab.transpose(-2, -1), g, Precision::BFloat16) : Tensor()};
                  });
  }
  return record("matmul", mg::matmul(a.data(), b.data()), {a, b},
                [a = a.data(), b = b.data()](const Tensor& dy, const Node& n) -> TensorList {
                  return {n.needs(0) ? mg::matmul(dy, b.transpose(-2, -1)) : Tensor(),
                          n.needs(1) ? mg::matmul(a.transpose(-2, -1), dy) : Tensor()};
                });
}

// y = x W^T + b        x: (..., in)  W: (out, in)  b: (out)  y: (..., out)
// With the leading dims of x and dy flattened into rows (N = their product):
// dx = dy W   (N, out) @ (out, in)      dW = dy^T x   (out, N) @ (N, in)      db = sum_N dy
// Each is one GEMM over all N rows: no per-batch products to add up afterwards.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  const Tensor b = bias.defined() ? bias.data() : Tensor();
  std::vector<Variable> inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  if (autocast_bf16(x.data(), weight.data()) && (!b.defined() || b.dtype() == DType::Float32)) {
    // The input's bfloat16 copy is kept for the backward (the float32 input can then be freed); the
    // weight's is not: the float32 weight lives on as a parameter, and rounding it again in the
    // backward costs less than holding a second copy of every weight until then.
    const Tensor xb = bf16_operand(x.data(), "linear");
    return record("linear", mg::linear(xb, weight.data(), b, Precision::BFloat16), inputs,
                  [xb, w = weight.data()](const Tensor& dy, const Node& n) -> TensorList {
                    const int64_t in = w.size(1), out = w.size(0);
                    const int64_t rows = numel_of(Shape(xb.shape().begin(), xb.shape().end() - 1));
                    const Tensor g = dy.to(DType::BFloat16), g2 = g.reshape({rows, out});
                    TensorList grads(n.next.size());
                    if (n.needs(0)) grads[0] = mg::matmul(g, w, Precision::BFloat16);
                    if (n.needs(1)) grads[1] = mg::matmul(g2.transpose(0, 1), xb.reshape({rows, in}), Precision::BFloat16);
                    if (n.needs(2)) grads[2] = mg::sum(dy.reshape({rows, out}), {0});  // float32, unrounded
                    return grads;
                  });
  }
  return record("linear", mg::linear(x.data(), weight.data(), b), inputs,
                [x = x.data(), w = weight.data()](const Tensor& dy, const Node& n) -> TensorList {
                  const int64_t in = w.size(1), out = w.size(0);
                  const int64_t rows = numel_of(Shape(x.shape().begin(), x.shape().end() - 1));  // N
                  const Tensor dy2 = dy.reshape({rows, out});
                  TensorList g(n.next.size());
                  if (n.needs(0)) g[0] = mg::matmul(dy, w);
                  if (n.needs(1)) g[1] = mg::matmul(dy2.transpose(0, 1), x.reshape({rows, in}));
                  if (n.needs(2)) g[2] = mg::sum(dy2, {0});
                  return g;
                });
}

}  // namespace mg
