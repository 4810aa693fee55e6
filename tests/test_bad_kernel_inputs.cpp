// Bad calls into the kernels (elementwise, reductions, matmul, conv, pooling, indexing, losses,
// attention, ...), as a new user makes them: each must throw the right typed mg::Error naming the
// op and the shapes, never crash, hang, abort or return garbage; also under ASan + UBSan.
#include <cmath>
#include <limits>

#include "bad_inputs.h"

using namespace mg;
using namespace mgtest;
using testing::HasSubstr;

namespace {
const Tensor kScalar = scalar_tensor(2);

void kernels() {
  const Tensor x = zeros({2, 3}), i64 = arange(6).view({2, 3}), b = zeros({2, 3}, DType::Bool);
  // elementwise
  BAD(ShapeError, "add:", x + zeros({4}));
  BAD(DTypeError, "add:", x + zeros({2, 3}, DType::Float64));
  BAD(StateError, "add:", x + Tensor());
  BAD(DTypeError, "add:", b + b);
  BAD(DTypeError, "div:", i64 / i64);
  BAD(ValueError, "add:", i64 + 0.5);
  BAD(ValueError, "mul:", i64 * NAN);
  BAD(DTypeError, "exp:", exp(i64));
  BAD(StateError, "exp:", exp(Tensor()));
  BAD(DTypeError, "gelu_backward:", gelu_backward(x, zeros({2, 3}, DType::Float64)));
  BAD(DTypeError, "linear_gelu_backward:",
      linear_gelu_backward(x, zeros({2, 3}, DType::Float64), GeluApproximate::None, DType::Float32, true));
  BAD(ShapeError,
      "linear_gelu_backward:", linear_gelu_backward(x, zeros({3, 2}), GeluApproximate::None, DType::Float32, true));
  BAD(DTypeError, "linear_gelu_backward:", linear_gelu_backward(x, x, GeluApproximate::None, DType::Int64, true));
  BAD(ShapeError, "tanh_backward:", tanh_backward(x, zeros({4})));
  BAD(DTypeError, "where (condition):", where(x, x, x));
  BAD(ShapeError, "where:", where(b, x, zeros({4})));
  BAD(DTypeError, "masked_fill (mask):", masked_fill(x, x, 0));
  BAD(ShapeError, "masked_fill:", masked_fill(x, zeros({2, 3, 2}, DType::Bool), 0));
  BAD(StateError, "masked_fill:", masked_fill(Tensor(), b, 0));
  BAD(ValueError, "masked_fill:", masked_fill(i64, b, 2.7));
  BAD(DTypeError, "logical_not:", logical_not(x));
  BAD(ValueError, "add_:", [&] {
    Tensor e = zeros({1, 3}).expand({2, 3});
    add_(e, x);
  }());
  BAD(DTypeError, "sin:", sin(i64));
  BAD(DTypeError, "log1p:", log1p(b));
  BAD(ValueError, "clamp:", clamp(x, std::nullopt, std::nullopt));
  BAD(ValueError, "clamp:", clamp(x, NAN, 1.0));
  BAD(ShapeError, "minimum:", minimum(x, zeros({4})));
  BAD(DTypeError, "maximum:", maximum(x, zeros({2, 3}, DType::Float64)));
  BAD(DTypeError, "silu:", silu(i64));
  BAD(ValueError, "softplus:", softplus(x, 0.0));
  BAD(ShapeError, "elu_backward:", elu_backward(x, zeros({3})));
  BAD(DTypeError, "leaky_relu:", leaky_relu(b));
  // reductions
  BAD(IndexError, "sum:", sum(x, {2}));
  BAD(ValueError, "sum:", sum(x, {1, 1}));
  BAD(DTypeError, "sum:", sum(b));
  BAD(DTypeError, "mean:", mean(i64));
  BAD(IndexError, "mean:", mean(x, {-3}));
  BAD(IndexError, "min:", min(x, 2));
  BAD(ValueError, "min:", min(zeros({0})));
  BAD(ValueError, "argmin:", argmin(zeros({2, 0}), 1));
  BAD(DTypeError, "var:", var(i64));
  BAD(ValueError, "var:", var(x, {}, -1));
  BAD(DTypeError, "prod:", prod(b));
  BAD(IndexError, "cumsum:", cumsum(x, 2));
  BAD(DTypeError, "logsumexp:", logsumexp(i64, {0}));
  BAD(ValueError, "topk:", topk(x, 4));
  BAD(ValueError, "topk:", topk(x, -1));
  BAD(IndexError, "sort:", sort(x, 3));
  BAD(DTypeError, "sort:", sort(b));
  BAD(ValueError, "multinomial:", multinomial(tensor({0.5, -0.1}, {2}), 1));
  BAD(ValueError, "multinomial:", multinomial(zeros({2, 3}), 1));
  BAD(ValueError, "multinomial:", multinomial(ones({3}), 4, false));
  BAD(ValueError, "multinomial:", multinomial(tensor({1, NAN}, {2}), 1));
  BAD(ShapeError, "multinomial:", multinomial(ones({2, 2, 2}), 1));
  BAD(ValueError, "randperm:", randperm(-1));
  BAD(ValueError, "linspace:", linspace(0, 1, -2));
  BAD(ValueError, "stack:", stack(std::vector<Tensor>{}, 0));
  BAD(ShapeError, "stack:", stack({x, zeros({3, 2})}, 0));
  BAD(IndexError, "stack:", stack({x, x}, 4));
  BAD(ShapeError, "unflatten:", x.unflatten(1, {2, 2}));
  BAD(ShapeError, "unflatten:", x.unflatten(1, {-1, -1}));
  BAD(ShapeError, "relu_backward:", relu_backward(x, zeros({3})));
  BAD(ValueError, "chunk:", chunk(x, 0, 1));
  BAD(ValueError, "max:", max(zeros({0})));
  BAD(ValueError, "max:", max(zeros({2, 0}), 1));
  BAD(IndexError, "max:", max(x, 2));
  BAD(ShapeError, "sum_to_shape:", sum_to_shape(x, {4}));
  // matmul and linear
  BAD(ShapeError, "matmul:", matmul(x, x));
  BAD(ShapeError, "matmul:", matmul(zeros({2, 3, 4}), zeros({3, 4, 5})));
  BAD(ShapeError, "matmul:", matmul(kScalar, x));
  BAD(DTypeError, "matmul:", matmul(x, zeros({3, 2}, DType::Float64)));
  BAD(DTypeError, "matmul:", matmul(i64, i64.transpose(0, 1)));
  BAD(ShapeError, "linear:", linear(x, zeros({4, 5}), Tensor()));
  BAD(ShapeError, "linear:", linear(x, zeros({4, 3}), zeros({3})));
  BAD(ShapeError, "linear:", linear(x, zeros({3}), Tensor()));
  BAD(DTypeError, "linear:", linear(x, zeros({4, 3}, DType::Float64), Tensor()));
  // index ops
  BAD(IndexError, "index_select:", index_select(x, 0, ids({2})));
  BAD(IndexError, "index_select:", index_select(x, 0, ids({-1})));
  BAD(DTypeError, "index_select:", index_select(x, 0, x));
  BAD(ShapeError, "index_select:", index_select(x, 0, i64));
  BAD(IndexError, "index_select:", index_select(kScalar, 0, ids({0})));
  BAD(IndexError, "gather:", gather(x, 1, from_vector<int64_t>({3}, {1, 1})));
  BAD(ShapeError, "gather:", gather(x, 1, ids({0})));
  BAD(IndexError, "scatter_add:", scatter_add(x, 0, from_vector<int64_t>({5}, {1, 1}), x));
  BAD(DTypeError, "scatter_add:", scatter_add(x, 0, from_vector<int64_t>({0}, {1, 1}), i64));
  BAD(ShapeError, "index_add:", index_add(x, 0, ids({0}), x));
  BAD(IndexError, "index_add:", index_add(kScalar, 0, ids({0}), kScalar));
  BAD(ValueError, "one_hot:", one_hot(ids({0}), 0));
  BAD(IndexError, "one_hot:", one_hot(ids({3}), 3));
  BAD(IndexError, "embedding:", embedding(ids({4}), zeros({4, 2})));
  BAD(ShapeError, "embedding:", embedding(ids({0}), zeros({4})));
  BAD(ShapeError, "embedding_backward:", embedding_backward(zeros({3, 2}), ids({0, 1}), 4));
  BAD(IndexError, "embedding_backward:", embedding_backward(zeros({1, 2}), ids({9}), 4));
  BAD(ValueError, "embedding_backward:", embedding_backward(zeros({1, 2}), ids({0}), -2));
  BAD(IndexError, "embedding_backward:", embedding_backward(zeros({1, 2}), ids({0}), 4, 7));
  // joining and splitting
  BAD(ValueError, "concat:", concat(std::vector<Tensor>{}, 0));
  BAD(ShapeError, "concat:", concat({x, zeros({3, 3})}, 1));
  BAD(DTypeError, "concat:", concat({x, i64}, 0));
  BAD(StateError, "concat:", concat({x, Tensor()}, 0));
  BAD(ShapeError, "concat:", concat({kScalar, kScalar}, 0));
  BAD(ShapeError, "stack:", stack({x, zeros({3, 2})}, 0));
  BAD(ShapeError, "split:", split(x, std::vector<int64_t>{1, 1}, 1));
  BAD(ValueError, "split:", split(x, std::vector<int64_t>{-1, 4}, 1));
  BAD(ShapeError, "split:", split(x, std::vector<int64_t>{kBig, kBig, 3}, 1));
  BAD(ValueError, "split:", split(x, 0, 1));
  BAD(IndexError, "split:", split(kScalar, 1, 0));
  BAD(ShapeError, "tril:", tril(zeros({3})));
  // nn kernels
  BAD(IndexError, "softmax:", softmax(x, 2));
  BAD(IndexError, "softmax:", softmax(kScalar, 42));
  BAD(DTypeError, "log_softmax:", log_softmax(i64, 1));
  BAD(ShapeError, "layer_norm:", layer_norm(x, {2}, Tensor(), Tensor()));
  BAD(ShapeError, "layer_norm:", layer_norm(x, {}, Tensor(), Tensor()));
  BAD(ShapeError, "layer_norm:", layer_norm(x, {3}, zeros({2}), Tensor()));
  BAD(DTypeError, "layer_norm:", layer_norm(x, {3}, zeros({3}, DType::Float64), Tensor()));
  BAD(ShapeError,
      "layer_norm_backward:", layer_norm_backward(zeros({4}), x, Tensor(), zeros({2}), zeros({2}), {3}, false, false));
  // losses
  const Tensor logits = zeros({2, 3});
  BAD(IndexError, "cross_entropy:", cross_entropy_forward(logits, ids({0, 3})));
  BAD(DTypeError, "cross_entropy:", cross_entropy_forward(logits, x.narrow(1, 0, 1).reshape({2})));
  BAD(DTypeError, "cross_entropy:", cross_entropy_forward(i64, ids({0, 1})));
  BAD(ShapeError, "cross_entropy:", cross_entropy_forward(logits, ids({0})));
  const CrossEntropyForward ce = cross_entropy_forward(logits, ids({0, 1}));
  BAD(ShapeError,
      "cross_entropy_backward:", cross_entropy_backward(kScalar, ids({0, 1}), ce, {.reduction = Reduction::None}));
  BAD(IndexError, "cross_entropy_backward:", cross_entropy_backward(kScalar, ids({0, 1000}), ce));
  BAD(DTypeError, "cross_entropy_backward:", cross_entropy_backward(scalar_tensor(1, DType::Float64), ids({0, 1}), ce));
  BAD(ValueError, "cross_entropy:", cross_entropy_forward(logits, ids({0, 1}), {.label_smoothing = 1.5}));
  BAD(ShapeError, "cross_entropy:", cross_entropy_forward(logits, ids({0, 1}), {.weight = ones({4})}));
  BAD(ValueError, "cross_entropy:", cross_entropy_forward(logits, ids({0, 1}), {.reduction = Reduction::BatchMean}));
  BAD(IndexError, "nll_loss:", nll_loss(logits, ids({0, 5})));
  BAD(ValueError, "binary_cross_entropy:", binary_cross_entropy(tensor({1.5}, {1}), tensor({1}, {1})));
  BAD(ShapeError, "binary_cross_entropy:", binary_cross_entropy(tensor({0.5}, {1}), tensor({1, 0}, {2})));
  BAD(ShapeError,
      "binary_cross_entropy_with_logits:", binary_cross_entropy_with_logits(x, x, {.pos_weight = ones({4})}));
  BAD(DTypeError, "kl_div:", kl_div(x, i64));
  // fused attention
  const Tensor q = zeros({1, 2, 3, 4});
  BAD(ShapeError,
      "scaled_dot_product_attention:", attention_forward(q, zeros({1, 2, 3, 5}), zeros({1, 2, 3, 5}), false));
  BAD(ShapeError, "scaled_dot_product_attention:", attention_forward(zeros({2, 3, 4}), q, q, false));
  BAD(ShapeError,
      "scaled_dot_product_attention:", attention_forward(q, zeros({1, 2, 0, 4}), zeros({1, 2, 0, 4}), false));
  BAD(DTypeError, "scaled_dot_product_attention:", attention_forward(q, q.to(DType::Float64), q, false));
  BAD(ShapeError, "scaled_dot_product_attention backward:",
      attention_backward(zeros({1, 2, 3, 3}), q, q, q, attention_forward(q, q, q, false), false));
  BAD(ShapeError, "self_attention_qkv:", attention_qkv_forward(zeros({2, 3, 10}), 2, false));
  BAD(ShapeError, "self_attention_qkv:", attention_qkv_forward(zeros({2, 3, 12}), kBig / 2, false));
  BAD(ShapeError, "self_attention_qkv backward:",
      attention_qkv_backward(zeros({2, 2, 3, 3}), zeros({2, 3, 12}), 2,
                             attention_qkv_forward(zeros({2, 3, 12}), 2, false), false));
  // convolution and pooling kernels
  const Tensor img = zeros({1, 2, 5, 5}), k3 = zeros({4, 2, 3, 3});
  BAD(ShapeError, "conv2d:", conv2d(img, zeros({4, 3, 3, 3}), Tensor()));
  BAD(ShapeError, "conv2d:", conv2d(img, zeros({4, 2, 6, 3}), Tensor()));
  BAD(ShapeError, "conv2d:", conv2d(zeros({2, 5, 5}), k3, Tensor()));
  BAD(ValueError, "conv2d:", conv2d(img, k3, Tensor(), Conv2dArgs{.stride_h = 0}));
  BAD(ValueError, "conv2d:", conv2d(img, k3, Tensor(), Conv2dArgs{.pad_left = -1}));
  BAD(ValueError, "conv2d:", conv2d(img, k3, Tensor(), Conv2dArgs{.groups = 3}));
  BAD(DTypeError, "conv2d:", conv2d(img, k3.to(DType::Float64), Tensor()));
  BAD(DTypeError, "conv2d:", conv2d(zeros({1, 2, 5, 5}, DType::Int64), zeros({4, 2, 3, 3}, DType::Int64), Tensor()));
  BAD(ShapeError, "conv2d:", conv2d(img, k3, zeros({3})));
  BAD(ValueError, "conv2d:", conv2d(img, k3, Tensor(), Conv2dArgs{.pad_top = kBig, .pad_bottom = kBig}));
  BAD(ShapeError, "conv2d_backward:", conv2d_backward(zeros({1, 4, 2, 2}), img, k3, {}, true, true, true));
  BAD(ShapeError,
      "max_pool2d:", max_pool2d(img, Pool2dArgs{.kernel_h = 6, .kernel_w = 2, .stride_h = 1, .stride_w = 1}));
  BAD(ValueError, "max_pool2d:", max_pool2d(img, Pool2dArgs{.kernel_h = 2, .kernel_w = 2, .pad_h = 2}));
  BAD(ValueError, "max_pool2d:", max_pool2d(img, Pool2dArgs{.kernel_h = 2, .kernel_w = 2, .stride_h = 0}));
  BAD(ShapeError, "max_pool2d:", max_pool2d(zeros({5, 5}), Pool2dArgs{}));
  BAD(DTypeError, "max_pool2d:", max_pool2d(zeros({1, 5, 5}, DType::Bool), Pool2dArgs{}));
  BAD(ShapeError, "max_pool2d_backward:",
      max_pool2d_backward(zeros({1, 2, 2, 2}), zeros({1, 2, 2, 2}, DType::Int64), {1, 3, 5, 5}));
  BAD(IndexError,
      "max_pool2d_backward:", max_pool2d_backward(zeros({1, 1, 1}), full({1, 1, 1}, 99, DType::Int64), {1, 3, 3}));
  BAD(ValueError, "avg_pool2d:", avg_pool2d(img, Pool2dArgs{.kernel_h = 2, .kernel_w = 2, .dilation_h = 2}));
  BAD(ValueError, "avg_pool2d:", avg_pool2d(img, Pool2dArgs{.kernel_h = 2, .kernel_w = 2}, true, 0));
  BAD(ShapeError, "avg_pool2d_backward:",
      avg_pool2d_backward(zeros({1, 2, 3, 3}), {1, 2, 5, 5},
                          Pool2dArgs{.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2}));
  BAD(ValueError, "adaptive_avg_pool2d:", adaptive_avg_pool2d(img, 0, 2));
  BAD(ShapeError, "adaptive_avg_pool2d:", adaptive_avg_pool2d(zeros({1, 2, 0, 5}), 2, 2));
  BAD(ShapeError, "adaptive_avg_pool2d_backward:", adaptive_avg_pool2d_backward(zeros({1, 3, 2, 2}), {1, 2, 5, 5}));
  // optimizer kernel
  BAD(ShapeError, "adam_step_:", adam_step_(x, zeros({3}), x.clone(), x.clone(), {0.1, 0.9, 0.99, 1e-8, 0, 1, false}));
  // bfloat16 mixes with float32 only; reductions do not take it; products take float32 or bfloat16
  const Tensor b16 = ones({2, 2}, DType::BFloat16);
  BAD(DTypeError, "add:", add(b16, ones({2, 2}, DType::Float64)));
  BAD(DTypeError, "var", var(b16));
  BAD(DTypeError, "matmul:", matmul(ones({2, 2}, DType::Float64), ones({2, 2}, DType::BFloat16)));
  BAD(DTypeError, "linear:", linear(ones({2, 2}, DType::BFloat16), ones({3, 2}), ones({3}, DType::Float64)));
  BAD(ShapeError, "linear:", linear(ones({2, 4}, DType::BFloat16), ones({3, 2}), Tensor()));
  BAD(DTypeError, "scaled_dot_product_attention",
      attention_forward(ones({1, 1, 2, 2}, DType::Int64), ones({1, 1, 2, 2}), ones({1, 1, 2, 2}, DType::BFloat16),
                        false));
}

}  // namespace

TEST(BadInputs, Kernels) {
  g_cases = 0;
  kernels();
  std::printf("bad calls: %d\n", g_cases);
  EXPECT_GE(g_cases, 150);
}
