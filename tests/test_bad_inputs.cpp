// Bad calls through the public API, as a new user makes them: each must throw the right typed
// mg::Error with a message that names the op, never crash, hang, abort or return garbage. The
// whole file also runs under AddressSanitizer + UndefinedBehaviorSanitizer (make test), which
// turns a read past a buffer into a failure. Grouped as the API is: tensors, kernels, autograd,
// modules, optimizers, files.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "helpers.h"

using namespace mg;
using testing::HasSubstr;

namespace {
int g_cases = 0;  // how many bad calls the suite makes (at least 150: TEST(BadInputs, Count))

// Run `call`, which must throw E whose message contains `op`.
template <class E>
void expect_error(const char* code, const std::function<void()>& call, const std::string& op) {
  ++g_cases;
  try {
    call();
    ADD_FAILURE() << code << ": no error";
  } catch (const E& e) {
    EXPECT_THAT(e.what(), HasSubstr(op)) << code;
  } catch (const Error& e) {
    ADD_FAILURE() << code << ": the wrong error class: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << code << ": not an mg::Error: " << e.what();
  }
}
#define BAD(ErrorType, op, ...) expect_error<ErrorType>(#__VA_ARGS__, [&] { (void)(__VA_ARGS__); }, op)

constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
const Tensor kScalar = scalar_tensor(2);
Tensor ids(std::vector<int64_t> v) { return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }
}  // namespace

void views_and_creation() {
  const Tensor x = zeros({2, 3});
  BAD(ShapeError, "view:", x.view({4, 2}));
  BAD(ShapeError, "view:", x.transpose(0, 1).view({6}));
  BAD(ShapeError, "view:", x.view({-1, -1}));
  BAD(ShapeError, "reshape:", x.reshape({5, -1}));
  BAD(ShapeError, "reshape:", x.reshape({kBig, 2, -1}));
  BAD(ShapeError, "reshape:", x.reshape({-2, 3}));
  BAD(IndexError, "transpose:", x.transpose(0, 2));
  BAD(IndexError, "permute:", x.permute({0, 5}));
  BAD(ShapeError, "permute:", x.permute({0}));
  BAD(ShapeError, "permute:", x.permute({1, 1}));
  BAD(IndexError, "narrow:", x.narrow(1, 2, 2));
  BAD(IndexError, "narrow:", x.narrow(1, -1, 1));
  BAD(IndexError, "narrow:", x.narrow(1, 1, kBig));
  BAD(IndexError, "narrow:", kScalar.narrow(0, 0, 1));
  BAD(ValueError, "slice:", x.slice(1, 0, 3, 0));
  BAD(IndexError, "slice:", kScalar.slice(0, 0, 1));
  BAD(ShapeError, "expand:", x.expand({3, 3}));
  BAD(ShapeError, "expand:", x.expand({3}));
  BAD(ShapeError, "expand:", x.expand({2, -3}));
  BAD(ValueError, "expand:", zeros({1, 3}).expand({kBig, kBig, 3}));
  BAD(IndexError, "squeeze:", x.squeeze(2));
  BAD(IndexError, "unsqueeze:", x.unsqueeze(4));
  BAD(IndexError, "flatten:", x.flatten(1, 0));
  BAD(IndexError, "flatten:", kScalar.flatten(5, 9));
  BAD(IndexError, "size:", kScalar.size(0));
  BAD(IndexError, "size:", x.size(2));
  BAD(IndexError, "at:", x.at({2, 0}));
  BAD(IndexError, "at:", x.at({0}));
  BAD(StateError, "at:", Tensor().at({}));
  BAD(StateError, "item:", Tensor().item());
  BAD(ValueError, "item:", x.item());
  BAD(DTypeError, "data:", x.data<double>());
  BAD(StateError, "clone:", Tensor().clone());
  BAD(StateError, "to:", Tensor().to(DType::Float64));
  BAD(ValueError, "to:", tensor({NAN}, {1}).to(DType::Int64));
  BAD(ValueError, "to:", tensor({1e30f}, {1}).to(DType::Int64));
  BAD(DTypeError, "copy_:", x.copy_(zeros({2, 3}, DType::Float64)));
  BAD(ShapeError, "copy_:", x.copy_(zeros({3, 2})));
  BAD(ValueError, "copy_:", zeros({1, 3}).expand({2, 3}).copy_(x));
  BAD(ValueError, "fill_:", zeros({2}, DType::Int64).fill_(2.5));
  BAD(ValueError, "fill_:", zeros({2}, DType::Bool).fill_(2));
  BAD(ValueError, "empty:", empty({-1}));
  BAD(ValueError, "zeros:", zeros({kBig / 2}));
  BAD(ValueError, "zeros:", zeros({int64_t{1} << 40, int64_t{1} << 40}));
  BAD(ValueError, "full:", full({2}, 2.5, DType::Int64));
  BAD(ValueError, "eye:", eye(-1));
  BAD(ShapeError, "from_vector:", from_vector<float>({1, 2, 3}, {2, 2}));
  BAD(ValueError, "arange:", arange(0.0, 1.0, 0.0));
  BAD(ValueError, "arange:", arange(0.0, INFINITY));
  BAD(ValueError, "arange:", arange(0.0, 1e30, 1.0));
  BAD(ValueError, "arange:", arange(5, 0));
  BAD(ValueError, "arange:", arange(std::numeric_limits<int64_t>::min(), kBig));
  BAD(ValueError, "uniform:", uniform({2}, 1, 0));
  BAD(ValueError, "uniform:", uniform({2}, 0, INFINITY));
  BAD(ValueError, "uniform:", uniform({2}, NAN, 1));
  BAD(ValueError, "bernoulli:", bernoulli({2}, 1.5));
  BAD(ValueError, "bernoulli:", bernoulli({2}, NAN));
  BAD(ValueError, "randint:", randint(3, 3, {2}));
  BAD(ValueError, "randn:", randn({-2}));
  BAD(ValueError, "set_num_threads:", set_num_threads(0));
  BAD(IndexError, "Tensor:", Tensor(x.storage(), DType::Float32, {100}, {1}, 0));
  BAD(IndexError, "Tensor:", Tensor(x.storage(), DType::Float32, {2}, {-1}, 0));
}

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
  BAD(ValueError, "gelu:", gelu(x, "fast"));
  BAD(DTypeError, "gelu_backward:", gelu_backward(x, zeros({2, 3}, DType::Float64)));
  BAD(ShapeError, "tanh_backward:", tanh_backward(x, zeros({4})));
  BAD(DTypeError, "where (condition):", where(x, x, x));
  BAD(ShapeError, "where:", where(b, x, zeros({4})));
  BAD(DTypeError, "masked_fill (mask):", masked_fill(x, x, 0));
  BAD(ShapeError, "masked_fill:", masked_fill(x, zeros({2, 3, 2}, DType::Bool), 0));
  BAD(StateError, "masked_fill:", masked_fill(Tensor(), b, 0));
  BAD(ValueError, "masked_fill:", masked_fill(i64, b, 2.7));
  BAD(DTypeError, "logical_not:", logical_not(x));
  BAD(ValueError, "add_:", [&] { Tensor e = zeros({1, 3}).expand({2, 3}); add_(e, x); }());
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
  BAD(ShapeError, "layer_norm_backward:", layer_norm_backward(zeros({4}), x, Tensor(), zeros({2}), zeros({2}), {3}, false, false));
  // losses
  const Tensor logits = zeros({2, 3});
  BAD(IndexError, "cross_entropy:", cross_entropy_forward(logits, ids({0, 3})));
  BAD(DTypeError, "cross_entropy:", cross_entropy_forward(logits, x.narrow(1, 0, 1).reshape({2})));
  BAD(DTypeError, "cross_entropy:", cross_entropy_forward(i64, ids({0, 1})));
  BAD(ShapeError, "cross_entropy:", cross_entropy_forward(logits, ids({0})));
  const CrossEntropyForward ce = cross_entropy_forward(logits, ids({0, 1}));
  BAD(ShapeError, "cross_entropy_backward:", cross_entropy_backward(kScalar, ids({0, 1}), ce, {.reduction = Reduction::None}));
  BAD(IndexError, "cross_entropy_backward:", cross_entropy_backward(kScalar, ids({0, 1000}), ce));
  BAD(DTypeError, "cross_entropy_backward:", cross_entropy_backward(scalar_tensor(1, DType::Float64), ids({0, 1}), ce));
  BAD(ValueError, "cross_entropy:", cross_entropy_forward(logits, ids({0, 1}), {.label_smoothing = 1.5}));
  BAD(ShapeError, "cross_entropy:", cross_entropy_forward(logits, ids({0, 1}), {.weight = ones({4})}));
  BAD(ValueError, "cross_entropy:", cross_entropy_forward(logits, ids({0, 1}), {.reduction = Reduction::BatchMean}));
  BAD(IndexError, "nll_loss:", nll_loss(logits, ids({0, 5})));
  BAD(ValueError, "binary_cross_entropy:", binary_cross_entropy(tensor({1.5}, {1}), tensor({1}, {1})));
  BAD(ShapeError, "binary_cross_entropy:", binary_cross_entropy(tensor({0.5}, {1}), tensor({1, 0}, {2})));
  BAD(ShapeError, "binary_cross_entropy_with_logits:", binary_cross_entropy_with_logits(x, x, {.pos_weight = ones({4})}));
  BAD(DTypeError, "kl_div:", kl_div(x, i64));
  // fused attention
  const Tensor q = zeros({1, 2, 3, 4});
  BAD(ShapeError, "scaled_dot_product_attention:", attention_forward(q, zeros({1, 2, 3, 5}), zeros({1, 2, 3, 5}), false));
  BAD(ShapeError, "scaled_dot_product_attention:", attention_forward(zeros({2, 3, 4}), q, q, false));
  BAD(ShapeError, "scaled_dot_product_attention:", attention_forward(q, zeros({1, 2, 0, 4}), zeros({1, 2, 0, 4}), false));
  BAD(DTypeError, "scaled_dot_product_attention:", attention_forward(q, q.to(DType::Float64), q, false));
  BAD(ShapeError, "scaled_dot_product_attention backward:", attention_backward(zeros({1, 2, 3, 3}), q, q, q, attention_forward(q, q, q, false), false));
  BAD(ShapeError, "self_attention_qkv:", attention_qkv_forward(zeros({2, 3, 10}), 2, false));
  BAD(ShapeError, "self_attention_qkv:", attention_qkv_forward(zeros({2, 3, 12}), kBig / 2, false));
  BAD(ShapeError, "self_attention_qkv backward:", attention_qkv_backward(zeros({2, 2, 3, 3}), zeros({2, 3, 12}), 2, attention_qkv_forward(zeros({2, 3, 12}), 2, false), false));
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
  BAD(ShapeError, "max_pool2d:", max_pool2d(img, Pool2dArgs{.kernel_h = 6, .kernel_w = 2, .stride_h = 1, .stride_w = 1}));
  BAD(ValueError, "max_pool2d:", max_pool2d(img, Pool2dArgs{.kernel_h = 2, .kernel_w = 2, .pad_h = 2}));
  BAD(ValueError, "max_pool2d:", max_pool2d(img, Pool2dArgs{.kernel_h = 2, .kernel_w = 2, .stride_h = 0}));
  BAD(ShapeError, "max_pool2d:", max_pool2d(zeros({5, 5}), Pool2dArgs{}));
  BAD(DTypeError, "max_pool2d:", max_pool2d(zeros({1, 5, 5}, DType::Bool), Pool2dArgs{}));
  BAD(ShapeError, "max_pool2d_backward:", max_pool2d_backward(zeros({1, 2, 2, 2}), zeros({1, 2, 2, 2}, DType::Int64), {1, 3, 5, 5}));
  BAD(IndexError, "max_pool2d_backward:", max_pool2d_backward(zeros({1, 1, 1}), full({1, 1, 1}, 99, DType::Int64), {1, 3, 3}));
  BAD(ValueError, "avg_pool2d:", avg_pool2d(img, Pool2dArgs{.kernel_h = 2, .kernel_w = 2, .dilation_h = 2}));
  BAD(ValueError, "avg_pool2d:", avg_pool2d(img, Pool2dArgs{.kernel_h = 2, .kernel_w = 2}, true, 0));
  BAD(ShapeError, "avg_pool2d_backward:", avg_pool2d_backward(zeros({1, 2, 3, 3}), {1, 2, 5, 5}, Pool2dArgs{.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2}));
  BAD(ValueError, "adaptive_avg_pool2d:", adaptive_avg_pool2d(img, 0, 2));
  BAD(ShapeError, "adaptive_avg_pool2d:", adaptive_avg_pool2d(zeros({1, 2, 0, 5}), 2, 2));
  BAD(ShapeError, "adaptive_avg_pool2d_backward:", adaptive_avg_pool2d_backward(zeros({1, 3, 2, 2}), {1, 2, 5, 5}));
  // optimizer kernel
  BAD(ShapeError, "adam_step_:", adam_step_(x, zeros({3}), x.clone(), x.clone(), {0.1, 0.9, 0.99, 1e-8, 0, 1, false}));
}

namespace {
struct Half : Function {  // forward fine, backward returning two gradients for one input
  std::string name() const override { return "two_grads"; }
  Tensor forward(FunctionCtx&, const std::vector<Tensor>& in) override { return in[0] * 0.5; }
  std::vector<Tensor> backward(FunctionCtx&, const Tensor& dy) override { return {dy, dy}; }
};
struct NoOutput : Function {
  std::string name() const override { return "no_output"; }
  Tensor forward(FunctionCtx&, const std::vector<Tensor>&) override { return Tensor(); }
  std::vector<Tensor> backward(FunctionCtx&, const Tensor&) override { return {}; }
};
struct Saver : Function {
  std::string name() const override { return "saver"; }
  Tensor forward(FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    ctx.save_for_backward({in[0]});
    return in[0] * 2.0;
  }
  std::vector<Tensor> backward(FunctionCtx& ctx, const Tensor& dy) override { return {dy * ctx.saved()[0]}; }
};
}  // namespace

void autograd() {
  Variable w(zeros({2, 3}), true), c(zeros({2, 3}));
  // convolution, pooling and normalization on Variables
  const Variable img(zeros({1, 2, 5, 5})), k3(zeros({4, 2, 3, 3}));
  BAD(ValueError, "conv2d:", conv2d(img, k3, Variable(), {.stride = 2, .padding = "same"}));
  BAD(ValueError, "conv2d:", conv2d(img, k3, Variable(), {.padding = "full"}));
  BAD(ShapeError, "conv2d:", conv2d(img, Variable(zeros({4, 2, 3}))));
  BAD(StateError, "conv2d:", conv2d(Variable(), k3));
  BAD(ShapeError, "conv1d:", conv1d(Variable(zeros({1, 2, 5})), Variable(zeros({4, 3, 3}))));
  BAD(ShapeError, "conv1d:", conv1d(Variable(zeros({1, 2, 2})), Variable(zeros({4, 2, 3}))));
  BAD(ShapeError, "conv1d:", conv1d(Variable(zeros({1, 1, 2, 5})), Variable(zeros({4, 2, 3}))));
  BAD(ValueError, "conv1d:", conv1d(Variable(zeros({1, 2, 5})), Variable(zeros({4, 2, 3})), Variable(), {.padding = {1, 2}}));
  BAD(ValueError, "conv1d:", conv1d(Variable(zeros({1, 2, 5})), Variable(zeros({4, 2, 3})), Variable(), {.groups = 0}));
  BAD(ValueError, "max_pool2d:", max_pool2d(img, 2, {.padding = 2}));
  BAD(ValueError, "avg_pool2d:", avg_pool2d(img, 2, {.divisor_override = 0}));
  BAD(ValueError, "batch_norm:", batch_norm(Variable(zeros({1, 3})), Tensor(), Tensor(), Variable(), Variable(), true));
  BAD(ShapeError, "batch_norm:", batch_norm(Variable(zeros({4, 3})), zeros({2}), ones({2})));
  BAD(ShapeError, "batch_norm:", batch_norm(Variable(zeros({4})), Tensor(), Tensor()));
  BAD(StateError, "batch_norm:", batch_norm(Variable(zeros({4, 3})), zeros({3}), Tensor()));
  BAD(ValueError, "batch_norm:", batch_norm(Variable(zeros({4, 3})), zeros({3}), ones({3}), Variable(), Variable(), true, 1.5));
  BAD(ShapeError, "batch_norm:", batch_norm(Variable(zeros({4, 3})), Tensor(), Tensor(), Variable(ones({4}))));
  BAD(ValueError, "group_norm:", group_norm(Variable(zeros({2, 6})), 4));
  BAD(ValueError, "group_norm:", group_norm(Variable(zeros({2, 6})), 0));
  BAD(ShapeError, "group_norm:", group_norm(Variable(zeros({2, 6})), 3, Variable(ones({3}))));
  BAD(DTypeError, "Variable:", Variable(arange(3), true));
  BAD(StateError, "Variable:", Variable(Tensor()));
  BAD(StateError, "data:", Variable().data());
  BAD(StateError, "set_requires_grad:", (w * 2.0).set_requires_grad(false));
  BAD(DTypeError, "set_data:", w.set_data(arange(3)));
  BAD(StateError, "set_data:", w.set_data(Tensor()));
  BAD(ShapeError, "set_grad:", w.set_grad(zeros({3})));
  BAD(DTypeError, "set_grad:", w.set_grad(zeros({2, 3}, DType::Float64)));
  BAD(StateError, "backward:", c.sum().backward());
  BAD(ShapeError, "backward:", (w * 2.0).backward());
  BAD(ShapeError, "backward:", (w * 2.0).backward(zeros({3})));
  BAD(DTypeError, "backward:", (w * 2.0).backward(zeros({2, 3}, DType::Float64)));
  BAD(StateError, "backward:", [&] { Variable y = (w * w).sum(); y.backward(); y.backward(); }());
  BAD(ValueError, "backward:", run_backward({w.sum()}, {}, false));
  BAD(ValueError, "two_grads:", apply_function<Half>({w}).sum().backward());
  BAD(StateError, "no_output:", apply_function<NoOutput>({w}));
  BAD(StateError, "backward: trying to backward through the graph a second time",
      [&] { Variable y = apply_function<Saver>({w}).sum(); y.backward(); y.backward(); }());
  BAD(StateError, "gradcheck:", gradcheck([](const std::vector<Variable>& v) { return v[0]; }, std::vector<Tensor>{Tensor()}));
  BAD(DTypeError, "gradcheck:", gradcheck([&] { return w.sum(); }, std::vector<Variable>{w}));
  BAD(ValueError, "gradcheck:", gradcheck([](const std::vector<Variable>& v) { return v[0].sum(); }, {zeros({2}, DType::Float64)}, {.atol = -1}));
  BAD(ValueError, "gradcheck:", gradcheck([](const std::vector<Variable>& v) { return v[0].sum(); }, {zeros({1}, DType::Float64).expand({3})}));
  BAD(ValueError, "dropout:", dropout(w, 1.5, true));
  BAD(ValueError, "dropout:", dropout(w, NAN, true));
  BAD(IndexError, "embedding:", embedding(ids({0}), w, 5));
  BAD(ShapeError, "cross_entropy:", cross_entropy(w.reshape({6}), ids({1})));
  BAD(ShapeError, "mse_loss:", mse_loss(w, Variable(zeros({3, 2}))));
  BAD(ShapeError, "matmul:", matmul(Variable(kScalar), w));
  BAD(ValueError, "add:", Variable(arange(6).view({2, 3})) + 0.5);
  BAD(ShapeError, "split_heads:", nn::split_heads(w, 2));
  BAD(ShapeError, "merge_heads:", nn::merge_heads(w));
}

void modules() {
  BAD(ValueError, "Linear:", nn::Linear(0, 3));
  BAD(ValueError, "Linear:", nn::Linear(3, -1));
  BAD(ValueError, "Linear:", nn::Linear(int64_t{1} << 40, int64_t{1} << 40));
  BAD(ValueError, "Embedding:", nn::Embedding(0, 3));
  BAD(IndexError, "Embedding:", nn::Embedding(4, 3, {.padding_idx = 4}));
  BAD(ValueError, "LayerNorm:", nn::LayerNorm(Shape{}));
  BAD(ValueError, "Dropout:", nn::Dropout({.p = -0.1}));
  BAD(ValueError, "MultiheadAttention:", nn::MultiheadAttention(10, 3));
  BAD(ValueError, "MultiheadAttention:", nn::MultiheadAttention(0, 1));
  BAD(ValueError, "Transformer layer:", nn::TransformerEncoderLayer(8, 2, {.activation = "swish"}));
  nn::Linear lin(3, 4);
  BAD(ShapeError, "linear:", lin.forward(Variable(zeros({2, 5}))));
  BAD(DTypeError, "linear:", lin.forward(Variable(zeros({2, 3}, DType::Float64))));
  nn::Embedding emb(5, 2);
  BAD(IndexError, "embedding:", emb.forward(ids({5})));
  BAD(DTypeError, "embedding:", emb.forward(zeros({2})));
  nn::LayerNorm ln({4});
  BAD(ShapeError, "layer_norm:", ln.forward(Variable(zeros({2, 3}))));
  nn::MultiheadAttention mha(8, 2);
  const Variable x(zeros({2, 3, 8}));
  BAD(ShapeError, "MultiheadAttention:", mha.forward(Variable(zeros({3, 8}))));
  BAD(ShapeError, "MultiheadAttention:", mha.forward(x, Variable(zeros({3, 3, 8})), Variable(zeros({3, 3, 8}))));
  BAD(ShapeError, "MultiheadAttention:", mha.forward(x, Variable(zeros({2, 4, 8})), Variable(zeros({2, 5, 8}))));
  BAD(ShapeError, "MultiheadAttention:", mha.forward(x, Variable(zeros({2, 0, 8})), Variable(zeros({2, 0, 8}))));
  BAD(ShapeError, "MultiheadAttention:", mha.forward(x, {.attn_mask = zeros({4, 1, 3, 3}, DType::Bool)}));
  BAD(ShapeError, "MultiheadAttention:", mha.forward(x, {.attn_mask = zeros({3, 4}, DType::Bool)}));
  BAD(DTypeError, "MultiheadAttention:", mha.forward(x, {.attn_mask = zeros({3, 3}, DType::Int64)}));
  BAD(ShapeError, "MultiheadAttention:", mha.forward(x, {.key_padding_mask = zeros({2, 4}, DType::Bool)}));
  BAD(DTypeError, "MultiheadAttention:", mha.forward(x, {.key_padding_mask = zeros({2, 3})}));
  BAD(ShapeError, "MultiheadAttention:", mha.forward(x, {.head_mask = ones({3})}));
  nn::TransformerDecoderLayer dec(8, 2, {.dim_feedforward = 16});
  BAD(ShapeError, "MultiheadAttention:", dec.forward(x, Variable(zeros({3, 4, 8}))));
  nn::GPT gpt(11, 4, {.d_model = 8, .nhead = 2, .num_layers = 1});
  BAD(ShapeError, "GPT:", gpt.forward(zeros({1, 5}, DType::Int64)));
  BAD(ShapeError, "GPT:", gpt.forward(zeros({5}, DType::Int64)));
  BAD(IndexError, "embedding:", gpt.forward(from_vector<int64_t>({11}, {1, 1})));
  nn::Sequential seq;
  BAD(ValueError, "Sequential:", seq.push_back(std::shared_ptr<nn::Linear>()));
  nn::ModuleList list;
  list.emplace_back<nn::Linear>(2, 2);
  BAD(IndexError, "ModuleList:", list.at<nn::Linear>(3));
  BAD(ValueError, "ModuleList:", list.at<nn::LayerNorm>(0));
  BAD(ValueError, "parameter:", lin.parameter("nope"));
  BAD(ValueError, "register_module:", [&] { struct H : nn::Module { std::string type_name() const override { return "H"; } } h; h.register_module("a.b", lin); }());
  BAD(ValueError, "register_forward_hook:", mha.register_forward_hook(nullptr));
  BAD(ValueError, "register_forward_pre_hook:", mha.register_forward_pre_hook(nullptr));
  {
    nn::HookHandle drop = mha.register_forward_hook([](const nn::Module&, const std::vector<Variable>&, std::vector<Variable>& out) {
      out.pop_back();
    });
    BAD(ValueError, "forward hook: 3 outputs became 2", mha.forward(Variable(ones({1, 2, 8}))));
    drop.remove();
    nn::HookHandle add = mha.register_forward_pre_hook([](const nn::Module&, std::vector<Variable>& in) { in.push_back(in[0]); });
    BAD(ValueError, "forward pre-hook: 3 inputs became 4", mha.forward(Variable(ones({1, 2, 8}))));
    add.remove();
  }
  BAD(ValueError, "AttentionCapture:", [&] { nn::AttentionCapture a(mha); a.at("nope"); }());
  // convolution, pooling, normalization, recurrent layers and ModuleDict
  BAD(ValueError, "Conv2d:", nn::Conv2d(3, 4, 3, {.groups = 2}));
  BAD(ValueError, "Conv2d:", nn::Conv2d(3, 4, {3, 0}));
  BAD(ValueError, "Conv2d:", nn::Conv2d(0, 4, 3));
  BAD(ValueError, "Conv2d:", nn::Conv2d(3, 4, 3, {.stride = 2, .padding = "same"}));
  BAD(ValueError, "Conv1d:", nn::Conv1d(3, 4, 3, {.padding = {1, 2}}));
  BAD(ValueError, "Conv1d:", nn::Conv1d(3, 4, 3, {.padding = "half"}));
  nn::Conv2d conv(3, 4, 3);
  BAD(ShapeError, "conv2d:", conv.forward(Variable(zeros({1, 2, 5, 5}))));
  BAD(ShapeError, "conv2d:", conv.forward(Variable(zeros({1, 3, 2, 5}))));
  BAD(DTypeError, "conv2d:", conv.forward(Variable(zeros({1, 3, 5, 5}, DType::Float64))));
  BAD(ShapeError, "max_pool2d:", nn::MaxPool2d(3).forward(Variable(zeros({1, 1, 2, 2}))));
  BAD(ValueError, "AdaptiveAvgPool2d:", nn::AdaptiveAvgPool2d({0, 1}));
  BAD(ValueError, "BatchNorm1d:", nn::BatchNorm1d(0));
  BAD(ValueError, "BatchNorm2d:", nn::BatchNorm2d(3, {.momentum = 2.0}));
  BAD(ShapeError, "BatchNorm2d:", nn::BatchNorm2d(3).forward(Variable(zeros({2, 3, 4}))));
  BAD(ShapeError, "BatchNorm1d:", nn::BatchNorm1d(3).forward(Variable(zeros({2, 4}))));
  BAD(ValueError, "batch_norm:", nn::BatchNorm1d(3).forward(Variable(zeros({1, 3}))));
  BAD(ValueError, "GroupNorm:", nn::GroupNorm(4, 6));
  BAD(ShapeError, "GroupNorm:", nn::GroupNorm(2, 6).forward(Variable(zeros({2, 4, 3}))));
  BAD(ValueError, "RNNCell:", nn::RNNCell(3, 4, {.nonlinearity = "gelu"}));
  BAD(ValueError, "LSTMCell:", nn::LSTMCell(0, 4));
  BAD(ShapeError, "GRUCell:", nn::GRUCell(3, 4).forward(Variable(zeros({2, 5}))));
  BAD(ShapeError, "LSTMCell:", nn::LSTMCell(3, 4).forward(Variable(zeros({2, 3})), std::tuple{Variable(zeros({2, 4})), Variable(zeros({1, 4}))}));
  BAD(ValueError, "LSTM:", nn::LSTM(3, 4, {.num_layers = 0}));
  BAD(ValueError, "GRU:", nn::GRU(3, 4, {.dropout = 1.5}));
  BAD(ValueError, "RNN:", nn::RNN(3, 4, {.nonlinearity = "sigmoid"}));
  nn::GRU gru(3, 4, {.num_layers = 2, .batch_first = true});
  BAD(ShapeError, "GRU:", gru.forward(Variable(zeros({2, 5, 4}))));
  BAD(ShapeError, "GRU:", gru.forward(Variable(zeros({2, 5, 3})), Variable(zeros({1, 2, 4}))));
  BAD(ShapeError, "GRU:", gru.forward(Variable(zeros({2, 0, 3}))));
  BAD(ShapeError, "GRU:", gru.forward(Variable(zeros({2, 5, 3, 1}))));
  BAD(DTypeError, "recurrence_forward:", gru.forward(Variable(zeros({2, 5, 3})), Variable(zeros({2, 2, 4}, DType::Float64))));
  BAD(ShapeError, "recurrence_forward:", recurrence_forward(RNNKind::GRU, zeros({2, 1, 8}), zeros({1, 2}), Tensor(), zeros({6, 2}), Tensor(), false));
  BAD(ShapeError, "recurrence_forward:", recurrence_forward(RNNKind::LSTM, zeros({2, 1, 8}), zeros({1, 2}), Tensor(), zeros({8, 2}), Tensor(), false));
  BAD(ShapeError, "recurrence_backward:", recurrence_backward(RNNKind::Tanh, zeros({3, 1, 2}), Tensor(), zeros({2, 1, 2}), zeros({1, 2}), Tensor(), zeros({2, 2}), Tensor(), RecurrenceForward{}, false));
  nn::ModuleDict dict;
  dict.emplace<nn::Linear>("a", 2, 2);
  BAD(ValueError, "ModuleDict:", dict.at<nn::Linear>("b"));
  BAD(ValueError, "ModuleDict:", dict.at<nn::Conv2d>("a"));
  BAD(ValueError, "register_module:", dict.emplace<nn::Linear>("a", 2, 2));
  BAD(ValueError, "buffer:", nn::BatchNorm1d(2).buffer("running_max"));
  BAD(ValueError, "normal_:", nn::init::normal_(lin.weight, 0, -1));
  BAD(ShapeError, "init:", nn::init::xavier_uniform_(Variable(zeros({3}), true)));
}

void optimizers_and_schedules() {
  Variable w(ones({2}), true), i(arange(2));
  BAD(ValueError, "SGD:", optim::SGD(std::vector<Variable>{}));
  BAD(ValueError, "SGD:", optim::SGD({w}, {.lr = -1}));
  BAD(ValueError, "SGD:", optim::SGD({w}, {.lr = NAN}));
  BAD(ValueError, "SGD:", optim::SGD({w}, {.momentum = -0.5}));
  BAD(ValueError, "SGD:", optim::SGD({w}, {.nesterov = true}));
  BAD(ValueError, "SGD:", optim::SGD({w, w}));
  BAD(DTypeError, "SGD:", optim::SGD({i}));
  BAD(ValueError, "SGD:", optim::SGD({w * 2.0}));
  BAD(ValueError, "Adam:", optim::Adam({w}, {.beta1 = 1.0}));
  BAD(ValueError, "Adam:", optim::Adam({w}, {.eps = -1}));
  BAD(ValueError, "AdamW:", optim::AdamW({w}, {.weight_decay = -0.1}));
  optim::AdamW opt({w});
  BAD(ValueError, "AdamW:", opt.set_lr(INFINITY));
  w.set_name("w");
  (w * w).sum().backward();
  opt.step();
  w.set_data(ones({3}));
  (w * w).sum().backward();
  BAD(ShapeError, "AdamW: parameter 'w'", opt.step());
  BAD(ValueError, "StepLR:", optim::StepLR(opt, 0));
  BAD(ValueError, "StepLR:", optim::StepLR(opt, 2, NAN));
  BAD(ValueError, "WarmupCosineLR:", optim::WarmupCosineLR(opt, 10, 5));
  BAD(ValueError, "WarmupCosineLR:", optim::WarmupCosineLR(opt, 1, 5, 2.0));
  BAD(ValueError, "LRScheduler:", optim::StepLR(opt, 2).set_step(-1));
  BAD(ValueError, "clip_grad_norm_:", optim::clip_grad_norm_({w}, 1.0, 1.0));
  BAD(ValueError, "clip_grad_norm_:", optim::clip_grad_norm_({w}, -1.0));
}

void files() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "minigrad_test_bad_inputs";
  fs::create_directories(dir);
  const std::string file = (dir / "f.safetensors").string();
  auto write = [&](const std::string& bytes) { std::ofstream(file, std::ios::binary) << bytes; };
  auto header = [](const std::string& json) {
    const uint64_t n = json.size();
    return std::string(reinterpret_cast<const char*>(&n), 8) + json;
  };
  BAD(FileError, "load_safetensors:", load_safetensors((dir / "missing").string()));
  BAD(FileError, "load_safetensors:", load_safetensors(dir.string()));
  write("abc");
  BAD(FileError, "load_safetensors:", load_safetensors(file));
  write(header("{\"a\": {\"dtype\": \"F32\"}}"));
  BAD(FileError, "load_safetensors:", load_safetensors(file));
  write(header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}") + std::string(4, 0));
  BAD(FileError, "load_safetensors:", load_safetensors(file));
  write(header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}") + std::string(4, 0));
  BAD(FileError, "load_safetensors:", load_safetensors(file));
  write(header("{\"a\": {\"dtype\": \"BOOL\", \"shape\": [1], \"data_offsets\": [0, 1]}}") + std::string(1, 7));
  BAD(FileError, "load_safetensors:", load_safetensors(file));
  write(header("{\"__metadata__\": {\"k\": 3}}"));
  BAD(FileError, "load_safetensors:", load_safetensors(file));
  write(header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}") + std::string(8, 0));
  BAD(FileError, "load_safetensors:", load_safetensors(file));
  write(header(std::string(100000, '{')));
  BAD(FileError, "load_safetensors:", load_safetensors(file));
  BAD(ValueError, "save_safetensors:", save_safetensors(file, {{"", zeros({1})}}));
  BAD(ValueError, "save_safetensors:", save_safetensors(file, {{"a", zeros({1})}, {"a", zeros({1})}}));
  BAD(StateError, "save_safetensors:", save_safetensors(file, {{"a", Tensor()}}));
  BAD(ValueError, "save_safetensors:", save_safetensors(file, {{"a\xc3", zeros({1})}}));
  BAD(FileError, "save_safetensors:", save_safetensors((dir / "no" / "such" / "f").string(), {{"a", zeros({1})}}));
  nn::Linear lin(2, 2);
  nn::save(lin, file);
  nn::Linear other(2, 3);
  BAD(FileError, "load:", nn::load(other, file));
  optim::SGD sgd(lin.parameters());
  BAD(FileError, "load_checkpoint:", optim::load_checkpoint(file, lin, sgd));
  BAD(ValueError, "save_checkpoint:", optim::save_checkpoint(file, lin, sgd, -1));
  optim::SGD foreign({Variable(zeros({2}), true)});
  BAD(ValueError, "checkpoint:", optim::save_checkpoint(file, lin, foreign, 1));
}

TEST(BadInputs, ViewsAndCreation) { views_and_creation(); }
TEST(BadInputs, Kernels) { kernels(); }
TEST(BadInputs, Autograd) { autograd(); }
TEST(BadInputs, Modules) { modules(); }
TEST(BadInputs, OptimizersAndSchedules) { optimizers_and_schedules(); }
TEST(BadInputs, Files) { files(); }

TEST(BadInputs, Count) {
  // ctest runs each test in a process of its own, so this one makes all the calls again to count
  // them: the suite makes at least 150 bad calls.
  g_cases = 0;
  views_and_creation(), kernels(), autograd(), modules(), optimizers_and_schedules(), files();
  EXPECT_GE(g_cases, 150);
}
