// The ops of the toolbox round that are not part of a LLaMA block: repeat, flip,
// repeat_interleave, lerp, addmm, baddbmm, normalize, cosine_similarity, masked_select, pad,
// interpolate and nn::Upsample, the new initialisers and clip_grad_value_. Golden values from PyTorch 2.x
// (tests/golden/gen_golden_modern.py).
#include <cmath>
#include <functional>

#include "helpers.h"

using namespace mg;
using namespace mgtest;

namespace {
using V = std::vector<Variable>;
}  // namespace

TEST(Toolbox, GoldenPyTorch) {
  expect_golden("repeat", [](const V& v) { return repeat(v[0], {2, 1, 2}); });
  expect_golden("flip", [](const V& v) { return flip(v[0], {0, 2}); });
  expect_golden("repeat_interleave_dim", [](const V& v) { return repeat_interleave(v[0], 2, 1); });
  expect_golden("repeat_interleave_flat", [](const V& v) { return repeat_interleave(v[0], 3); });
  expect_golden("repeat_interleave_counts", [](const V& v) { return repeat_interleave(v[0], v[1].data(), 0); });
  expect_golden("lerp_tensor", [](const V& v) { return lerp(v[0], v[1], v[2]); });
  expect_golden("lerp_scalar", [](const V& v) { return lerp(v[0], v[1], 0.7); });
  expect_golden("addmm", [](const V& v) { return addmm(v[0], v[1], v[2], 0.5, 2.0); });
  expect_golden("baddbmm", [](const V& v) { return baddbmm(v[0], v[1], v[2], 2.0, 0.5); });
  expect_golden("normalize_p2", [](const V& v) { return normalize(v[0]); });
  expect_golden("normalize_p1_dim0", [](const V& v) { return normalize(v[0], 1.0, 0); });
  expect_golden("normalize_p3", [](const V& v) { return normalize(v[0], 3.0, -1); });
  expect_golden("cosine_similarity", [](const V& v) { return cosine_similarity(v[0], v[1]); });
  expect_golden("masked_select", [](const V& v) { return masked_select(v[0], v[1].data()); });
  expect_golden("pad_constant", [](const V& v) { return pad(v[0], {1, 2, 0, 1}, PadMode::Constant, 0.5); });
  expect_golden("pad_constant_crop", [](const V& v) { return pad(v[0], {-1, 2, 1, -1}); });
  expect_golden("pad_reflect", [](const V& v) { return pad(v[0], {2, 1}, PadMode::Reflect); });
  expect_golden("pad_reflect_2d", [](const V& v) { return pad(v[0], {1, 2, 3, 1}, PadMode::Reflect); });
  expect_golden("pad_replicate", [](const V& v) { return pad(v[0], {2, 1, 1, 2}, PadMode::Replicate); });
  expect_golden("pad_circular", [](const V& v) { return pad(v[0], {4, 2, 1, 3}, PadMode::Circular); });
}

TEST(Toolbox, InterpolateGoldenPyTorch) {
  auto I = [](InterpolateOptions o) { return [o](const V& v) { return interpolate(v[0], o); }; };
  expect_golden("interp_nearest_size", I({.size = {5, 7}}));
  expect_golden("interp_nearest_scale", I({.scale_factor = {1.7}}));
  expect_golden("interp_nearest_down_1d", I({.size = {3}}));
  expect_golden("interp_nearest_3d", I({.size = {3, 4, 5}}));
  expect_golden("interp_linear", I({.size = {8}, .mode = InterpolateMode::Linear, .align_corners = false}));
  expect_golden("interp_linear_align", I({.size = {8}, .mode = InterpolateMode::Linear, .align_corners = true}));
  expect_golden("interp_bilinear", I({.size = {5, 6}, .mode = InterpolateMode::Bilinear}));
  expect_golden("interp_bilinear_align", I({.size = {5, 6}, .mode = InterpolateMode::Bilinear, .align_corners = true}));
  expect_golden("interp_bilinear_scale", I({.scale_factor = {1.5, 2.5}, .mode = InterpolateMode::Bilinear}));
  expect_golden("interp_bilinear_down", I({.size = {2, 3}, .mode = InterpolateMode::Bilinear}));
  // the other modes, and recompute_scale_factor (values and gradients against PyTorch 2.x)
  expect_golden("interp_bicubic", I({.size = {5, 7}, .mode = InterpolateMode::Bicubic}));
  expect_golden("interp_bicubic_align", I({.size = {6, 3}, .mode = InterpolateMode::Bicubic, .align_corners = true}));
  expect_golden("interp_bicubic_scale", I({.scale_factor = {1.5, 0.6}, .mode = InterpolateMode::Bicubic}));
  expect_golden("interp_nearest_exact", I({.size = {5, 3}, .mode = InterpolateMode::NearestExact}));
  expect_golden("interp_nearest_exact_scale", I({.scale_factor = {1.7}, .mode = InterpolateMode::NearestExact}));
  expect_golden("interp_area", I({.size = {2, 3}, .mode = InterpolateMode::Area}));
  expect_golden("interp_area_1d_up", I({.size = {9}, .mode = InterpolateMode::Area}));
  expect_golden("interp_nearest_recompute", I({.scale_factor = {1.7}, .recompute_scale_factor = true}));
  expect_golden("interp_bilinear_recompute",
                I({.scale_factor = {1.5, 2.3}, .mode = InterpolateMode::Bilinear, .recompute_scale_factor = true}));
  // the module: the same op
  nn::Upsample up({.scale_factor = {2}, .mode = InterpolateMode::Bilinear, .align_corners = true});
  EXPECT_EQ(up.extra_repr(), "scale_factor=2, mode='bilinear', align_corners=True");
  const Variable x(rnd({1, 2, 3, 3}, 4));
  EXPECT_EQ(up(x).data().to_vector<double>(),
            interpolate(x, {.scale_factor = {2}, .mode = InterpolateMode::Bilinear, .align_corners = true})
                .data()
                .to_vector<double>());
  EXPECT_EQ(nn::Upsample({.size = {4, 6}}).extra_repr(), "size=(4, 6), mode='nearest'");
  // nearest with a scale factor reads floor(i / scale), as PyTorch 1.13 does, also when the output is
  // exactly twice the input (F.interpolate(arange(3.), scale_factor=2.1): 0 0 0 1 1 2; with size=6:
  // 0 0 1 1 2 2, read from torch 1.13 by hand)
  const Tensor r = arange(0.0, 3.0).reshape({1, 1, 3});
  EXPECT_EQ(interpolate(r, {.scale_factor = {2.1}}).to_vector<double>(), std::vector<double>({0, 0, 0, 1, 1, 2}));
  EXPECT_EQ(interpolate(r, {.size = {6}}).to_vector<double>(), std::vector<double>({0, 0, 1, 1, 2, 2}));
}

TEST(Toolbox, ConvTransposeMatchesTorch) {
  nn::ConvTranspose2d ct(4, 6, {3, 2}, {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2});
  EXPECT_EQ(ct.weight.shape(), Shape({4, 3, 3, 2}));
  check_module(ct, "conv_transpose2d", [&](const V& in) { return std::pair{ct(in[0]), Variable()}; });
  nn::ConvTranspose2d ctd(3, 2, 3, {.stride = {1, 2}, .padding = {0, 1}, .bias = false, .dilation = 2});
  check_module(ctd, "conv_transpose2d_dilation", [&](const V& in) { return std::pair{ctd(in[0]), Variable()}; });
  nn::ConvTranspose1d ct1(2, 4, 3, {.stride = 3, .padding = 1, .output_padding = 2});
  check_module(ct1, "conv_transpose1d", [&](const V& in) { return std::pair{ct1(in[0]), Variable()}; });
  EXPECT_EQ(ct.extra_repr(),
            "4, 6, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), output_padding=(1, 1), groups=2");
  // a stride-2 transposed convolution undoes a stride-2 convolution's shape: 7 -> 4 -> 7 with output_padding 0
  Variable x(ones({1, 1, 7, 7})), w(ones({1, 1, 3, 3}));
  const Variable down = conv2d(x, w, Variable(), {.stride = 2, .padding = 1});
  EXPECT_EQ(conv_transpose2d(down, w, Variable(), {.stride = 2, .padding = 1}).shape(), Shape({1, 1, 7, 7}));
  EXPECT_EQ(conv_transpose2d(down, w, Variable(), {.stride = 2, .padding = 1, .output_padding = 1}).shape(),
            Shape({1, 1, 8, 8}));
  // the adjoint of conv2d: <conv2d(a, w), b> = <a, conv_transpose2d(b, w)>
  const Tensor a = rnd({2, 3, 6, 5}, 1), wt = rnd({4, 3, 3, 2}, 2), b = rnd({2, 4, 3, 3}, 3);
  const double lhs = sum(conv2d(Variable(a), Variable(wt), Variable(), {.stride = 2, .padding = 1}).data() * b).item();
  const double rhs =
      sum(a * conv_transpose2d(Variable(b), Variable(wt), Variable(), {.stride = 2, .padding = 1, .output_padding = 1})
                  .data())
          .item();
  EXPECT_NEAR(lhs, rhs, 1e-12);
}

TEST(Toolbox, ConvTransposeAllocatesOnlyItsOutput) {
  // its forward (conv2d's input gradient) once allocated a tensor of the output's size only to
  // pass the output's shape along: twice the memory of the result
  const Tensor x = rnd({2, 3, 10, 10}, 1), w = rnd({3, 4, 3, 3}, 2);
  auto peak_of = [](const std::function<void()>& f) {
    reset_peak_memory_stats();
    const size_t before = memory_allocated();
    f();
    return max_memory_allocated() - before;
  };
  const size_t one_output = peak_of([] { Tensor t = empty({2, 4, 12, 12}, DType::Float64); });
  const size_t transposed = peak_of([&] {
    const Tensor y = conv_transpose2d(Variable(x), Variable(w)).data();
    EXPECT_EQ(y.shape(), Shape({2, 4, 12, 12}));
  });
  EXPECT_LE(transposed, one_output + 1024);  // the output and a broadcast zero, nothing of its size more
}

TEST(Toolbox, ConvTransposeGradcheckAndErrors) {
  expect_gradcheck(
      [](const V& v) {
        return conv_transpose2d(v[0], v[1], v[2], {.stride = 2, .padding = {1, 0}, .output_padding = 1, .groups = 2});
      },
      {rnd({1, 4, 2, 3}, 1), rnd({4, 1, 2, 3}, 2), rnd({2}, 3)});
  expect_gradcheck([](const V& v) { return conv_transpose1d(v[0], v[1], Variable(), {.stride = 2, .dilation = 2}); },
                   {rnd({2, 2, 3}, 4), rnd({2, 3, 2}, 5)});
  Variable x(ones({1, 4, 3, 3})), w(ones({4, 2, 3, 3}));
  EXPECT_THROW(conv_transpose2d(x, Variable(ones({3, 2, 3, 3}))), ShapeError);  // channels
  EXPECT_THROW(conv_transpose2d(x, w, Variable(), {.stride = 2, .output_padding = 2}), ValueError);
  EXPECT_THROW(conv_transpose2d(x, w, Variable(), {.groups = 3}), ValueError);
  EXPECT_THROW(conv_transpose2d(x, w, Variable(ones({3}))), ShapeError);         // bias
  EXPECT_THROW(conv_transpose2d(x, w, Variable(), {.padding = 3}), ShapeError);  // nothing left
  EXPECT_THROW(conv_transpose2d(Variable(ones({1, 4, 3, 3}, DType::Float64)), w), DTypeError);
  EXPECT_THROW(conv_transpose1d(Variable(ones({1, 4, 3})), Variable(ones({4, 2, 3, 3}))), ShapeError);
  EXPECT_THROW(nn::ConvTranspose2d(4, 6, 3, {.groups = 4}), ValueError);
}

TEST(Toolbox, InterpolateHandValuesAndErrors) {
  // (1, 2) bilinear to 3 with align_corners: the middle is the mean
  const Tensor x = from_vector<double>({1, 3}, {1, 1, 2});
  EXPECT_EQ(interpolate(x, {.size = {3}, .mode = InterpolateMode::Linear, .align_corners = true}).to_vector<double>(),
            std::vector<double>({1, 2, 3}));
  EXPECT_EQ(interpolate(x, {.scale_factor = {2}}).to_vector<double>(), std::vector<double>({1, 1, 3, 3}));
  Variable v(ones({1, 1, 4, 4}));
  for (const InterpolateOptions& o : {InterpolateOptions{.scale_factor = {0}}, InterpolateOptions{.scale_factor = {-2}},
                                      InterpolateOptions{.size = {2}, .scale_factor = {2}}, InterpolateOptions{},
                                      InterpolateOptions{.size = {2, 2, 2}}, InterpolateOptions{.size = {0}},
                                      InterpolateOptions{.size = {2}, .mode = InterpolateMode::Linear},
                                      InterpolateOptions{.size = {2}, .align_corners = true}}) {
    try {
      interpolate(v, o);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), testing::HasSubstr("interpolate: "));
    }
  }
  EXPECT_THROW(interpolate(Variable(ones({4, 4})), {.size = {2}}), ShapeError);  // no (N, C)
  EXPECT_THROW(interpolate(Variable(ones({1, 1, 4}, DType::Int64)), {.size = {2}}), DTypeError);
  EXPECT_THROW(nn::Upsample({.scale_factor = {0}}), ValueError);
  // the newer modes' own rules
  auto what = [](const auto& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const Variable x3(ones({1, 1, 4})), x4(ones({1, 1, 4, 4}));
  EXPECT_THAT(what([&] { interpolate(x3, {.size = {8}, .mode = InterpolateMode::Bicubic}); }),
              testing::HasSubstr("interpolate: bicubic takes (N, C, H, W)"));
  EXPECT_THAT(what([&] {
                interpolate(x4, {.size = {2, 2}, .mode = InterpolateMode::Area, .align_corners = false});
              }),
              testing::HasSubstr("align_corners only applies to linear, bilinear and bicubic, not \"area\""));
  EXPECT_THROW(interpolate(x4, {.size = {2, 2}, .recompute_scale_factor = true}), ValueError);
  EXPECT_THROW(nn::Upsample({.size = {2}, .recompute_scale_factor = true}), ValueError);
  EXPECT_EQ(nn::Upsample({.size = {4, 6}, .mode = InterpolateMode::NearestExact}).extra_repr(),
            "size=(4, 6), mode='nearest-exact'");
}

TEST(Toolbox, PadHandValuesAndAnyDims) {
  const Tensor x = from_vector<double>({1, 2, 3}, {3});
  EXPECT_EQ(pad(x, {2, 1}, PadMode::Constant, 9).to_vector<double>(), std::vector<double>({9, 9, 1, 2, 3, 9}));
  EXPECT_EQ(pad(x, {2, 2}, PadMode::Reflect).to_vector<double>(), std::vector<double>({3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(pad(x, {2, 1}, PadMode::Replicate).to_vector<double>(), std::vector<double>({1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(pad(x, {3, 2}, PadMode::Circular).to_vector<double>(), std::vector<double>({1, 2, 3, 1, 2, 3, 1, 2}));
  EXPECT_EQ(pad(x, {-1, -1}).to_vector<double>(), std::vector<double>({2}));
  // three dims of reflect padding on a 3-D tensor (PyTorch needs a 4-D or 5-D input for that)
  const Tensor c = rnd({3, 4, 5}, 9);
  const Tensor p = pad(c, {1, 1, 2, 0, 1, 2}, PadMode::Reflect);
  EXPECT_EQ(p.shape(), Shape({6, 6, 7}));
  EXPECT_EQ(p.at({0, 0, 0}), c.at({1, 2, 1}));
  // replicate's gradient adds up every copy of an edge element: d sum / dx = 1 + copies
  Variable v(from_vector<double>({1, 2, 3}, {3}), true);
  sum(pad(v, {2, 1}, PadMode::Replicate)).backward();
  EXPECT_EQ(v.grad().to_vector<double>(), std::vector<double>({3, 1, 2}));
}

TEST(Toolbox, HandValues) {
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(repeat(x, {1, 2}).to_vector<double>(), std::vector<double>({1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(repeat(x, {2, 1, 1}).shape(), Shape({2, 2, 3}));
  EXPECT_EQ(flip(x, {1}).to_vector<double>(), std::vector<double>({3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(flip(x, {}).to_vector<double>(), x.to_vector<double>());
  EXPECT_EQ(repeat_interleave(x, 2, 0).to_vector<double>(), std::vector<double>({1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(
      repeat_interleave(from_vector<double>({7, 8}, {2}), from_vector<int64_t>({3, 1}, {2}), 0).to_vector<double>(),
      std::vector<double>({7, 7, 7, 8}));
  EXPECT_EQ(masked_select(x, gt(x, full({}, 3.5, DType::Float64))).to_vector<double>(), std::vector<double>({4, 5, 6}));
  // lerp keeps both ends exact: weight 0 gives start, weight 1 gives end
  Variable a(from_vector<double>({0.1, 1e16}, {2})), b(from_vector<double>({0.3, 1}, {2}));
  EXPECT_EQ(lerp(a, b, 0.0).data().to_vector<double>(), a.data().to_vector<double>());
  EXPECT_EQ(lerp(a, b, 1.0).data().to_vector<double>(), b.data().to_vector<double>());
  // addmm with beta 0 does not read the input: a NaN there stays out
  Variable nan_in(full({2, 2}, NAN, DType::Float64));
  Variable m(from_vector<double>({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(addmm(nan_in, m, m, 0.0).data().to_vector<double>(), std::vector<double>({7, 10, 15, 22}));
  // normalize: unit rows, a zero row stays zero
  const Tensor n = normalize(Variable(from_vector<double>({3, 4, 0, 0}, {2, 2}))).data();
  EXPECT_EQ(n.to_vector<double>(), std::vector<double>({0.6, 0.8, 0, 0}));
  EXPECT_NEAR(
      cosine_similarity(Variable(from_vector<double>({1, 0}, {1, 2})), Variable(from_vector<double>({1, 1}, {1, 2})))
          .item(),
      std::sqrt(0.5), 1e-15);
}

TEST(Toolbox, GradcheckAndTwice) {
  const std::vector<std::pair<std::string, std::function<Variable(const V&)>>> ops = {
      {"repeat",
       [](const V& v) {
         return repeat(v[0], {2, 1, 2}) * repeat(v[0], {2, 1, 2});
       }},
      {"flip",
       [](const V& v) {
         return flip(v[0] * v[0], {0, 1});
       }},
      {"repeat_interleave", [](const V& v) { return repeat_interleave(v[0] * v[0], 3, 1); }},
      {"lerp", [](const V& v) { return lerp(v[0], v[0] * v[0], v[0].sigmoid()); }},
      {"normalize", [](const V& v) { return normalize(v[0], 2.0, 1); }},
      {"normalize_p3", [](const V& v) { return normalize(v[0], 3.0, 0); }},
      {"cosine_similarity", [](const V& v) { return cosine_similarity(v[0], v[0] * v[0] + 1.0, 1); }},
      {"masked_select", [](const V& v) {
         return masked_select(v[0] * v[0], from_vector<int64_t>({1, 0, 1}, {3}).ne(zeros({}, DType::Int64)));
       }}};
  for (const auto& [name, fn] : ops) {
    SCOPED_TRACE(name);
    expect_gradcheck(fn, {rnd({2, 3}, 5)});
    EXPECT_TRUE(gradgradcheck(fn, {rnd({2, 3}, 6)}).ok);
  }
  for (const InterpolateMode mode : {InterpolateMode::Nearest, InterpolateMode::Bilinear}) {
    SCOPED_TRACE(interpolate_mode_name(mode));
    auto f = [mode](const V& v) { return interpolate(v[0] * v[0], {.size = {3, 5}, .mode = mode}); };
    expect_gradcheck(f, {rnd({1, 2, 2, 3}, 7)});
    EXPECT_TRUE(gradgradcheck(f, {rnd({1, 2, 2, 3}, 8)}).ok);
  }
  for (const PadMode mode : {PadMode::Constant, PadMode::Reflect, PadMode::Replicate, PadMode::Circular}) {
    SCOPED_TRACE(pad_mode_name(mode));
    auto f = [mode](const V& v) { return pad(v[0] * v[0], {1, 2, 2, 0}, mode, 0.25); };
    expect_gradcheck(f, {rnd({2, 3, 4}, 7)});
    EXPECT_TRUE(gradgradcheck(f, {rnd({2, 3, 4}, 8)}).ok);
  }
  expect_gradcheck([](const V& v) { return addmm(v[0], v[1], v[2], 0.5, 2.0); },
                   {rnd({3}, 1), rnd({2, 4}, 2), rnd({4, 3}, 3)});
  expect_gradcheck([](const V& v) { return baddbmm(v[0], v[1], v[2], 2.0, 0.5); },
                   {rnd({2, 1, 3}, 1), rnd({2, 2, 4}, 2), rnd({2, 4, 3}, 3)});
}

TEST(Toolbox, Errors) {
  Variable x(ones({2, 3}));
  EXPECT_THROW(repeat(x, {2}), ShapeError);  // fewer repeats than dims
  EXPECT_THROW(repeat(x, {2, -1}), ValueError);
  // repeats whose product passes 2^63: a ValueError naming repeat (expand's element count overflowed)
  try {
    repeat(x, {int64_t{1} << 40, int64_t{1} << 40});
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_THAT(std::string(e.what()), testing::HasSubstr("repeat: shape (2199023255552, 3298534883328)"));
  }
  EXPECT_THROW(repeat(x, {int64_t{1} << 62, 4}), ValueError);  // one size already past 2^63
  EXPECT_THROW(flip(x, {0, 0}), ValueError);
  EXPECT_THROW(flip(x, {2}), IndexError);
  EXPECT_THROW(repeat_interleave(x, -1, 0), ValueError);
  EXPECT_THROW(repeat_interleave(x, from_vector<int64_t>({1, 2}, {2}), 1), ShapeError);  // 2 counts for 3 slices
  EXPECT_THROW(repeat_interleave(x, ones({3}), 1), DTypeError);
  // counts no memory can hold: a typed error (the index was once a std::vector that threw bad_alloc)
  EXPECT_THROW(repeat_interleave(x, from_vector<int64_t>({int64_t{1} << 61}, {1}), 1), Error);
  EXPECT_THROW(addmm(x, x, x), ShapeError);
  EXPECT_THROW(addmm(Variable(ones({3, 3})), x, Variable(ones({3, 2}))), ShapeError);  // input (3, 3) vs (2, 2)
  EXPECT_THROW(baddbmm(x, x, x), ShapeError);
  EXPECT_THROW(normalize(x, 0.0), ValueError);
  EXPECT_THROW(normalize(x, 2.0, 2), IndexError);
  EXPECT_THROW(cosine_similarity(x, Variable(ones({4}))), ShapeError);
  EXPECT_THROW(masked_select(x, ones({3})), DTypeError);
  EXPECT_THROW(masked_select(x, ones({4}, DType::Bool)), ShapeError);
  EXPECT_THROW(lerp(x, Variable(ones({3, 2})), 0.5), ShapeError);
  // pad: each a typed error naming pad
  for (auto [sizes, mode] :
       std::vector<std::pair<std::vector<int64_t>, PadMode>>{{{1}, PadMode::Constant},
                                                             {{1, 1, 1, 1, 1, 1}, PadMode::Constant},
                                                             {{-2, -2}, PadMode::Constant},
                                                             {{3, 0}, PadMode::Reflect},
                                                             {{-1, 0}, PadMode::Replicate},
                                                             {{4, 0}, PadMode::Circular}}) {
    try {
      pad(x, sizes, mode);
      ADD_FAILURE() << pad_mode_name(mode) << ": no error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), testing::HasSubstr("pad: "));
    }
  }
}

TEST(Toolbox, Initialisers) {
  Generator g(11);
  Variable w(empty({400, 300}, DType::Float64));
  nn::init::xavier_normal_(w, 1.0, g);
  EXPECT_NEAR(w.data().std().item(), std::sqrt(2.0 / 700), 0.002);
  nn::init::kaiming_normal_(w, 0, "fan_in", "relu", g);
  EXPECT_NEAR(w.data().std().item(), std::sqrt(2.0 / 300), 0.002);
  nn::init::kaiming_normal_(w, 0, "fan_out", "relu", g);
  EXPECT_NEAR(w.data().std().item(), std::sqrt(2.0 / 400), 0.002);
  EXPECT_NEAR(nn::init::calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04), 1e-15);
  EXPECT_EQ(nn::init::calculate_gain("tanh"), 5.0 / 3);
  // truncated N(0, 1) on [-2, 2]: inside the bounds; mean 0 and std 0.8796 (the truncated normal's)
  nn::init::trunc_normal_(w, 0, 1, -2, 2, g);
  EXPECT_GE(min(w.data()).item(), -2.0);
  EXPECT_LE(max(w.data()).item(), 2.0);
  EXPECT_NEAR(mean(w.data()).item(), 0, 0.01);
  const double phi2 = std::exp(-2.0) / std::sqrt(2 * std::numbers::pi), Z = std::erf(2 / std::sqrt(2.0));
  EXPECT_NEAR(w.data().std().item(), std::sqrt(1 - 2 * 2 * phi2 / Z), 0.005);
  // a narrow window far in the tail: still inside, nothing redrawn
  nn::init::trunc_normal_(w, 0, 1, 5, 5.1, g);
  EXPECT_GE(min(w.data()).item(), 5.0);
  EXPECT_LE(max(w.data()).item(), 5.1);
  EXPECT_THROW(nn::init::kaiming_normal_(w, 0, "fan_both"), ValueError);
  EXPECT_THROW(nn::init::calculate_gain("softmax"), ValueError);
  EXPECT_THROW(nn::init::trunc_normal_(w, 0, 1, 2, -2), ValueError);
}

TEST(Toolbox, ClipGradValue) {
  Variable a(zeros({3}), true), b(zeros({2}), true);
  a.set_grad(from_vector<float>({-5, 0.5, NAN}, {3}));
  optim::clip_grad_value_({a, b}, 1.0);  // b has no gradient: skipped
  const std::vector<float> g = a.grad().to_vector<float>();
  EXPECT_EQ(g[0], -1);
  EXPECT_EQ(g[1], 0.5);
  EXPECT_TRUE(std::isnan(g[2]));
  EXPECT_THROW(optim::clip_grad_value_({a}, -1), ValueError);
}

TEST(Toolbox, SequentialTakesAnyModuleWithAForward) {
  // token ids -> Embedding -> self-attention -> LayerNorm -> Linear, as one Sequential; the same
  // numbers as the modules called one by one, and hooks fire on the members
  Generator g(2);
  nn::Sequential s;
  auto& emb = s.emplace_back<nn::Embedding>(10, 8, nn::EmbeddingOptions{}, g);
  auto& attn = s.emplace_back<nn::MultiheadAttention>(8, 2, nn::MultiheadAttentionOptions{}, g);
  auto& norm = s.emplace_back<nn::LayerNorm>(Shape{8});
  auto& head = s.emplace_back<nn::Linear>(8, 10, nn::LinearOptions{}, g);
  const Tensor ids = randint(0, 10, {2, 5}, g);
  int calls = 0;
  emb.register_forward_hook([&](const nn::Module&, const std::vector<Variable>&, std::vector<Variable>&) { ++calls; });
  const Tensor y = s(Variable(ids)).data();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(y.shape(), Shape({2, 5, 10}));
  EXPECT_EQ(y.to_vector<float>(), head(norm(attn(emb(ids)).output)).data().to_vector<float>());
  EXPECT_EQ(s.named_parameters().front().first, "0.weight");
}

TEST(Toolbox, SummaryTableAsTorchinfo) {
  Generator g(1);
  models::GPT gpt(20, 8, {.d_model = 16, .nhead = 2, .num_layers = 2, .tie_weights = true}, g);
  gpt.blocks.at<models::GPTBlock>(1).ln_1.weight.set_requires_grad(false);  // a frozen parameter
  const std::string t = nn::summary(gpt, {{2, 8}}, DType::Int64);
  EXPECT_THAT(t, testing::HasSubstr("tok (Embedding)"));
  EXPECT_THAT(t, testing::HasSubstr("(2, 8, 16)"));
  EXPECT_THAT(t, testing::HasSubstr("head (Linear)"));
  EXPECT_THAT(t, testing::HasSubstr("(2, 8, 20)"));
  EXPECT_THAT(t, testing::HasSubstr("Partial"));  // ln_1 of block 1: weight frozen, bias trains
  // the totals: the tied matrix counted once, the frozen weight apart
  const std::string total = std::to_string(gpt.num_parameters());  // 7060 -> "7,060"
  EXPECT_THAT(t, testing::HasSubstr("Total params: " + total.substr(0, total.size() - 3) + "," +
                                    total.substr(total.size() - 3) + "\n"));
  EXPECT_THAT(t, testing::HasSubstr("Non-trainable params: 16\n"));
  // a module the call does not reach shows "--"
  struct Two : nn::Callable<Two> {
    nn::Linear used{3, 4}, unused{3, 4};
    Two() {
      register_module("used", used);
      register_module("unused", unused);
    }
    Variable forward(const Variable& x) const { return used(x); }
    std::string type_name() const override { return "Two"; }
  } two;
  const std::string t2 = nn::summary(two, [&] { two(Variable(ones({5, 3}))); });
  EXPECT_THAT(t2, testing::HasSubstr("(5, 4)"));
  EXPECT_THAT(t2, testing::ContainsRegex("unused \\(Linear\\) +--"));
  EXPECT_EQ(two.used.has_forward_hooks(), false);  // the hooks are gone again
  EXPECT_THROW(nn::summary(two, std::vector<Shape>{}), ValueError);
}
