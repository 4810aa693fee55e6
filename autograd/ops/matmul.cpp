// Matrix products. The transposes in the backward are views; BLAS reads them through its
// transpose flags, so no matrix is copied to compute a gradient.
//
// Under autocast (autograd/autocast.h) a product records the casts of its float32 operands to
// bfloat16 (autocast(), an op of its own) and then itself on the copies, with the same rule as
// without: the rule reads the copies it kept (half the memory of float32 ones; linear's weight is
// read as it is and rounded by the kernel again instead) and rounds the incoming gradient once, as
// the forward rounded its operands (autocast_like).
#include "minigrad/autograd/ops/matmul.h"

#include <cmath>

#include "minigrad/autograd/autocast.h"
#include "minigrad/autograd/ops/activation.h"
#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/autograd/ops/reduce.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/tensor/ops.h"
#include "minigrad/tensor/ops/activation.h"
#include "minigrad/tensor/ops/einsum.h"

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
  const Variable a16 = autocast(a), b16 = autocast(b);  // a and b themselves outside autocast
  return record("matmul", autocast_output(mg::matmul(a16.data(), b16.data())), {a16, b16}, keep(0, 1),
                []<class V>(const V& dy, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
                  const auto& [a, b] = s;
                  const V g = autocast_like(dy, {a, b});
                  return {n.needs(0) ? mg::matmul(g, b.transpose(-2, -1)) : V(),
                          n.needs(1) ? mg::matmul(a.transpose(-2, -1), g) : V()};
                });
}

namespace {
// linear's two product gradients from g, the gradient of x W^T as the products read it (rounded to
// bfloat16 under autocast): dx = g W, dW = g^T x over all N rows. The list has a slot per input.
template <class V>
Grads<V> linear_product_grads(const V& g, const V& x, const V& w, const Node& n) {
  const int64_t in = w.size(1), out = w.size(0);
  const int64_t rows = numel_of(Shape(x.shape().begin(), x.shape().end() - 1));  // N
  Grads<V> grads(n.next.size());
  if (n.needs(0)) grads[0] = mg::matmul(g, w);
  if (n.needs(1)) grads[1] = mg::matmul(g.reshape({rows, out}).transpose(0, 1), x.reshape({rows, in}));
  return grads;
}
// db = sum of dy over its leading dims flattened to N rows
template <class V>
V linear_bias_grad(const V& dy, int64_t out) {
  return mg::sum(dy.reshape({numel_of(Shape(dy.shape().begin(), dy.shape().end() - 1)), out}), {0});
}
}  // namespace

// y = x W^T + b        x: (..., in)  W: (out, in)  b: (out)  y: (..., out)
// With the leading dims of x and dy flattened into rows (N = their product):
// dx = dy W   (N, out) @ (out, in)      dW = dy^T x   (out, N) @ (N, in)      db = sum_N dy
// Each is one GEMM over all N rows: no per-batch products to add up afterwards.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  const Variable x16 = autocast(x);
  return record(
      "linear", autocast_output(mg::linear(x16.data(), weight.data(), bias.defined() ? bias.data() : Tensor())),
      {x16, weight, bias}, keep(0, 1), []<class V>(const V& dy, const Saved<V, 2>& s, const Node& n) -> Grads<V> {
        const auto& [x, w] = s;
        Grads<V> grads = linear_product_grads(autocast_like(dy, {x, w}), x, w, n);
        if (n.needs(2)) grads[2] = linear_bias_grad(dy, w.size(0));  // from dy as it came (float32)
        return grads;
      });
}

// y = GELU(h),  h = x W^T + b                       (gelu(linear(x, W, b)), one node)
// dh = dy GELU'(h), then linear's three:  dx = dh W    dW = dh^T x    db = sum_N dh
// The forward is linear's kernel then gelu's, as the two ops run them. The backward's first pass
// (tensor's linear_gelu_backward) reads dy and h once and writes dh and db together, dh already in
// bfloat16 when the products are (the composed ops write dh in float32, read it for the bias sum,
// and read it again to round it). Under create_graph the backward is the composed form instead:
// h recomputed by linear(), dh = gelu_backward(dy, h), then linear's rule, all recorded.
Variable linear_gelu(const Variable& x, const Variable& weight, const Variable& bias, GeluApproximate approximate) {
  MG_CHECK(x.defined() && weight.defined(), StateError, "linear_gelu: an operand is undefined");
  MG_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), ShapeError,
           "linear_gelu: input of shape {} does not fit weight of shape {} (expected a 2-D weight (out, in) and "
           "an input whose last dim is in)",
           shape_str(x.shape()), shape_str(weight.shape()));
  // With bfloat16 outputs (PyTorch's autocast policy) h is rounded to bfloat16 before GELU: the
  // composed ops do exactly that, and are what runs.
  if (AutocastMode::bfloat16_outputs()) return gelu(linear(x, weight, bias), approximate);
  const Variable x16 = autocast(x);
  const Tensor xd = x16.data(), w = weight.data();
  const Tensor h = mg::linear(xd, w, bias.defined() ? bias.data() : Tensor());
  // (under autocast the output's bfloat16 copy is made with it: the next product's operand)
  const Tensor y = mg::gelu(h, approximate, AutocastMode::is_enabled() && h.dtype() == DType::Float32);
  const DType dh_dtype = bfloat16_involved({xd, w}) ? DType::BFloat16 : h.dtype();  // as autocast_like rounds
  LambdaNode::Backward fused = [xd, w, h, approximate, dh_dtype](const Tensor& dy, const Node& n) -> TensorList {
    const auto [dh, db] = linear_gelu_backward(dy, h, approximate, dh_dtype, n.needs(2));
    TensorList grads = linear_product_grads(dh, xd, w, n);
    if (n.needs(2)) grads[2] = db;
    return grads;
  };
  return record_fused(approximate == GeluApproximate::Tanh ? "linear_gelu_tanh" : "linear_gelu", y, {x16, weight, bias},
                      keep(0, 1, 2), std::move(fused),
                      [approximate](const Variable& dy, const Saved<Variable, 3>& s, const Node& n) {
                        const auto& [x, w, b] = s;
                        const Variable dh = gelu_backward(dy, linear(x, w, b), approximate);
                        VariableList grads = linear_product_grads(autocast_like(dh, {x, w}), x, w, n);
                        if (n.needs(2)) grads[2] = linear_bias_grad(dh, w.size(0));
                        return grads;
                      });
}

namespace {
// A composed product's result as the scope wants it (autocast_output, recorded): rounded to
// bfloat16 under AutocastOptions::bfloat16_outputs, itself otherwise.
Variable autocast_product(const Variable& y) { return AutocastMode::bfloat16_outputs() ? autocast(y) : y; }
}  // namespace

// out = beta input + alpha mat1 mat2; each term differentiable, so the gradients are the sum's:
// d input = beta dout (summed to input's shape), d mat1 = alpha dout mat2^T, d mat2 = alpha mat1^T dout
Variable addmm(const Variable& input, const Variable& mat1, const Variable& mat2, double beta, double alpha) {
  const OpScope scope("addmm");
  MG_CHECK(input.defined() && mat1.defined() && mat2.defined(), StateError, "addmm: an operand is undefined");
  MG_CHECK(mat1.dim() == 2 && mat2.dim() == 2 && mat1.size(1) == mat2.size(0), ShapeError,
           "addmm: expected mat1 (n, m) and mat2 (m, p), got {} and {}", shape_str(mat1.shape()),
           shape_str(mat2.shape()));
  MG_CHECK(std::isfinite(beta) && std::isfinite(alpha), ValueError,
           "addmm: beta and alpha must be finite, got {} and {}", beta, alpha);
  const Shape out{mat1.size(0), mat2.size(1)};
  MG_CHECK(broadcast_shapes(input.shape(), out, "addmm") == out, ShapeError,
           "addmm: input {} does not broadcast to the product's shape {}", shape_str(input.shape()), shape_str(out));
  Variable prod = matmul(mat1, mat2);
  if (alpha != 1) prod = prod * alpha;
  if (beta == 0) return prod;  // input not read, as PyTorch: a NaN in it stays out
  // a product's output: bfloat16 under AutocastOptions::bfloat16_outputs whatever beta is
  return autocast_product(beta == 1 ? input + prod : input * beta + prod);
}

// The same for batches: out[b] = beta input[b] + alpha batch1[b] batch2[b]
Variable baddbmm(const Variable& input, const Variable& batch1, const Variable& batch2, double beta, double alpha) {
  const OpScope scope("baddbmm");
  MG_CHECK(input.defined() && batch1.defined() && batch2.defined(), StateError, "baddbmm: an operand is undefined");
  MG_CHECK(
      batch1.dim() == 3 && batch2.dim() == 3 && batch1.size(0) == batch2.size(0) && batch1.size(2) == batch2.size(1),
      ShapeError, "baddbmm: expected batch1 (b, n, m) and batch2 (b, m, p), got {} and {}", shape_str(batch1.shape()),
      shape_str(batch2.shape()));
  MG_CHECK(std::isfinite(beta) && std::isfinite(alpha), ValueError,
           "baddbmm: beta and alpha must be finite, got {} and {}", beta, alpha);
  const Shape out{batch1.size(0), batch1.size(1), batch2.size(2)};
  MG_CHECK(broadcast_shapes(input.shape(), out, "baddbmm") == out, ShapeError,
           "baddbmm: input {} does not broadcast to the product's shape {}", shape_str(input.shape()), shape_str(out));
  Variable prod = matmul(batch1, batch2);
  if (alpha != 1) prod = prod * alpha;
  if (beta == 0) return prod;
  return autocast_product(beta == 1 ? input + prod : input * beta + prod);
}

// y = einsum(equation, operands): the Tensor plan run on Variables; no rule of its own
Variable einsum(std::string_view equation, const std::vector<Variable>& operands) {
  const OpScope scope("einsum");
  return run_einsum(einsum_plan(equation, einsum_shapes(operands)), operands);
}

}  // namespace mg
