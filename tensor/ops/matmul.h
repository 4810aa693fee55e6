#pragma once
// Matrix products (tensor/ops/matmul.cpp), through tensor/blas.h: OpenBLAS, and oneDNN for bfloat16.
#include "minigrad/tensor/tensor.h"

namespace mg {

/// Matrix product with torch.matmul's rules: (..., n, k) @ (..., k, m) -> (..., n, m), batch dims
/// broadcast; a 1-D operand is a row (left) or column (right) vector whose dim is dropped.
/// Transposed views are passed to BLAS as flags, not copied. The operands' dtypes decide how it
/// multiplies: float32 or float64 alike natively; if either is bfloat16, a bfloat16 product (the
/// other rounded to bfloat16 if it is float32) summed and written in float32, as autocast's.
Tensor matmul(const Tensor& a, const Tensor& b);
/// x W^T + b in one GEMM: x (..., in), weight (out, in), bias (out) or undefined -> (..., out).
/// The bias is written first and the product added onto it (BLAS beta = 1): no second pass.
/// If x or weight is bfloat16: a bfloat16 product (the other rounded if float32), bias float32,
/// result float32.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
/// `t` as bfloat16 (rounded to nearest even), or `t` itself if it already is: what a bfloat16
/// product reads. Any other dtype than float32 or bfloat16 is a DTypeError naming `op`.
Tensor bf16_operand(const Tensor& t, std::string_view op);

}  // namespace mg
