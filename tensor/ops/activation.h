#pragma once
// Activation functions (tensor/ops/activation.cpp), each with the kernel of its derivative below
// it: dy and what the forward saved in, dx out. Same names and defaults as torch.nn.functional.
#include <string>
#include <utility>

#include "minigrad/tensor/tensor.h"

namespace mg {

/// max(x, 0) (relu(NaN) = NaN, as in PyTorch)
Tensor relu(const Tensor& x);
/// dy where x > 0, else 0
Tensor relu_backward(const Tensor& dy, const Tensor& x);
/// GELU's two forms (PyTorch's approximate="none" and "tanh").
enum class GeluApproximate {
  /// x Phi(x), Phi the standard normal CDF: the erf form, PyTorch's default.
  None,
  /// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): GPT-2's "gelu_new".
  Tanh,
};
/// "none" or "tanh", as PyTorch spells the argument.
const char* gelu_approximate_name(GeluApproximate approximate);

/// GELU in the form `approximate` says (GeluApproximate). bf16_copy: for float32 x, also keep the
/// output's bfloat16 copy beside it (Storage::bf16_copy), made piece by piece while in cache: the
/// operand the next product reads under autocast.
Tensor gelu(const Tensor& x, GeluApproximate approximate = GeluApproximate::None, bool bf16_copy = false);
/// dy * GELU'(x) for the same `approximate` as the forward.
Tensor gelu_backward(const Tensor& dy, const Tensor& x, GeluApproximate approximate = GeluApproximate::None);
/// The backward of gelu(linear(x, W, b)) up to its two products, in one pass over h = x W^T + b
/// (N, out) and dy: returns {dh, db}, dh = dy * GELU'(h) written as `dh_dtype` (h's dtype, or
/// bfloat16 from float32, the operand of a bfloat16 product) and db = dh summed over all leading dims
/// (undefined unless need_db). Bit for bit gelu_backward, then sum(dh, {0}) and .to(dh_dtype).
std::pair<Tensor, Tensor> linear_gelu_backward(const Tensor& dy, const Tensor& h, GeluApproximate approximate,
                                               DType dh_dtype, bool need_db);
/// x sigmoid(x) (SiLU, or swish)
Tensor silu(const Tensor& x);
/// dy * s (1 + x (1 - s)), s = sigmoid(x)
Tensor silu_backward(const Tensor& dy, const Tensor& x);
/// SwiGLU's gate in one pass: x (..., 2h) = [a | u] on the last dim -> silu(a) * u (..., h), bit for
/// bit silu(x.narrow(-1, 0, h)) * x.narrow(-1, h, h) (PyTorch has no such function; F.glu is the
/// sigmoid form, a * sigmoid(b)). A bfloat16 x runs the composed ops, each rounded to bfloat16 as
/// PyTorch's bfloat16 silu and mul round.
Tensor swiglu(const Tensor& x);
/// swiglu's derivative, dy (..., h) -> dx (..., 2h) = [dy u SiLU'(a) | dy silu(a)], bit for bit
/// what the composed ops' backward gives. For a bfloat16 x, dy may be float32 (a bfloat16 value's
/// gradient is: autograd/autocast.h), and dx is then float32.
Tensor swiglu_backward(const Tensor& dy, const Tensor& x);
/// log(1 + e^(beta x)) / beta, or x itself where beta x > threshold (where the two agree to float precision)
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
/// dy * sigmoid(beta x), or dy where beta x > threshold
Tensor softplus_backward(const Tensor& dy, const Tensor& x, double beta = 1, double threshold = 20);
/// x where x > 0, else negative_slope * x
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// dy where x > 0, else negative_slope * dy
Tensor leaky_relu_backward(const Tensor& dy, const Tensor& x, double negative_slope = 0.01);
/// x where x > 0, else alpha (e^x - 1)
Tensor elu(const Tensor& x, double alpha = 1);
/// dy where x > 0, else dy alpha e^x
Tensor elu_backward(const Tensor& dy, const Tensor& x, double alpha = 1);

}  // namespace mg
