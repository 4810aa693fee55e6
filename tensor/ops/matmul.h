#pragma once
// Matrix products on OpenBLAS (tensor/ops/matmul.cpp, through tensor/blas.h).
#include "minigrad/tensor/tensor.h"

namespace mg {

/// Matrix product with torch.matmul's rules: (..., n, k) @ (..., k, m) -> (..., n, m), batch dims
/// broadcast; a 1-D operand is a row (left) or column (right) vector whose dim is dropped.
/// Transposed views are passed to BLAS as flags, not copied.
/// With Precision::BFloat16 the operands may be float32 or bfloat16 and the result is float32.
Tensor matmul(const Tensor& a, const Tensor& b, Precision precision = Precision::Native);
/// x W^T + b in one GEMM: x (..., in), weight (out, in), bias (out) or undefined -> (..., out).
/// The bias is written first and the product added onto it (BLAS beta = 1): no second pass.
/// With Precision::BFloat16: x and weight float32 or bfloat16, bias float32, result float32.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Precision precision = Precision::Native);
/// `t` as bfloat16 (rounded to nearest even), or `t` itself if it already is: what a bfloat16
/// product reads. Any other dtype than float32 or bfloat16 is a DTypeError naming `op`.
Tensor bf16_operand(const Tensor& t, std::string_view op);

}  // namespace mg
