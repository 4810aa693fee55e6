// Bad calls through the public API, as a new user makes them: each must throw the right typed
// mg::Error with a message that names the op, never crash, hang, abort or return garbage. The
// whole file also runs under AddressSanitizer + UndefinedBehaviorSanitizer (make test), which
// turns a read past a buffer into a failure. Grouped as the API is: tensors, autograd, modules,
// optimizers, files; the kernels' bad inputs are in test_bad_kernel_inputs.cpp.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <unistd.h>

#include "bad_inputs.h"

using namespace mg;
using namespace mgtest;
using testing::HasSubstr;

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
  BAD(ValueError, "conv2d:", conv2d(img, k3, Variable(), {.stride = 2, .padding = "same"}));
  BAD(ValueError, "conv2d:", conv2d(img, k3, Variable(), {.padding = "full"}));
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
  BAD(ShapeError, "linear:", lin(Variable(zeros({2, 5}))));
  BAD(DTypeError, "linear:", lin(Variable(zeros({2, 3}, DType::Float64))));
  nn::Embedding emb(5, 2);
  BAD(IndexError, "embedding:", emb(ids({5})));
  BAD(DTypeError, "embedding:", emb(zeros({2})));
  nn::LayerNorm ln({4});
  BAD(ShapeError, "layer_norm:", ln(Variable(zeros({2, 3}))));
  nn::MultiheadAttention mha(8, 2);
  const Variable x(zeros({2, 3, 8}));
  BAD(ShapeError, "MultiheadAttention:", mha(Variable(zeros({3, 8}))));
  BAD(ShapeError, "MultiheadAttention:", mha(x, Variable(zeros({3, 3, 8})), Variable(zeros({3, 3, 8}))));
  BAD(ShapeError, "MultiheadAttention:", mha(x, Variable(zeros({2, 4, 8})), Variable(zeros({2, 5, 8}))));
  BAD(ShapeError, "MultiheadAttention:", mha(x, Variable(zeros({2, 0, 8})), Variable(zeros({2, 0, 8}))));
  BAD(ShapeError, "MultiheadAttention:", mha(x, {.attn_mask = zeros({4, 1, 3, 3}, DType::Bool)}));
  BAD(ShapeError, "MultiheadAttention:", mha(x, {.attn_mask = zeros({3, 4}, DType::Bool)}));
  BAD(DTypeError, "MultiheadAttention:", mha(x, {.attn_mask = zeros({3, 3}, DType::Int64)}));
  BAD(ShapeError, "MultiheadAttention:", mha(x, {.key_padding_mask = zeros({2, 4}, DType::Bool)}));
  BAD(DTypeError, "MultiheadAttention:", mha(x, {.key_padding_mask = zeros({2, 3})}));
  BAD(ShapeError, "MultiheadAttention:", mha(x, {.head_mask = ones({3})}));
  nn::TransformerDecoderLayer dec(8, 2, {.dim_feedforward = 16});
  BAD(ShapeError, "MultiheadAttention:", dec(x, Variable(zeros({3, 4, 8}))));
  models::GPT gpt(11, 4, {.d_model = 8, .nhead = 2, .num_layers = 1});
  BAD(ShapeError, "GPT:", gpt(zeros({1, 5}, DType::Int64)));
  BAD(ShapeError, "GPT:", gpt(zeros({5}, DType::Int64)));
  BAD(IndexError, "embedding:", gpt(from_vector<int64_t>({11}, {1, 1})));
  nn::Sequential seq;
  BAD(ValueError, "Sequential:", seq.push_back(std::shared_ptr<nn::Linear>()));
  nn::ModuleList list;
  list.emplace_back<nn::Linear>(2, 2);
  BAD(IndexError, "ModuleList:", list.at<nn::Linear>(3));
  BAD(ValueError, "ModuleList:", list.at<nn::LayerNorm>(0));
  BAD(ValueError, "parameter:", lin.parameter("nope"));
  BAD(ValueError, "register_module:", [&] {
    struct H : nn::Module {
      std::string type_name() const override { return "H"; }
    } h;
    h.register_module("a.b", lin);
  }());
  BAD(ValueError, "register_forward_hook:", mha.register_forward_hook(nullptr));
  BAD(ValueError, "register_forward_pre_hook:", mha.register_forward_pre_hook(nullptr));
  {
    nn::HookHandle drop = mha.register_forward_hook(
        [](const nn::Module&, const std::vector<Variable>&, std::vector<Variable>& out) { out.pop_back(); });
    BAD(ValueError, "forward hook: 3 outputs became 2", mha(Variable(ones({1, 2, 8}))));
    drop.remove();
    nn::HookHandle add =
        mha.register_forward_pre_hook([](const nn::Module&, std::vector<Variable>& in) { in.push_back(in[0]); });
    BAD(ValueError, "forward pre-hook: 3 inputs became 4", mha(Variable(ones({1, 2, 8}))));
    add.remove();
  }
  BAD(ValueError, "AttentionCapture:", [&] {
    inspect::AttentionCapture a(mha);
    a.at("nope");
  }());
  // convolution, pooling, normalization, recurrent layers and ModuleDict
  BAD(ValueError, "Conv2d:", nn::Conv2d(3, 4, 3, {.groups = 2}));
  BAD(ValueError, "Conv2d:", nn::Conv2d(3, 4, {3, 0}));
  BAD(ValueError, "Conv2d:", nn::Conv2d(0, 4, 3));
  BAD(ValueError, "Conv2d:", nn::Conv2d(3, 4, 3, {.stride = 2, .padding = "same"}));
  BAD(ValueError, "Conv1d:", nn::Conv1d(3, 4, 3, {.padding = {1, 2}}));
  BAD(ValueError, "Conv1d:", nn::Conv1d(3, 4, 3, {.padding = "half"}));
  nn::Conv2d conv(3, 4, 3);
  BAD(ShapeError, "conv2d:", conv(Variable(zeros({1, 2, 5, 5}))));
  BAD(ShapeError, "conv2d:", conv(Variable(zeros({1, 3, 2, 5}))));
  BAD(DTypeError, "conv2d:", conv(Variable(zeros({1, 3, 5, 5}, DType::Float64))));
  BAD(ShapeError, "max_pool2d:", nn::MaxPool2d(3)(Variable(zeros({1, 1, 2, 2}))));
  BAD(ValueError, "AdaptiveAvgPool2d:", nn::AdaptiveAvgPool2d({0, 1}));
  BAD(ValueError, "BatchNorm1d:", nn::BatchNorm1d(0));
  BAD(ValueError, "BatchNorm2d:", nn::BatchNorm2d(3, {.momentum = 2.0}));
  BAD(ShapeError, "BatchNorm2d:", nn::BatchNorm2d(3)(Variable(zeros({2, 3, 4}))));
  BAD(ShapeError, "BatchNorm1d:", nn::BatchNorm1d(3)(Variable(zeros({2, 4}))));
  BAD(ValueError, "batch_norm:", nn::BatchNorm1d(3)(Variable(zeros({1, 3}))));
  BAD(ValueError, "GroupNorm:", nn::GroupNorm(4, 6));
  BAD(ShapeError, "GroupNorm:", nn::GroupNorm(2, 6)(Variable(zeros({2, 4, 3}))));
  BAD(ValueError, "RNNCell:", nn::RNNCell(3, 4, {.nonlinearity = "gelu"}));
  BAD(ValueError, "LSTMCell:", nn::LSTMCell(0, 4));
  BAD(ShapeError, "GRUCell:", nn::GRUCell(3, 4)(Variable(zeros({2, 5}))));
  BAD(ShapeError, "LSTMCell:",
      nn::LSTMCell(3, 4)(Variable(zeros({2, 3})), std::tuple{Variable(zeros({2, 4})), Variable(zeros({1, 4}))}));
  BAD(ValueError, "LSTM:", nn::LSTM(3, 4, {.num_layers = 0}));
  BAD(ValueError, "GRU:", nn::GRU(3, 4, {.dropout = 1.5}));
  BAD(ValueError, "RNN:", nn::RNN(3, 4, {.nonlinearity = "sigmoid"}));
  nn::GRU gru(3, 4, {.num_layers = 2, .batch_first = true});
  BAD(ShapeError, "GRU:", gru(Variable(zeros({2, 5, 4}))));
  BAD(ShapeError, "GRU:", gru(Variable(zeros({2, 5, 3})), Variable(zeros({1, 2, 4}))));
  BAD(ShapeError, "GRU:", gru(Variable(zeros({2, 0, 3}))));
  BAD(ShapeError, "GRU:", gru(Variable(zeros({2, 5, 3, 1}))));
  BAD(DTypeError, "recurrence_forward:", gru(Variable(zeros({2, 5, 3})), Variable(zeros({2, 2, 4}, DType::Float64))));
  BAD(ShapeError, "recurrence_forward:",
      recurrence_forward(RNNKind::GRU, zeros({2, 1, 8}), zeros({1, 2}), Tensor(), zeros({6, 2}), Tensor(), false));
  BAD(ShapeError, "recurrence_forward:",
      recurrence_forward(RNNKind::LSTM, zeros({2, 1, 8}), zeros({1, 2}), Tensor(), zeros({8, 2}), Tensor(), false));
  BAD(ShapeError, "recurrence_backward:",
      recurrence_backward(RNNKind::Tanh, zeros({3, 1, 2}), Tensor(), zeros({2, 1, 2}), zeros({1, 2}), Tensor(),
                          zeros({2, 2}), Tensor(), RecurrenceForward{}, false));
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
  BAD(ValueError, "StepLR: step must be >= 0", optim::StepLR(opt, 2).set_step(-1));  // (it named LRScheduler)
  BAD(ValueError, "clip_grad_norm_:", optim::clip_grad_norm_({w}, 1.0, 1.0));
  BAD(ValueError, "clip_grad_norm_:", optim::clip_grad_norm_({w}, -1.0));
}

void files() {
  namespace fs = std::filesystem;
  // a folder per process: BadInputs.Files and BadInputs.Count both run this, in parallel under ctest
  const fs::path dir = fs::temp_directory_path() / ("minigrad_test_bad_inputs_" + std::to_string(::getpid()));
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
  write(
      header(
          "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}") +
      std::string(8, 0));
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
  fs::remove_all(dir);
}

// The surface added since the first catalogue (einsum, pad, interpolate, attention's new options,
// the schedulers, LBFGS, the tokenizers, the data loader): each case once crashed, hung, overflowed,
// returned garbage, or named the wrong op.
void new_surface() {
  // scaled_dot_product_attention: 0 query heads over 1 key head divided by zero (SIGFPE) under
  // create_graph; head size 0 without a scale made every weight NaN
  {
    Variable q(zeros({1, 0, 3, 4}), true), k(ones({1, 1, 3, 4}), true), v(ones({1, 1, 3, 4}), true);
    const Variable y = sum(scaled_dot_product_attention(q, k, v));
    EXPECT_NO_THROW(grad({y}, {k}, {.create_graph = true, .allow_unused = true}));
    BAD(ShapeError, "scaled_dot_product_attention: q and k have head size 0",
        scaled_dot_product_attention(Variable(ones({1, 1, 3, 0})), Variable(ones({1, 1, 3, 0})),
                                     Variable(ones({1, 1, 3, 4}))));
    BAD(DTypeError, "self_attention_qkv: expected a floating input",
        self_attention_qkv(Variable(ones({1, 2, 6}, DType::Int64)), 1));
  }
  // pad: crops past the input (an IndexError from narrow), INT64_MIN (negated before any check), a
  // fill value the dtype cannot hold (named full), sizes no memory holds (std::bad_alloc), and
  // pad_index called directly (SIGFPE on circular of size 0, UB, out-of-range indices)
  BAD(ShapeError, "pad: cropping (-5, 10) removes more than the 3 elements", pad(ones({3}), {-5, 10}));
  BAD(ShapeError, "pad: cropping (2, -4)", pad(Variable(ones({3})), {2, -4}));
  BAD(ShapeError, "pad:", pad(ones({3}), {std::numeric_limits<int64_t>::min(), kBig}));
  BAD(ShapeError, "pad:", pad(Variable(ones({3})), {std::numeric_limits<int64_t>::min(), kBig}));
  BAD(ValueError, "pad: 1e+30 is not an int64 value", pad(ones({2}, DType::Int64), {1, 1}, "constant", 1e30));
  BAD(MemoryError, "pad:", pad(ones({1}), {int64_t{1} << 40, 0}, "replicate"));
  BAD(ValueError, "pad: circular padding (1, 0) must not wrap", pad_index(0, 1, 0, "circular"));
  BAD(ValueError, "pad: replicate padding", pad_index(0, 1, 1, "replicate"));
  BAD(ValueError, "pad: reflect padding (5, 0) must be smaller", pad_index(1, 5, 0, "reflect"));
  BAD(ValueError, "pad: negative size", pad_index(-5, 0, 0, "reflect"));
  BAD(ValueError, "pad: mode must be", pad_index(3, 1, 1, "bogus"));
  // a reflect pad of nothing is still a copy, as Tensor pad's (the Variable form returned x itself)
  {
    Variable x(ones({3}));
    EXPECT_NE(pad(x, {}, "reflect").data().storage(), x.data().storage());
  }
  // repeat of size-1 dims returned a view of x (stride 0): writing the "copy" wrote x
  {
    const Tensor x = ones({1});
    Tensor y = repeat(x, {3});
    y.fill_(5);
    EXPECT_EQ(x.item(), 1.0);
  }
  // repeat_interleave: one count for 2^40 slices looped over them all (a hang); counts past memory
  // or int64 are named
  EXPECT_EQ(repeat_interleave(ones({1}).expand({int64_t{1} << 40}), from_vector<int64_t>({0}, {1}), 0).numel(), 0);
  BAD(MemoryError,
      "repeat_interleave:", repeat_interleave(ones({1}).expand({int64_t{1} << 40}), from_vector<int64_t>({1}, {1}), 0));
  BAD(ValueError, "repeat_interleave:", repeat_interleave(ones({4, 4}), int64_t{1} << 60, 0));
  BAD(MemoryError, "repeat_interleave:", repeat_interleave(ones({3}), int64_t{1} << 40));
  BAD(StateError, "tril: the tensor is undefined", tril(Tensor()));
  BAD(MemoryError, "tril:", tril(ones({1, 1}).expand({1 << 20, 1 << 20})));
  BAD(MemoryError, "flip:", flip(ones({1}).expand({int64_t{1} << 40}), {0}));
  BAD(MemoryError, "cumsum:", cumsum(ones({1}).expand({int64_t{1} << 40}), 0));
  // einsum: an int64 operand was named matmul
  BAD(DTypeError, "einsum: the operands must be floating",
      einsum("ij,jk->ik", {ones({2, 2}, DType::Int64), ones({2, 2}, DType::Int64)}));
  BAD(DTypeError,
      "einsum:", einsum("ij,jk->ik", {Variable(ones({2, 2}, DType::Int64)), Variable(ones({2, 2}, DType::Int64))}));
  // interpolate: the public matrix builder took any mode, dtype and scale (a negative one wrote
  // out of bounds); huge sizes need dense matrices no memory holds
  BAD(ValueError, "interpolate: mode must be",
      interpolation_matrix(2, 3, "bogus", false, std::nullopt, DType::Float32));
  BAD(DTypeError, "interpolate: expected float32 or float64",
      interpolation_matrix(2, 3, "linear", false, std::nullopt, DType::Int64));
  BAD(ValueError, "interpolate: scale factors must be finite and positive",
      interpolation_matrix(2, 3, "nearest", false, -1e-6, DType::Float32));
  BAD(ValueError, "interpolate: scale factors must be finite and positive",
      interpolation_matrix(2, 3, "nearest", false, NAN, DType::Float32));
  BAD(MemoryError, "interpolate: resampling 1 positions to 1099511627776",
      interpolate(zeros({1, 1, 1}), {.size = {int64_t{1} << 40}}));
  // layer norm's eps (rms_norm, group_norm and batch_norm refused a bad one; layer_norm gave NaN)
  BAD(ValueError, "layer_norm: eps must be finite and >= 0, got -1",
      layer_norm(Variable(ones({2, 3})), {3}, Variable(), Variable(), -1.0));
  BAD(ValueError, "layer_norm: eps must be finite and >= 0, got nan",
      layer_norm(ones({2, 3}), {3}, Tensor(), Tensor(), NAN));
  BAD(ValueError, "LayerNorm: eps must be finite and >= 0", nn::LayerNorm({3}, {.eps = -1}));
  // rotary tables and the module: sizes past memory were named "empty"
  BAD(Error, "rotary_tables:", rotary_tables(kBig - 1, 2));
  BAD(Error, "RotaryEmbedding:", nn::RotaryEmbedding(int64_t{1} << 62, {.max_seq_len = 1}));

  // schedules: a rate the optimizer itself would refuse (negative, inf), OneCycleLR's phases of no
  // length (NaN rates; PyTorch's ZeroDivisionError), a plateau schedule inside a sequence, a saved
  // NaN best, step counts at INT64_MAX, and errors naming the base class
  Variable w(zeros({1}), true);
  optim::SGD opt({w}, {.lr = 0.1});
  {
    optim::SGD big({w}, {.lr = 10});
    BAD(ValueError, "LambdaLR: at step 0 the rate of group 0 (initial rate 10) would be inf",
        optim::LambdaLR(big, [](int64_t) { return 1e308; }));
  }
  {
    optim::StepLR huge(opt, 1, 1e300);
    huge.step();
    BAD(ValueError, "StepLR: at step 2 the rate", huge.step());
    EXPECT_EQ(huge.last_step(), 1);  // a refused step leaves the schedule where it was
  }
  BAD(ValueError, "OneCycleLR: with total_steps 2 and pct_start 0.5 the first phase has no steps",
      optim::OneCycleLR(opt, 0.1, 2, {.pct_start = 0.5, .cycle_momentum = false}));
  BAD(ValueError, "OneCycleLR: with total_steps 4 and pct_start 1 the last phase",
      optim::OneCycleLR(opt, 0.1, 4, {.pct_start = 1, .cycle_momentum = false}));
  BAD(ValueError, "OneCycleLR: div_factor",
      optim::OneCycleLR(opt, 0.1, 10, {.cycle_momentum = false, .final_div_factor = 1e-310}));
  BAD(ValueError, "OneCycleLR: max_lr 0.1 with div_factor",
      optim::OneCycleLR(opt, 0.1, 10, {.cycle_momentum = false, .div_factor = 1e-310}));
  {
    optim::StepLR a(opt, 2);
    optim::ReduceLROnPlateau plateau(opt);
    BAD(ValueError, "SequentialLR: scheduler 1 is a ReduceLROnPlateau", optim::SequentialLR(opt, {&a, &plateau}, {3}));
    BAD(FileError, "ReduceLROnPlateau: the saved best metric is NaN",
        plateau.check_state({{"best", NAN}, {"num_bad_epochs", 0}, {"cooldown_counter", 0}}));
    plateau.set_step(kBig);
    BAD(StateError, "ReduceLROnPlateau: the step count", plateau.step(1.0));
    BAD(ValueError, "StepLR: step must be >= 0", a.set_step(-1));
    a.set_step(kBig);
    BAD(StateError, "StepLR: the step count", a.step());
    optim::OneCycleLR cycle(opt, 0.1, 3, {.cycle_momentum = false});
    optim::SequentialLR seq(opt, {&a, &cycle}, {1});
    seq.set_step(4);
    BAD(ValueError, "SequentialLR: tried to step 4 times", seq.step());
  }
  // LBFGS: max_iter * 5 / 4 overflowed (one iteration instead of many); NaN and inf in a saved state
  {
    Variable p(full({2}, 3.0, DType::Float64), true);
    optim::LBFGS lbfgs({p}, {.max_iter = int64_t{1} << 61});
    lbfgs.step([&] {
      lbfgs.zero_grad();
      Variable l = sum(p * p);
      l.backward();
      return l;
    });
    EXPECT_LT(std::abs(p.data().at({0})), 1e-6);  // converged: the run was not cut to one iteration
    std::map<std::string, Tensor> state = lbfgs.shared_state();
    state["scalars"] = from_vector<double>({1, NAN, 0, 1, 5}, {5});
    BAD(FileError, "load_checkpoint: LBFGS's H_diag is nan", lbfgs.check_shared_state(state));
    state = lbfgs.shared_state();
    state["scalars"] = from_vector<double>({1, 1, 0, 1, 1e300}, {5});
    BAD(FileError, "load_checkpoint: LBFGS's n_iter", lbfgs.check_shared_state(state));
    state = lbfgs.shared_state();
    state["d"] = full(state["d"].shape(), INFINITY, DType::Float64);
    BAD(FileError, "load_checkpoint: LBFGS \"d\" holds NaN or inf", lbfgs.check_shared_state(state));
  }

  // the data loader: prefetch_factor INT64_MAX deadlocked (taken + depth overflowed), the epoch
  // count wrapped, and a dataset's error named only the dataset
  {
    data::DataLoader dl(data::TensorDataset({arange(20).to(DType::Float32).reshape({20, 1})}),
                        {.batch_size = 1, .num_workers = 1, .prefetch_factor = kBig});
    int64_t batches = 0;
    for (const data::Batch& b : dl) batches += b.size() == 1;
    EXPECT_EQ(batches, 20);
    dl.set_epoch(kBig);
    BAD(StateError, "DataLoader: the epoch count", dl.begin());
    struct Ragged : data::Dataset {
      int64_t size() const override { return 3; }
      data::Batch get(int64_t i) const override { return {zeros({i + 1})}; }
    };
    BAD(ShapeError, "DataLoader: field 0 of example 1",
        data::DataLoader(std::make_shared<Ragged>(), {.batch_size = 3}).batch(0, 0));
  }

  // tokenizers: a vocabulary id nested 200 000 deep overflowed the stack (the message dumped it);
  // WordPiece was cubic in a word's length with the length cap raised, took invalid UTF-8 in
  // wordpiece(), and named tokenize or id_to_token for errors of encode and decode
  {
    const std::string dir = ::testing::TempDir() + "minigrad_bad_tokenizers_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/vocab.json") << "{\"a\": " << std::string(200000, '[') << std::string(200000, ']') << "}";
    std::ofstream(dir + "/merges.txt") << "#version: 0.2\n";
    BAD(ValueError, "the id of token 'a' is a JSON array",
        data::GPT2Tokenizer::from_files(dir + "/vocab.json", dir + "/merges.txt"));
    data::WordPieceOptions o;
    o.max_input_chars_per_word = kBig;
    const data::WordPieceTokenizer wp({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##a", "b"}, o);
    EXPECT_EQ(wp.tokenize(std::string(20000, 'a') + "b").size(), 1u);  // [UNK]: "##b" is not a piece; it finished
    EXPECT_EQ(wp.tokenize(std::string(20000, 'a')).size(), 20000u);
    BAD(ValueError, "WordPieceTokenizer::wordpiece: the word is not valid UTF-8 (byte offset 0)",
        wp.wordpiece("\x80hello"));
    BAD(ValueError, "WordPieceTokenizer::encode:", wp.encode("hello \xff"));
    BAD(ValueError, "WordPieceTokenizer::encode_batch:", wp.encode_batch({"a", "\xff"}));
    BAD(IndexError, "WordPieceTokenizer::decode: id 99 is out of range", wp.decode({0, 99}));
    std::filesystem::remove_all(dir);
  }
}

TEST(BadInputs, ViewsAndCreation) { views_and_creation(); }
TEST(BadInputs, NewSurface) { new_surface(); }
TEST(BadInputs, Autograd) { autograd(); }
TEST(BadInputs, Modules) { modules(); }
TEST(BadInputs, OptimizersAndSchedules) { optimizers_and_schedules(); }
TEST(BadInputs, Files) { files(); }

TEST(BadInputs, Count) {
  // ctest runs each test in a process of its own, so this one makes all the calls again to count
  // them (the kernels' are counted in test_bad_kernel_inputs.cpp).
  g_cases = 0;
  views_and_creation(), autograd(), modules(), optimizers_and_schedules(), files(), new_surface();
  std::printf("bad calls: %d\n", g_cases);
  EXPECT_GE(g_cases, 230);
}
