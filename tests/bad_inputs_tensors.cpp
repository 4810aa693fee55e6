// Bad calls of test_bad_inputs.cpp, tensors and autograd: views, creation and conversions of
// Tensors; convolution, pooling and normalization on Variables, Variable's rules, backward,
// custom Functions that return the wrong gradients, and gradcheck.
#include <cmath>
#include <limits>

#include "bad_inputs.h"
#include "bad_inputs_catalogue.h"

using namespace mg;
using namespace mgtest;

namespace {
const Tensor kScalar = scalar_tensor(2);
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
  BAD(ValueError, "conv2d:", conv2d(img, k3, Variable(), {.stride = 2, .padding = PaddingMode::Same}));
  BAD(ShapeError, "conv2d:", conv2d(img, Variable(zeros({4, 2, 3}))));
  BAD(StateError, "conv2d:", conv2d(Variable(), k3));
  BAD(ShapeError, "conv1d:", conv1d(Variable(zeros({1, 2, 5})), Variable(zeros({4, 3, 3}))));
  BAD(ShapeError, "conv1d:", conv1d(Variable(zeros({1, 2, 2})), Variable(zeros({4, 2, 3}))));
  BAD(ShapeError, "conv1d:", conv1d(Variable(zeros({1, 1, 2, 5})), Variable(zeros({4, 2, 3}))));
  BAD(ValueError,
      "conv1d:", conv1d(Variable(zeros({1, 2, 5})), Variable(zeros({4, 2, 3})), Variable(), {.padding = {1, 2}}));
  BAD(ValueError, "conv1d:", conv1d(Variable(zeros({1, 2, 5})), Variable(zeros({4, 2, 3})), Variable(), {.groups = 0}));
  BAD(ValueError, "max_pool2d:", max_pool2d(img, 2, {.padding = 2}));
  BAD(ValueError, "avg_pool2d:", avg_pool2d(img, 2, {.divisor_override = 0}));
  BAD(ValueError, "batch_norm:", batch_norm(Variable(zeros({1, 3})), Tensor(), Tensor(), Variable(), Variable(), true));
  BAD(ShapeError, "batch_norm:", batch_norm(Variable(zeros({4, 3})), zeros({2}), ones({2})));
  BAD(ShapeError, "batch_norm:", batch_norm(Variable(zeros({4})), Tensor(), Tensor()));
  BAD(StateError, "batch_norm:", batch_norm(Variable(zeros({4, 3})), zeros({3}), Tensor()));
  BAD(ValueError,
      "batch_norm:", batch_norm(Variable(zeros({4, 3})), zeros({3}), ones({3}), Variable(), Variable(), true, 1.5));
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
  BAD(StateError, "backward:", [&] {
    Variable y = (w * w).sum();
    y.backward();
    y.backward();
  }());
  BAD(ValueError, "backward:", run_backward({w.sum()}, {}, false));
  BAD(ValueError, "two_grads:", apply_function<Half>({w}).sum().backward());
  BAD(StateError, "no_output:", apply_function<NoOutput>({w}));
  BAD(StateError, "backward: trying to backward through the graph a second time", [&] {
    Variable y = apply_function<Saver>({w}).sum();
    y.backward();
    y.backward();
  }());
  BAD(StateError,
      "gradcheck:", gradcheck([](const std::vector<Variable>& v) { return v[0]; }, std::vector<Tensor>{Tensor()}));
  BAD(DTypeError, "gradcheck:", gradcheck([&] { return w.sum(); }, std::vector<Variable>{w}));
  BAD(ValueError, "gradcheck:",
      gradcheck([](const std::vector<Variable>& v) { return v[0].sum(); }, {zeros({2}, DType::Float64)}, {.atol = -1}));
  BAD(ValueError, "gradcheck:",
      gradcheck([](const std::vector<Variable>& v) { return v[0].sum(); }, {zeros({1}, DType::Float64).expand({3})}));
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
