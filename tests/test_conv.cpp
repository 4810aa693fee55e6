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
  EXPECT_EQ(conv2d(x, w, Variable(), {.padding = PaddingMode::Same}).shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(conv2d(x, w, Variable(), {.stride = 2, .padding = 1}).shape(), (Shape{1, 1, 2, 2}));
  // conv1d: [1, 2, 3, 4] with [1, -1] -> differences
  expect_values(conv1d(Variable(tensor({1, 2, 4, 7}, {1, 1, 4})), Variable(tensor({1, -1}, {1, 1, 2}))).data(),
                {1, 1, 3}, {-1, -2, -3});
}

TEST(Conv, GroupsAreSeparateConvolutions) {
  // groups=2 equals two convolutions on the two halves of the channels, concatenated
  const Tensor x = rnd({2, 4, 5, 5}, 1), w = rnd({6, 2, 3, 3}, 2);
  const Tensor y =
      conv2d(x, w, Tensor(), Conv2dArgs{.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1, .groups = 2});
  const Conv2dArgs one{.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1};
  const Tensor y0 = conv2d(x.narrow(1, 0, 2), w.narrow(0, 0, 3), Tensor(), one);
  const Tensor y1 = conv2d(x.narrow(1, 2, 2), w.narrow(0, 3, 3), Tensor(), one);
  mgtest::expect_close(y, concat({y0, y1}, 1), 1e-12, 1e-12);
}

TEST(Conv, Gradcheck) {
  expect_gradcheck([](const V& v) { return conv2d(v[0], v[1], v[2]); },
                   {rnd({2, 3, 5, 4}, 1), rnd({4, 3, 3, 2}, 2), rnd({4}, 3)});
  expect_gradcheck(
      [](const V& v) {
        return conv2d(v[0], v[1], Variable(), {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}});
      },
      {rnd({2, 2, 6, 5}, 4), rnd({3, 2, 3, 2}, 5)});
  expect_gradcheck([](const V& v) { return conv2d(v[0], v[1], v[2], {.padding = 1, .groups = 2}); },
                   {rnd({1, 4, 4, 4}, 6), rnd({2, 2, 3, 3}, 7), rnd({2}, 8)});
  expect_gradcheck([](const V& v) { return conv2d(v[0], v[1], Variable(), {.padding = PaddingMode::Same}); },
                   {rnd({2, 2, 4, 5}, 9), rnd({2, 2, 2, 3}, 10)});
  expect_gradcheck([](const V& v) { return conv2d(v[0], v[1], v[2]); },
                   {rnd({4, 3, 5}, 11), rnd({2, 4, 1, 1}, 12), rnd({2}, 13)});  // unbatched, 1x1
  expect_gradcheck([](const V& v) { return conv1d(v[0], v[1], v[2], {.stride = 2, .padding = 1}); },
                   {rnd({2, 3, 7}, 14), rnd({2, 3, 3}, 15), rnd({2}, 16)});
  expect_gradcheck(
      [](const V& v) {
        return conv1d(v[0], v[1], Variable(), {.padding = PaddingMode::Same, .dilation = 2, .groups = 2});
      },
      {rnd({2, 4, 6}, 17), rnd({4, 2, 2}, 18)});
}

TEST(Conv, GoldenPyTorch) {
  expect_golden("conv2d_bias", [](const V& v) { return conv2d(v[0], v[1], v[2]); });
  expect_golden("conv2d_stride_pad_dilation", [](const V& v) {
    return conv2d(v[0], v[1], Variable(), {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}});
  });
  expect_golden("conv2d_groups", [](const V& v) { return conv2d(v[0], v[1], v[2], {.padding = 1, .groups = 2}); });
  expect_golden("conv2d_same_even_kernel",
                [](const V& v) { return conv2d(v[0], v[1], Variable(), {.padding = PaddingMode::Same}); });
  expect_golden("conv2d_pointwise", [](const V& v) { return conv2d(v[0], v[1], v[2]); });
  expect_golden("conv1d_pad_stride", [](const V& v) { return conv1d(v[0], v[1], v[2], {.stride = 2, .padding = 1}); });
  expect_golden("conv1d_groups_dilation", [](const V& v) {
    return conv1d(v[0], v[1], Variable(), {.padding = PaddingMode::Same, .dilation = 2, .groups = 3});
  });
}

// The definition, as loops: y[n, o, i, j] = b[o] + sum_{c, p, q} x[n, g Cg + c, i sh - pt + p dh, j sw - pl + q dw]
// W[o, c, p, q] (zero outside the image), with dx, dW, db by the chain rule through the same sum.
TEST(Conv, MatchesTheDefinitionOnManyShapes) {
  struct Case {
    int64_t N, C, H, W, O, kh, kw, groups;
    Conv2dArgs a;
  };
  const std::vector<Case> cases = {
      {40,
       2,
       4,
       4,
       3,
       3,
       3,
       1,
       {.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}},  // blocks of 32 images, a partial one
      {5,
       4,
       6,
       7,
       6,
       3,
       3,
       2,
       {.pad_top = 2, .pad_bottom = 2, .pad_left = 2, .pad_right = 2, .dilation_h = 2, .dilation_w = 2}},
      {3, 3, 5, 6, 2, 2, 4, 1, {.pad_top = 0, .pad_bottom = 1, .pad_left = 1, .pad_right = 2}},  // "same" for an even
                                                                                                 // kernel
      {7,
       3,
       7,
       5,
       4,
       3,
       2,
       1,
       {.stride_h = 2, .stride_w = 3, .pad_top = 1, .pad_bottom = 0, .pad_left = 0, .pad_right = 2}},
      {9, 6, 3, 3, 6, 1, 1, 3, {}},    // pointwise, grouped, several images per block
      {1, 4, 30, 30, 2, 1, 1, 1, {}},  // one image with more than 512 pixels: the direct path
      {2, 2, 3, 3, 2, 3, 3, 1, {.pad_top = 3, .pad_bottom = 3, .pad_left = 3, .pad_right = 3}},  // rows entirely in the
                                                                                                 // padding
      {3,
       2,
       9,
       9,
       4,
       3,
       3,
       1,
       {.stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}},
      // a padded image bigger than its columns (padding 5, stride 4): the bounds-checked im2col
      {2,
       2,
       3,
       3,
       2,
       1,
       1,
       1,
       {.stride_h = 4, .stride_w = 4, .pad_top = 5, .pad_bottom = 5, .pad_left = 5, .pad_right = 5}},
      {2, 16, 8, 8, 32, 3, 3, 1, {.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}},  // digits_cnn's shape
  };
  uint64_t seed = 1;
  for (const Case& k : cases) {
    SCOPED_TRACE(fmt::format("x ({}, {}, {}, {}), W ({}, {}, {}, {}), groups {}", k.N, k.C, k.H, k.W, k.O,
                             k.C / k.groups, k.kh, k.kw, k.groups));
    Conv2dArgs a = k.a;
    a.groups = k.groups;
    const int64_t Cg = k.C / k.groups, Og = k.O / k.groups;
    const Tensor x = rnd({k.N, k.C, k.H, k.W}, seed++), w = rnd({k.O, Cg, k.kh, k.kw}, seed++), b = rnd({k.O}, seed++);
    const Tensor y = conv2d(x, w, b, a);
    const Tensor dy = rnd(y.shape(), seed++);
    const Conv2dGrads got = conv2d_backward(dy, x, w, a, true, true, true);
    // float32 (its products run on oneDNN, float64's on OpenBLAS), against the float64 results
    const Tensor y32 = conv2d(x.to(DType::Float32), w.to(DType::Float32), b.to(DType::Float32), a);
    const Conv2dGrads got32 =
        conv2d_backward(dy.to(DType::Float32), x.to(DType::Float32), w.to(DType::Float32), a, true, true, true);
    const int64_t Ho = y.size(2), Wo = y.size(3);
    std::vector<double> ry(static_cast<size_t>(y.numel())), rdx(static_cast<size_t>(x.numel()), 0.0),
        rdw(static_cast<size_t>(w.numel()), 0.0), rdb(static_cast<size_t>(k.O), 0.0);
    const std::vector<double> px = x.to_vector<double>(), pw = w.to_vector<double>(), pb = b.to_vector<double>(),
                              pdy = dy.to_vector<double>();
    for (int64_t n = 0; n < k.N; ++n)
      for (int64_t o = 0; o < k.O; ++o)
        for (int64_t i = 0; i < Ho; ++i)
          for (int64_t j = 0; j < Wo; ++j) {
            const size_t yi = static_cast<size_t>(((n * k.O + o) * Ho + i) * Wo + j);
            double acc = pb[static_cast<size_t>(o)];
            rdb[static_cast<size_t>(o)] += pdy[yi];
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t p = 0; p < k.kh; ++p)
                for (int64_t q = 0; q < k.kw; ++q) {
                  const int64_t h = i * a.stride_h - a.pad_top + p * a.dilation_h,
                                col = j * a.stride_w - a.pad_left + q * a.dilation_w;
                  if (h < 0 || h >= k.H || col < 0 || col >= k.W) continue;
                  const size_t xi = static_cast<size_t>(((n * k.C + (o / Og) * Cg + c) * k.H + h) * k.W + col);
                  const size_t wi = static_cast<size_t>(((o * Cg + c) * k.kh + p) * k.kw + q);
                  acc += px[xi] * pw[wi];
                  rdx[xi] += pdy[yi] * pw[wi];
                  rdw[wi] += pdy[yi] * px[xi];
                }
            ry[yi] = acc;
          }
    mgtest::expect_close(y, from_vector(ry, y.shape()), 1e-12, 1e-12);
    mgtest::expect_close(got.dx, from_vector(rdx, x.shape()), 1e-12, 1e-12);
    mgtest::expect_close(got.dweight, from_vector(rdw, w.shape()), 1e-12, 1e-12);
    mgtest::expect_close(got.dbias, from_vector(rdb, {k.O}), 1e-12, 1e-12);
    mgtest::expect_close(y32.to(DType::Float64), y, 1e-5, 1e-5);
    mgtest::expect_close(got32.dx.to(DType::Float64), got.dx, 1e-5, 1e-5);
    mgtest::expect_close(got32.dweight.to(DType::Float64), got.dweight, 1e-5, 1e-5);
    mgtest::expect_close(got32.dbias.to(DType::Float64), got.dbias, 1e-5, 1e-5);
  }
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
  EXPECT_THAT(msg([&] {
                conv2d(x, Variable(zeros({4, 2, 3, 3})));
              }),
              testing::HasSubstr("conv2d: input has 3 channels but weight (4, 2, 3, 3)"));
  EXPECT_THAT(msg([&] {
                conv2d(x, Variable(zeros({4, 3, 7, 3})));
              }),
              testing::HasSubstr("is larger than the padded input"));
  EXPECT_THAT(msg([&] { conv2d(x, w, Variable(), {.stride = 2, .padding = PaddingMode::Same}); }),
              testing::HasSubstr("padding=PaddingMode::Same needs stride 1"));
  EXPECT_THAT(msg([&] {
                conv2d(x, Variable(zeros({4, 1, 3, 3})), Variable(), {.groups = 3});
              }),
              testing::HasSubstr("out_channels 4 is not divisible by groups 3"));
  EXPECT_THAT(msg([&] { conv2d(x, w, Variable(zeros({3}))); }), testing::HasSubstr("bias has shape (3,)"));
  EXPECT_THAT(msg([&] {
                conv1d(Variable(zeros({1, 3, 2})), Variable(zeros({1, 3, 3})));
              }),
              testing::HasSubstr("conv1d:"));
  EXPECT_THROW(conv2d(x, w, Variable(), {.dilation = 0}), ValueError);
  EXPECT_THROW(conv2d(Variable(zeros({5, 5})), w), ShapeError);
}
