#pragma once
// Matrix products on OpenBLAS (tensor/ops/matmul.cpp, through tensor/blas.h).
#include "minigrad/tensor/tensor.h"

namespace mg {

/// Matrix product with torch.matmul's rules: (..., n, k) @ (..., k, m) -> (..., n, m), batch dims
/// broadcast; a 1-D operand is a row (left) or column (right) vector whose dim is dropped.
/// Transposed views are passed to BLAS as flags, not copied.
Tensor matmul(const Tensor& a, const Tensor& b);
/// x W^T + b in one GEMM: x (..., in), weight (out, in), bias (out) or undefined -> (..., out).
/// The bias is written first and the product added onto it (BLAS beta = 1): no second pass.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace mg
