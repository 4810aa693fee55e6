// conv2d and conv1d: hand values, gradcheck over every argument, PyTorch golden values, the bits
// not depending on the thread count, errors.
#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using V = std::vector<Variable>;

TEST(Conv, HandValues) {
  // x = 1..9 as a 3x3 image, W = [[1, 2], [3, 4]]: each output is a window's dot with W
  Variable x(arange(1, 10, 1, DType::Float64).reshape({1, 1, 3, 3}) * 1.0, true);
  Variable w(tensor({1, 2, 3, 4}, {1, 1, 2, 2}).to(DType::Float64), true);
  Variable b(tensor({0.5}, {1}).to(DType::Float64), true);
  Variable y = conv2d(x, w, b);
  expect_values(y.data(), {1, 1, 2, 2}, {37.5, 47.5, 67.5, 77.5});
  y.backward(ones({1, 1, 2, 2}, DType::Float64));
  // dx: the sum of the weights that touch each pixel; dW: the sum of each weight's pixels; db: 4
  expect_values(x.grad(), {1, 1, 3, 3}, {1, 3, 2, 4, 10, 6, 3, 7, 4});
  expect_values(w.grad(), {1, 1, 2, 2}, {12, 16, 24, 28});
  expect_values(b.grad(), {1}, {4});
  // padding 1: the corner output sees only x[0, 0], through W[1, 1]
  EXPECT_EQ(conv2d(x, w, Variable(), {.padding = 1}).data().reshape({-1}).to_vector<double>()[0], 4.0);
  // padding "same" keeps 3x3; stride 2 with padding 1 gives 2x2
  EXPECT_EQ(conv2d(x, w, Variable(), {.padding = "same"}).shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(conv2d(x, w, Variable(), {.stride = 2, .padding = 1}).shape(), (Shape{1, 1, 2, 2}));
  // conv1d: [1, 2, 3, 4] with [1, -1] -> differences
  expect_values(conv1d(Variable(tensor({1, 2, 4, 7}, {1, 1, 4})), Variable(tensor({1, -1}, {1, 1, 2}))).data(), {1, 1, 3},
                {-1, -2, -3});
}

TEST(Conv, GroupsAreSeparateConvolutions) {
  // groups=2 equals two convolutions on the two halves of the channels, concatenated
  const Tensor x = rnd({2, 4, 5, 5}, 1), w = rnd({6, 2, 3, 3}, 2);
  const Tensor y = conv2d(x, w, Tensor(), Conv2dArgs{.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1, .groups = 2});
  const Conv2dArgs one{.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1};
  const Tensor y0 = conv2d(x.narrow(1, 0, 2), w.narrow(0, 0, 3), Tensor(), one);
  const Tensor y1 = conv2d(x.narrow(1, 2, 2), w.narrow(0, 3, 3), Tensor(), one);
  mgtest::expect_close(y, concat({y0, y1}, 1), 1e-12, 1e-12);
}

TEST(Conv, Gradcheck) {
  expect_gradcheck([](const V& v) { return conv2d(v[0], v[1], v[2]); }, {rnd({2, 3, 5, 4}, 1), rnd({4, 3, 3, 2}, 2), rnd({4}, 3)});
  expect_gradcheck([](const V& v) { return conv2d(v[0], v[1], Variable(), {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}}); },
                   {rnd({2, 2, 6, 5}, 4), rnd({3, 2, 3, 2}, 5)});
  expect_gradcheck([](const V& v) { return conv2d(v[0], v[1], v[2], {.padding = 1, .groups = 2}); },
                   {rnd({1, 4, 4, 4}, 6), rnd({2, 2, 3, 3}, 7), rnd({2}, 8)});
  expect_gradcheck([](const V& v) { return conv2d(v[0], v[1], Variable(), {.padding = "same"}); }, {rnd({2, 2, 4, 5}, 9), rnd({2, 2, 2, 3}, 10)});
  expect_gradcheck([](const V& v) { return conv2d(v[0], v[1], v[2]); }, {rnd({4, 3, 5}, 11), rnd({2, 4, 1, 1}, 12), rnd({2}, 13)});  // unbatched, 1x1
  expect_gradcheck([](const V& v) { return conv1d(v[0], v[1], v[2], {.stride = 2, .padding = 1}); },
                   {rnd({2, 3, 7}, 14), rnd({2, 3, 3}, 15), rnd({2}, 16)});
  expect_gradcheck([](const V& v) { return conv1d(v[0], v[1], Variable(), {.padding = "same", .dilation = 2, .groups = 2}); },
                   {rnd({2, 4, 6}, 17), rnd({4, 2, 2}, 18)});
}

TEST(Conv, GoldenPyTorch) {
  expect_golden("conv2d_bias", [](const V& v) { return conv2d(v[0], v[1], v[2]); });
  expect_golden("conv2d_stride_pad_dilation",
                [](const V& v) { return conv2d(v[0], v[1], Variable(), {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}}); });
  expect_golden("conv2d_groups", [](const V& v) { return conv2d(v[0], v[1], v[2], {.padding = 1, .groups = 2}); });
  expect_golden("conv2d_same_even_kernel", [](const V& v) { return conv2d(v[0], v[1], Variable(), {.padding = "same"}); });
  expect_golden("conv2d_pointwise", [](const V& v) { return conv2d(v[0], v[1], v[2]); });
  expect_golden("conv1d_pad_stride", [](const V& v) { return conv1d(v[0], v[1], v[2], {.stride = 2, .padding = 1}); });
  expect_golden("conv1d_groups_dilation",
                [](const V& v) { return conv1d(v[0], v[1], Variable(), {.padding = "same", .dilation = 2, .groups = 3}); });
}

TEST(Conv, SameBitsForAnyThreadCount) {
  // dW sums over the batch in fixed chunks of images, so 1 and 2 threads agree bit for bit
  const Tensor x = rnd({9, 3, 8, 8}, 1).to(DType::Float32), w = rnd({5, 3, 3, 3}, 2).to(DType::Float32);
  const Tensor dy = rnd({9, 5, 8, 8}, 3).to(DType::Float32);
  const Conv2dArgs a{.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1};
  const int before = get_num_threads();
  std::vector<std::vector<float>> runs;
  for (int t : {1, 2}) {
    set_num_threads(t);
    Conv2dGrads g = conv2d_backward(dy, x, w, a, true, true, true);
    std::vector<float> all = conv2d(x, w, Tensor(), a).to_vector<float>();
    for (const Tensor& part : {g.dx, g.dweight, g.dbias})
      for (float v : part.to_vector<float>()) all.push_back(v);
    runs.push_back(all);
  }
  set_num_threads(before);
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(Conv, Errors) {
  const Variable x(zeros({1, 3, 5, 5})), w(zeros({4, 3, 3, 3}));
  auto msg = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(msg([&] { conv2d(x, Variable(zeros({4, 2, 3, 3}))); }), testing::HasSubstr("conv2d: input has 3 channels but weight (4, 2, 3, 3)"));
  EXPECT_THAT(msg([&] { conv2d(x, Variable(zeros({4, 3, 7, 3}))); }), testing::HasSubstr("is larger than the padded input"));
  EXPECT_THAT(msg([&] { conv2d(x, w, Variable(), {.stride = 2, .padding = "same"}); }), testing::HasSubstr("padding=\"same\" needs stride 1"));
  EXPECT_THAT(msg([&] { conv2d(x, w, Variable(), {.padding = "full"}); }), testing::HasSubstr("\"same\" or \"valid\""));
  EXPECT_THAT(msg([&] { conv2d(x, Variable(zeros({4, 1, 3, 3})), Variable(), {.groups = 3}); }),
              testing::HasSubstr("out_channels 4 is not divisible by groups 3"));
  EXPECT_THAT(msg([&] { conv2d(x, w, Variable(zeros({3}))); }), testing::HasSubstr("bias has shape (3,)"));
  EXPECT_THAT(msg([&] { conv1d(Variable(zeros({1, 3, 2})), Variable(zeros({1, 3, 3}))); }), testing::HasSubstr("conv1d:"));
  EXPECT_THROW(conv2d(x, w, Variable(), {.dilation = 0}), ValueError);
  EXPECT_THROW(conv2d(Variable(zeros({5, 5})), w), ShapeError);
}
