// Matrix products. The transposes in the backward are views; BLAS reads them through its
// transpose flags, so no matrix is copied to compute a gradient.
#include "autograd/ops.h"

namespace mg {

// y = a @ b            a: (..., n, k)  b: (..., k, m)  y: (..., n, m)
// da = dy @ b^T        db = a^T @ dy   (summed over broadcast batch dims by the engine)
Variable matmul(const Variable& a, const Variable& b) {
  // Vectors are promoted to matrices by differentiable reshapes, so the core only sees >= 2-D.
  if (a.dim() == 1) return squeeze(matmul(unsqueeze(a, 0), b), -2);
  if (b.dim() == 1) return squeeze(matmul(a, unsqueeze(b, 1)), -1);
  return record("matmul", mg::matmul(a.data(), b.data()), {a, b},
                [a = a.data(), b = b.data()](const Tensor& dy, const Node& n) -> TensorList {
                  return {n.needs(0) ? mg::matmul(dy, b.transpose(-2, -1)) : Tensor(),
                          n.needs(1) ? mg::matmul(a.transpose(-2, -1), dy) : Tensor()};
                });
}

// y = x W^T + b        x: (..., in)  W: (out, in)  b: (out)  y: (..., out)
// dx = dy W            dW = dy^T x (summed over the leading dims)    db = sum dy
Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  MG_CHECK(weight.dim() == 2, ShapeError, "linear: weight must be 2-D (out, in), got shape {}",
           shape_str(weight.shape()));
  MG_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), ShapeError,
           "linear: input of shape {} does not fit weight of shape {} (expected last dim {})",
           shape_str(x.shape()), shape_str(weight.shape()), weight.size(1));
  Variable y = matmul(x, transpose(weight, 0, 1));
  if (!bias.defined()) return y;
  MG_CHECK(bias.shape() == Shape{weight.size(0)}, ShapeError,
           "linear: bias has shape {} but weight {} needs ({},)", shape_str(bias.shape()),
           shape_str(weight.shape()), weight.size(0));
  return add(y, bias);
}

}  // namespace mg
