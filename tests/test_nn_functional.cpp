// softmax, log_softmax, layer_norm and dropout: hand values, gradcheck, PyTorch golden values,
// error texts. (Losses: test_loss.cpp; gather, index_select, embedding: test_index.cpp.)
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

TEST(NNFunctional, SoftmaxAndLayerNormHandValues) {
  // softmax of (0, ln 3) is (1/4, 3/4); its gradient against dy = (1, 0): y (dy - y.dy) = (3/16, -3/16)
  Variable x(tensor({0, static_cast<float>(std::log(3.0))}, {2}), true);
  Variable y = softmax(x, 0);
  expect_values(y.data(), {2}, {0.25, 0.75});
  y.backward(tensor({1, 0}, {2}));
  expect_values(x.grad(), {2}, {3.0 / 16, -3.0 / 16});
  // layer norm of (1, 2, 3): mean 2, variance 2/3, so (-1, 0, 1) / sqrt(2/3 + eps)
  const double r = 1 / std::sqrt(2.0 / 3 + 1e-5);
  expect_values(layer_norm(Variable(tensor({1, 2, 3}, {3})), {3}).data(), {3}, {-r, 0, r}, 1e-5);
}

TEST(NNFunctional, Gradcheck) {
  Tensor x = rnd({3, 5}, 1, -2, 2);
  expect_gradcheck([](const V& v) { return softmax(v[0], 1); }, {x});
  expect_gradcheck([](const V& v) { return softmax(v[0], 0); }, {x.transpose(0, 1)});
  expect_gradcheck([](const V& v) { return log_softmax(v[0], -1); }, {rnd({2, 3, 4}, 2)});
  expect_gradcheck([](const V& v) { return layer_norm(v[0], {5}, v[1], v[2]); }, {x, rnd({5}, 4), rnd({5}, 5)});
  expect_gradcheck([](const V& v) { return layer_norm(v[0], {3, 4}); }, {rnd({2, 3, 4}, 6)});
  expect_gradcheck([](const V& v) { return layer_norm(v[0], {3}, v[1]); }, {rnd({3, 4}, 7).transpose(0, 1), rnd({3}, 8)});
  // A strided weight and bias: the backward once read the weight through a temporary copy that
  // had already been freed (found by reading; AddressSanitizer reports it).
  expect_gradcheck([](const V& v) { return layer_norm(v[0], {3}, v[1], v[2]); },
                   {rnd({4, 3}, 13), rnd({6}, 14).slice(0, 0, 6, 2), rnd({3, 2}, 15).transpose(0, 1).narrow(0, 1, 1).reshape({3})});
  expect_gradcheck([](const V& v) {
    Generator g(5);  // the same mask at every call, so central differences are valid
    return dropout(v[0], 0.4, true, g);
  }, {rnd({4, 5}, 12)});
}

TEST(NNFunctional, GoldenPyTorch) {
  expect_golden("softmax_dim1", [](const V& v) { return softmax(v[0], 1); });
  expect_golden("softmax_dim0", [](const V& v) { return softmax(v[0], 0); });
  expect_golden("log_softmax_last", [](const V& v) { return log_softmax(v[0], -1); });
  expect_golden("layer_norm_affine", [](const V& v) { return layer_norm(v[0], {6}, v[1], v[2]); });
  expect_golden("layer_norm_2d_plain", [](const V& v) { return layer_norm(v[0], {3, 4}); });
}

TEST(NNFunctional, DropoutIsSeededAndScaled) {
  Variable x(ones({1000}), true);
  Generator g1(3), g2(3);
  Variable a = dropout(x, 0.25, true, g1), b = dropout(x, 0.25, true, g2);
  EXPECT_EQ(a.data().to_vector<float>(), b.data().to_vector<float>());
  // kept elements are scaled by 1/(1-p); about 75% are kept
  const std::vector<float> v = a.data().to_vector<float>();
  int kept = 0;
  for (float e : v) {
    EXPECT_TRUE(e == 0.0f || std::abs(e - 1 / 0.75f) < 1e-6);
    kept += e != 0;
  }
  EXPECT_NEAR(kept / 1000.0, 0.75, 0.05);
  // evaluation mode is the identity
  EXPECT_EQ(dropout(x, 0.5, false).data().storage(), x.data().storage());
  EXPECT_THROW(dropout(x, 1.5, true), ValueError);
}

TEST(NNFunctional, ErrorsNameTheProblem) {
  Variable x(zeros({3, 5}), true);
  try {
    layer_norm(x, {4});
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer_norm: normalized_shape (4,) does not match the trailing dims of input (3, 5)"));
  }
  EXPECT_THROW(layer_norm(x, {5}, Variable(zeros({4}))), ShapeError);
  EXPECT_THROW(layer_norm(x, {5}, Variable(zeros({5}, DType::Float64))), DTypeError);
  EXPECT_THROW(softmax(x, 2), IndexError);
  EXPECT_THROW(dropout(x, -0.1, true), ValueError);
}

TEST(NNFunctional, LayerNormOfHugeFloat32Values) {
  // float32 row sums of values near FLT_MAX overflow: the row is then summed in double, so
  // (3e38, 3e38) normalises to (0, 0) as in PyTorch (it once gave NaN).
  expect_values(layer_norm(tensor({3e38f, 3e38f}, {1, 2}), {2}, Tensor(), Tensor()), {1, 2}, {0, 0});
  const std::vector<float> y = layer_norm(tensor({3e38f, -3e38f}, {1, 2}), {2}, Tensor(), Tensor()).to_vector<float>();
  EXPECT_NEAR(y[0], 1, 1e-5);
  EXPECT_NEAR(y[1], -1, 1e-5);
}
