// Matrix products. The transposes in the backward are views; BLAS reads them through its
// transpose flags, so no matrix is copied to compute a gradient.
#include "minigrad/autograd/ops/matmul.h"

#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops.h"

namespace mg {

// y = a @ b            a: (..., n, k)  b: (..., k, m)  y: (..., n, m)
// da = dy @ b^T        db = a^T @ dy   (summed over broadcast batch dims by the engine)
Variable matmul(const Variable& a, const Variable& b) {
  // Vectors are promoted to matrices by differentiable reshapes, so the core only sees >= 2-D:
  // a left vector is a (1, k) row, a right one a (k, 1) column, and that dim goes again after.
  MG_CHECK(a.defined() && b.defined(), StateError, "matmul: an operand is undefined");
  if (a.dim() == 1 && b.dim() == 1) return reshape(matmul(unsqueeze(a, 0), unsqueeze(b, 1)), {});  // a dot product
  if (a.dim() == 1) return squeeze(matmul(unsqueeze(a, 0), b), -2);
  if (b.dim() == 1) return squeeze(matmul(a, unsqueeze(b, 1)), -1);
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
