// Activations: relu, gelu, silu, swiglu, softplus, leaky_relu, elu. Hand values, gradcheck on both sides of
// every kink and branch, PyTorch golden values, error texts.
#include <cmath>
#include <cstring>

#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using V = std::vector<Variable>;

TEST(Activation, HandValues) {
  const Tensor x = tensor({-2, 0, 1}, {3});
  expect_values(relu(x), {3}, {0, 0, 1});
  expect_values(leaky_relu(x, 0.1), {3}, {-0.2, 0, 1});
  expect_values(elu(x, 2), {3}, {2 * std::expm1(-2.0), 0, 1}, 1e-6);
  expect_values(silu(x), {3}, {-2 / (1 + std::exp(2.0)), 0, 1 / (1 + std::exp(-1.0))}, 1e-6);
  // softplus(0) = log 2; above the threshold it is x itself: softplus(30) = 30
  expect_values(softplus(tensor({0, 30}, {2})), {2}, {std::log(2.0), 30}, 1e-6);
  expect_values(softplus(tensor({1}, {1}), 2), {1}, {std::log1p(std::exp(2.0)) / 2}, 1e-6);
  // gradients: leaky_relu's slope below 0, elu's alpha e^x below 0, silu's s (1 + x (1 - s))
  Variable v(tensor({-1, 2}, {2}), true);
  (leaky_relu(v, 0.25) + elu(v, 0.5)).sum().backward();
  expect_values(v.grad(), {2}, {0.25 + 0.5 * std::exp(-1.0), 2}, 1e-6);
}

TEST(Activation, Gradcheck) {
  // inputs away from 0, so central differences do not straddle a kink
  const Tensor x = rnd({3, 4}, 1, -3, 3);
  expect_gradcheck([](const V& v) { return relu(v[0]); }, {x});
  expect_gradcheck([](const V& v) { return gelu(v[0]); }, {x});
  expect_gradcheck([](const V& v) { return gelu(v[0], GeluApproximate::Tanh); }, {x});
  expect_gradcheck([](const V& v) { return silu(v[0]); }, {x});
  expect_gradcheck([](const V& v) { return swiglu(v[0]); }, {x});
  expect_gradcheck([](const V& v) { return softplus(v[0]); }, {x});
  expect_gradcheck([](const V& v) { return softplus(v[0], 2.0, 1.5); }, {x});  // both branches
  expect_gradcheck([](const V& v) { return leaky_relu(v[0], 0.2); }, {x});
  expect_gradcheck([](const V& v) { return elu(v[0], 1.5); }, {x.transpose(0, 1)});
}

TEST(Activation, GoldenPyTorch) {
  expect_golden("relu", [](const V& v) { return relu(v[0]); });
  expect_golden("gelu", [](const V& v) { return gelu(v[0]); });
  expect_golden("gelu_tanh", [](const V& v) { return gelu(v[0], GeluApproximate::Tanh); });
  expect_golden("silu", [](const V& v) { return silu(v[0]); });
  expect_golden("softplus_beta2_threshold1", [](const V& v) { return softplus(v[0], 2, 1); });
  expect_golden("leaky_relu", [](const V& v) { return leaky_relu(v[0], 0.2); });
  expect_golden("elu", [](const V& v) { return elu(v[0], 1.5); });
}

TEST(Activation, Errors) {
  const Variable x(zeros({2}));
  EXPECT_THROW(softplus(x, 0), ValueError);
  EXPECT_THROW(softplus(x, NAN), ValueError);
  EXPECT_THROW(leaky_relu(x, INFINITY), ValueError);
  EXPECT_THROW(elu(Variable(arange(2)), 1.0), DTypeError);
}

namespace {
// The same dtype, shape and bytes.
void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  const size_t bytes = static_cast<size_t>(ca.numel()) * itemsize(ca.dtype());
  auto bytes_of = [](const Tensor& t) -> const void* {
    if (t.dtype() == DType::Float64) return t.data<double>();
    if (t.dtype() == DType::BFloat16) return t.data<bfloat16>();
    return t.data<float>();
  };
  EXPECT_EQ(std::memcmp(bytes_of(ca), bytes_of(cb), bytes), 0) << what;
}
}  // namespace

// linear_gelu is gelu(linear(...)) with a backward in one pass: every output and gradient has the
// composed ops' bits, in float64, float32 and under autocast, erf and tanh forms, with and without
// a bias, on 1 and 2 threads. 130 rows of 300 outputs: enough work for the kernel to split the
// columns into blocks (one per thread), 300 not a multiple of any block width.
TEST(LinearGelu, SameBitsAsTheComposedOps) {
  const int threads_before = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (DType dt : {DType::Float64, DType::Float32})
      for (bool bf16 : {false, true})
        for (const GeluApproximate approx : {GeluApproximate::None, GeluApproximate::Tanh})
          for (bool with_bias : {true, false}) {
            if (bf16 && dt != DType::Float32) continue;
            const std::string what = fmt::format("{} {} {} bias {}", dtype_name(dt), bf16 ? "autocast" : "",
                                                 gelu_approximate_name(approx), with_bias);
            // x as a transposed view: (130, 7) read from a (7, 130) tensor
            const Tensor x0 = rnd({7, 130}, 1, -2, 2).to(dt).transpose(0, 1), w0 = rnd({300, 7}, 2).to(dt),
                         b0 = rnd({300}, 3).to(dt), r = rnd({130, 300}, 4).to(dt);
            auto run = [&](bool fused) {
              Variable x(x0.clone(), true), w(w0.clone(), true), b(b0.clone(), true);
              Variable y;
              {
                AutocastGuard guard(bf16);
                const Variable bias = with_bias ? b : Variable();
                y = fused ? linear_gelu(x, w, bias, approx) : gelu(linear(x, w, bias), approx);
              }
              sum(y * Variable(r)).backward();
              return std::vector<Tensor>{y.data(), x.grad(), w.grad(), with_bias ? b.grad() : zeros({1})};
            };
            const std::vector<Tensor> composed = run(false), fused = run(true);
            for (size_t i = 0; i < composed.size(); ++i)
              expect_same_bits(fused[i], composed[i], what + " output " + std::to_string(i));
          }
  }
  set_num_threads(threads_before);
}

TEST(LinearGelu, GradcheckAndShapes) {
  for (const GeluApproximate approx : {GeluApproximate::None, GeluApproximate::Tanh}) {
    expect_gradcheck([&](const V& v) { return linear_gelu(v[0], v[1], v[2], approx); },
                     {rnd({2, 3, 4}, 5, -2, 2), rnd({5, 4}, 6), rnd({5}, 7)});
    expect_gradcheck([&](const V& v) { return linear_gelu(v[0], v[1], Variable(), approx); },
                     {rnd({3, 4}, 8, -2, 2), rnd({6, 4}, 9)});
  }
  // zero rows: an empty output, a zero weight gradient and a zero bias gradient
  Variable x(zeros({0, 3}, DType::Float64), true), w(rnd({4, 3}, 10), true), b(rnd({4}, 11), true);
  const Variable y = linear_gelu(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{0, 4}));
  sum(y).backward();
  expect_values(w.grad(), {4, 3}, std::vector<double>(12, 0.0));
  expect_values(b.grad(), {4}, {0, 0, 0, 0});
  // zero outputs: an empty output, and empty gradients of the right shapes
  Variable x2(rnd({2, 3}, 12), true), w2(zeros({0, 3}, DType::Float64), true), b2(zeros({0}, DType::Float64), true);
  const Variable y2 = linear_gelu(x2, w2, b2);
  EXPECT_EQ(y2.shape(), (Shape{2, 0}));
  sum(y2).backward();
  expect_values(x2.grad(), {2, 3}, std::vector<double>(6, 0.0));
  EXPECT_EQ(w2.grad().shape(), (Shape{0, 3}));
  EXPECT_EQ(b2.grad().shape(), (Shape{0}));
}

// The tensor kernel on its own, with dy and h in layouts the engine does not hand it: a transposed
// dy and an expanded (stride 0) h give what gelu_backward, sum and .to give.
TEST(LinearGelu, BackwardKernelInAnyLayout) {
  const Tensor dy = rnd({300, 6}, 12).to(DType::Float32).transpose(0, 1);  // (6, 300), strides (1, 6)
  const Tensor h = rnd({1, 300}, 13, -3, 3).to(DType::Float32).expand({6, 300});
  const Tensor want = gelu_backward(dy, h);
  for (DType out : {DType::Float32, DType::BFloat16}) {
    const auto [dh, db] = linear_gelu_backward(dy, h, GeluApproximate::None, out, true);
    expect_same_bits(dh, want.to(out), "dh");
    expect_same_bits(db, sum(want, {0}), "db");
  }
  const auto [dh, db] = linear_gelu_backward(dy, h, GeluApproximate::None, DType::Float32, false);
  EXPECT_FALSE(db.defined());
}

TEST(LinearGelu, Errors) {
  const Variable x(zeros({2, 3})), w(zeros({4, 3}));
  EXPECT_THAT([&] { linear_gelu(Variable(zeros({})), w); },  // a 0-dim input
              testing::ThrowsMessage<ShapeError>(testing::HasSubstr("linear_gelu: input of shape ()")));
  EXPECT_THAT(
      [&] {
        linear_gelu(x, Variable(zeros({4, 2})));
      },
      testing::ThrowsMessage<ShapeError>(testing::HasSubstr("linear_gelu: input of shape (2, 3)")));
  const Tensor a = zeros({2, 3});
  EXPECT_THAT([&] { linear_gelu_backward(a, a, GeluApproximate::None, DType::Int64, true); },
              testing::ThrowsMessage<DTypeError>(testing::HasSubstr("linear_gelu_backward")));
  EXPECT_THAT(
      [&] {
        linear_gelu_backward(a, zeros({3, 2}), GeluApproximate::None, DType::Float32, true);
      },
      testing::ThrowsMessage<ShapeError>(testing::HasSubstr("linear_gelu_backward")));
  EXPECT_THROW(
      linear_gelu_backward(a.to(DType::Float64), a.to(DType::Float64), GeluApproximate::None, DType::BFloat16, true),
      DTypeError);
}

TEST(Activation, SwigluEqualsTheComposedGate) {
  // swiglu(x) = silu(a) * u for x = [a | u]: hand values, then the fused op against the composed
  // ops in float32 and float64, forward and backward, value for value (the same expressions in the
  // same order), on a contiguous input, a transposed one and one with a tail after the last vector.
  expect_values(swiglu(tensor({1, -2, 3, 0.5}, {1, 4})), {1, 2},
                {1 / (1 + std::exp(-1.0)) * 3, -2 / (1 + std::exp(2.0)) * 0.5}, 1e-6);
  for (DType dt : {DType::Float32, DType::Float64})
    for (const Tensor& x0 : {rnd({5, 38}, 2, -6, 6), rnd({74, 3}, 3, -6, 6).transpose(0, 1), rnd({2, 3, 0}, 4)}) {
      const Tensor x = x0.to(dt);
      const int64_t h = x.size(-1) / 2;
      Variable a(x.contiguous(), true), b(x.contiguous(), true);
      const Variable fused = swiglu(a), composed = silu(narrow(b, -1, 0, h)) * narrow(b, -1, h, h);
      EXPECT_EQ(fused.data().to_vector<double>(), composed.data().to_vector<double>());
      const Tensor dy = (randn(fused.data().shape()) * 2.0).to(dt);
      fused.backward(dy), composed.backward(dy);
      EXPECT_EQ(a.grad().to_vector<double>(), b.grad().to_vector<double>());
      EXPECT_EQ(swiglu(x).to_vector<double>(), fused.data().to_vector<double>());  // the strided input itself
    }
}

TEST(Activation, SwigluErrorsNameTheShapes) {
  try {
    swiglu(Variable(zeros({2, 3})));
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("swiglu: expected x (..., 2h)"));
    EXPECT_THAT(e.what(), testing::HasSubstr("got shape (2, 3)"));
  }
  EXPECT_THROW(swiglu(Variable(zeros({}))), ShapeError);
  EXPECT_THROW(swiglu(Variable(arange(4))), DTypeError);
  EXPECT_THROW(swiglu_backward(zeros({2, 3}), zeros({2, 4})), ShapeError);
}
