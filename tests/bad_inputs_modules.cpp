// Bad calls of test_bad_inputs.cpp, modules, optimizers and files: layers built or called wrongly
// (Linear to GRU, hooks, containers, init), optimizers and schedules with bad settings or stale
// state, and corrupt or mismatched safetensors, nn::save and checkpoint files.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "bad_inputs.h"
#include "bad_inputs_catalogue.h"

using namespace mg;
using namespace mgtest;

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
  BAD(ValueError, "Conv2d:", nn::Conv2d(3, 4, 3, {.stride = 2, .padding = PaddingMode::Same}));
  BAD(ValueError, "Conv1d:", nn::Conv1d(3, 4, 3, {.padding = {1, 2}}));
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
  BAD(ValueError, "LSTMCell:", nn::LSTMCell(0, 4));
  BAD(ShapeError, "GRUCell:", nn::GRUCell(3, 4)(Variable(zeros({2, 5}))));
  BAD(ShapeError, "LSTMCell:",
      nn::LSTMCell(3, 4)(Variable(zeros({2, 3})), std::tuple{Variable(zeros({2, 4})), Variable(zeros({1, 4}))}));
  BAD(ValueError, "LSTM:", nn::LSTM(3, 4, {.num_layers = 0}));
  BAD(ValueError, "GRU:", nn::GRU(3, 4, {.dropout = 1.5}));
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
