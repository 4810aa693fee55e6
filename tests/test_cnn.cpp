// The layers a convolutional net is built from: Conv1d and Conv2d, the pooling layers, BatchNorm
// (running statistics as buffers), GroupNorm, the small modules (Flatten, Identity, activations)
// and ModuleDict: PyTorch golden values, init, names, modes, save and load.
#include <cmath>
#include <filesystem>

#include "helpers.h"

using namespace mg;
using mgtest::check_module;
using mgtest::expect_close;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

namespace {
std::pair<Variable, Variable> just(const Variable& y) { return {y, Variable()}; }
}  // namespace

TEST(ConvLayers, GoldenPyTorch) {
  nn::Conv2d conv(3, 4, 3, {.stride = 2, .padding = 1});
  check_module(conv, "module_conv2d", [&](const V& v) { return just(conv(v[0])); });
  nn::Conv2d grouped(4, 6, {2, 3}, {.padding = PaddingMode::Same, .groups = 2, .bias = false});
  check_module(grouped, "module_conv2d_groups_same", [&](const V& v) { return just(grouped(v[0])); });
  nn::Conv1d conv1(3, 5, 3, {.padding = 2, .dilation = 2});
  check_module(conv1, "module_conv1d", [&](const V& v) { return just(conv1(v[0])); });
}

TEST(ConvLayers, InitNamesAndSummaryFollowPyTorch) {
  Generator g(1);
  nn::Conv2d conv(8, 16, 3, {.padding = 1, .groups = 2}, g);
  EXPECT_EQ(conv.weight.shape(), (Shape{16, 4, 3, 3}));
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = 4 * 3 * 3 = 36
  EXPECT_LE(max(abs(conv.weight.data())).item(), 1 / 6.0);
  EXPECT_NEAR(mean(conv.weight.data() * conv.weight.data()).item(), 1 / 36.0 / 3, 0.15 / 36.0 / 3);
  EXPECT_LE(max(abs(conv.bias.data())).item(), 1 / 6.0);
  std::vector<std::string> names;
  for (auto& [n, p] : conv.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(conv.summary().substr(0, conv.summary().find('\n')),
            "Conv2d(8, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=2)");
  EXPECT_THAT(nn::Conv1d(2, 4, 5, {.padding = PaddingMode::Same}).summary(),
              HasSubstr("Conv1d(2, 4, kernel_size=(5,), stride=(1,), padding='same')"));
  EXPECT_THROW(nn::Conv2d(3, 4, 3, {.groups = 2}), ValueError);  // 3 channels in 2 groups
  EXPECT_THROW(nn::Conv2d(3, 4, 0), ValueError);
  EXPECT_THROW(nn::Conv2d(3, 4, 3, {.stride = 2, .padding = PaddingMode::Same}), ValueError);
}

TEST(Pooling, LayersCallTheirOps) {
  const Variable x(rnd({2, 3, 6, 7}, 1));
  expect_close(nn::MaxPool2d(3, {.stride = 2, .padding = 1})(x).data(),
               max_pool2d(x, 3, {.stride = 2, .padding = 1}).data(), 0, 0);
  expect_close(nn::AvgPool2d(2)(x).data(), avg_pool2d(x, 2).data(), 0, 0);
  const Variable g = nn::AdaptiveAvgPool2d(1)(x);
  EXPECT_EQ(g.shape(), (Shape{2, 3, 1, 1}));
  expect_close(g.data().reshape({2, 3}), mean(x.data(), {2, 3}), 1e-12, 1e-12);  // global average pooling
  EXPECT_THAT(
      nn::MaxPool2d(2).summary(),
      HasSubstr("MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=false)"));
}

TEST(BatchNorm, GoldenPyTorchWithRunningStatistics) {
  nn::BatchNorm2d bn(3, {.momentum = 0.3});
  check_module(bn, "module_batch_norm2d_train", [&](const V& v) { return just(bn(v[0])); });
  EXPECT_EQ(bn.num_batches_tracked().item(), 1);
  nn::BatchNorm1d eval(4);
  eval.eval();
  check_module(eval, "module_batch_norm1d_eval", [&](const V& v) { return just(eval(v[0])); });
  EXPECT_EQ(eval.num_batches_tracked().item(), 7);  // evaluation counts nothing
  nn::BatchNorm1d cumulative(3, {.momentum = std::nullopt});
  check_module(cumulative, "module_batch_norm1d_cumulative", [&](const V& v) { return just(cumulative(v[0])); });
}

TEST(BatchNorm, BuffersHavePyTorchsNamesAndAreSavedAndLoaded) {
  nn::BatchNorm2d bn(2);
  std::vector<std::string> names;
  for (auto& [n, b] : bn.named_buffers()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(bn.num_batches_tracked().dtype(), DType::Int64);
  for (int i = 0; i < 3; ++i) bn(Variable(rnd({4, 2, 3, 3}, i).to(DType::Float32) * 2.0 + 1.0));
  const auto path = std::filesystem::temp_directory_path() / "mg_bn_test.safetensors";
  nn::save(bn, path.string());
  nn::BatchNorm2d fresh(2);
  nn::load(fresh, path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(fresh.running_mean().to_vector<float>(), bn.running_mean().to_vector<float>());
  EXPECT_EQ(fresh.running_var().to_vector<float>(), bn.running_var().to_vector<float>());
  EXPECT_EQ(fresh.num_batches_tracked().item(), 3);
  // evaluation uses them: one example alone gives the same output as inside a batch
  fresh.eval();
  const Tensor batch = rnd({5, 2, 3, 3}, 9).to(DType::Float32);
  const Tensor alone = fresh(Variable(batch.narrow(0, 2, 1))).data();
  expect_close(alone, fresh(Variable(batch)).data().narrow(0, 2, 1), 1e-6, 1e-6);
  // after to(float64) the running statistics are float64 and still used
  fresh.to(DType::Float64);
  EXPECT_EQ(fresh.running_mean().dtype(), DType::Float64);
  expect_close(fresh(Variable(batch.narrow(0, 2, 1).to(DType::Float64))).data(), alone.to(DType::Float64), 1e-5, 1e-5);
}

TEST(BatchNorm, WithoutTrackingUsesBatchStatisticsAlways) {
  nn::BatchNorm1d bn(2, {.affine = false, .track_running_stats = false});
  EXPECT_TRUE(bn.named_buffers().empty());
  EXPECT_TRUE(bn.parameters().empty());
  bn.eval();
  const Variable y = bn(Variable(tensor({1, 10, 3, 30}, {2, 2}).to(DType::Float64)));
  expect_values(y.data(), {2, 2}, {-1, -1, 1, 1}, 1e-5);
  EXPECT_THROW(bn(Variable(zeros({2, 3}))), ShapeError);                  // 3 channels
  EXPECT_THROW(nn::BatchNorm2d(2)(Variable(zeros({2, 2}))), ShapeError);  // not 4-D
}

TEST(GroupNorm, GoldenPyTorch) {
  nn::GroupNorm gn(2, 4);
  check_module(gn, "module_group_norm", [&](const V& v) { return just(gn(v[0])); });
  EXPECT_THROW(nn::GroupNorm(3, 4), ValueError);
  EXPECT_THROW(gn(Variable(zeros({2, 3, 5}))), ShapeError);
}

TEST(SmallModules, ComputeWhatTheirNamesSay) {
  const Variable x(tensor({-2, -0.5, 0, 1.5}, {2, 2}).to(DType::Float64));
  expect_close(nn::SiLU()(x).data(), silu(x).data(), 0, 0);
  expect_values(nn::LeakyReLU({.negative_slope = 0.1})(x).data(), {2, 2}, {-0.2, -0.05, 0, 1.5}, 1e-12);
  expect_close(nn::Softplus({.beta = 2, .threshold = 1})(x).data(), softplus(x, 2, 1).data(), 0, 0);
  expect_values(nn::ELU({.alpha = 2})(x).data(), {2, 2}, {2 * std::expm1(-2.0), 2 * std::expm1(-0.5), 0, 1.5}, 1e-12);
  EXPECT_EQ(nn::Identity()(x).data().storage(), x.data().storage());
  const Variable img(zeros({2, 3, 4, 5}));
  EXPECT_EQ(nn::Flatten()(img).shape(), (Shape{2, 60}));
  EXPECT_EQ(nn::Flatten(0, 1)(img).shape(), (Shape{6, 4, 5}));
  EXPECT_EQ(nn::Unflatten(1, {3, -1})(Variable(zeros({2, 12}))).shape(), (Shape{2, 3, 4}));
  EXPECT_THAT(nn::LeakyReLU().summary(), HasSubstr("LeakyReLU(negative_slope=0.01)"));
}

TEST(ModuleDict, ModulesByNameRegisteredUnderTheirNames) {
  nn::ModuleDict heads;
  heads.emplace<nn::Linear>("digit", 4, 10);
  heads.emplace<nn::Linear>("parity", 4, 2);
  EXPECT_EQ(heads.keys(), (std::vector<std::string>{"digit", "parity"}));
  EXPECT_TRUE(heads.contains("parity"));
  EXPECT_FALSE(heads.contains("colour"));
  EXPECT_EQ(heads.at<nn::Linear>("parity")(Variable(zeros({3, 4}))).shape(), (Shape{3, 2}));
  std::vector<std::string> names;
  for (auto& [n, p] : heads.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"digit.weight", "digit.bias", "parity.weight", "parity.bias"}));
  EXPECT_THROW(heads.emplace<nn::Linear>("digit", 4, 3), ValueError);  // taken
  EXPECT_THROW(heads.emplace<nn::Linear>("a.b", 4, 3), ValueError);
  try {
    heads.at<nn::Linear>("colour");
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no module named \"colour\" (it has: digit, parity)"));
  }
  EXPECT_THROW(heads.at<nn::Conv2d>("digit"), ValueError);  // a Linear, not a Conv2d
}
