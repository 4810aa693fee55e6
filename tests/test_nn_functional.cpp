// softmax, log_softmax, layer_norm, batch_norm, group_norm and dropout: hand values, gradcheck,
// PyTorch golden values, error texts. (Losses: test_loss.cpp; gather, index_select, embedding: test_index.cpp.)
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

// docs/03-writing-an-op.md derives layer norm's backward by hand; here are its lines as plain
// tensor arithmetic, against autograd (through the fused kernel) and against finite differences.
TEST(NNFunctional, LayerNormBackwardAsDerivedInDocs03) {
  Generator g(7);
  const int64_t M = 4, N = 6;
  const double eps = 1e-5;
  const Tensor x = randn({M, N}, g, DType::Float64) * 3.0 + 1.0, w = randn({N}, g, DType::Float64),
               b = randn({N}, g, DType::Float64), dy = randn({M, N}, g, DType::Float64);
  // forward: mu, var (biased), r = 1 / sqrt(var + eps), xhat = (x - mu) r, y = w xhat + b
  const Tensor mu = mean(x, {1}, true), var = mean((x - mu) * (x - mu), {1}, true);
  const Tensor r = 1.0 / sqrt(var + eps), xhat = (x - mu) * r;
  // backward, the derived lines: g = dy w; dx = r (g - mean(g) - xhat mean(g xhat)); dw, db
  const Tensor gh = dy * w;
  const Tensor dx = r * (gh - mean(gh, {1}, true) - xhat * mean(gh * xhat, {1}, true));
  const Tensor dw = sum(dy * xhat, {0}), db = sum(dy, {0});
  Variable X(x, true), W(w, true), B(b, true);
  layer_norm(X, {N}, W, B, eps).backward(dy);
  EXPECT_LT(max(abs(dx - X.grad())).item(), 1e-13);
  EXPECT_LT(max(abs(dw - W.grad())).item(), 1e-13);
  EXPECT_LT(max(abs(db - B.grad())).item(), 1e-13);
  // and the sum of dx over a row is 0: shifting a row by a constant does not change x-hat
  EXPECT_LT(max(abs(sum(dx, {1}))).item(), 1e-12);
  // one entry by central differences of L = sum(dy * y)
  const auto L = [&](const Tensor& xs) { return sum(dy * layer_norm(xs, {N}, w, b, eps)).item(); };
  Tensor up = x.clone(), down = x.clone();
  up.data<double>()[7] += 1e-6, down.data<double>()[7] -= 1e-6;
  EXPECT_NEAR(dx.contiguous().data<double>()[7], (L(up) - L(down)) / 2e-6, 1e-7);
}

TEST(NNFunctional, Gradcheck) {
  Tensor x = rnd({3, 5}, 1, -2, 2);
  expect_gradcheck([](const V& v) { return softmax(v[0], 1); }, {x});
  expect_gradcheck([](const V& v) { return softmax(v[0], 0); }, {x.transpose(0, 1)});
  expect_gradcheck([](const V& v) { return log_softmax(v[0], -1); }, {rnd({2, 3, 4}, 2)});
  expect_gradcheck([](const V& v) { return layer_norm(v[0], {5}, v[1], v[2]); }, {x, rnd({5}, 4), rnd({5}, 5)});
  expect_gradcheck([](const V& v) { return layer_norm(v[0], {3, 4}); }, {rnd({2, 3, 4}, 6)});
  expect_gradcheck([](const V& v) { return layer_norm(v[0], {3}, v[1]); },
                   {rnd({3, 4}, 7).transpose(0, 1), rnd({3}, 8)});
  // A strided weight and bias: the backward once read the weight through a temporary copy that
  // had already been freed (found by reading; AddressSanitizer reports it).
  expect_gradcheck(
      [](const V& v) { return layer_norm(v[0], {3}, v[1], v[2]); },
      {rnd({4, 3}, 13), rnd({6}, 14).slice(0, 0, 6, 2), rnd({3, 2}, 15).transpose(0, 1).narrow(0, 1, 1).reshape({3})});
  expect_gradcheck(
      [](const V& v) {
        Generator g(5);  // the same mask at every call, so central differences are valid
        return dropout(v[0], 0.4, true, g);
      },
      {rnd({4, 5}, 12)});
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
    EXPECT_THAT(e.what(),
                HasSubstr("layer_norm: normalized_shape (4,) does not match the trailing dims of input (3, 5)"));
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

TEST(NNFunctional, BatchNormHandValuesAndRunningStatistics) {
  // one channel, values 1 and 3: mean 2, biased variance 1 -> y = -1, 1 (eps 0)
  Tensor rm = zeros({1}, DType::Float64), rv = ones({1}, DType::Float64);
  Variable x(tensor({1, 3}, {2, 1}).to(DType::Float64));
  expect_values(batch_norm(x, rm, rv, Variable(), Variable(), true, 0.1, 0).data(), {2, 1}, {-1, 1});
  // running = 0.9 running + 0.1 batch, with the unbiased batch variance (2)
  expect_values(rm, {1}, {0.2});
  expect_values(rv, {1}, {1.1});
  // evaluation uses the running statistics: (x - 0.2) / sqrt(1.1)
  expect_values(batch_norm(x, rm, rv, Variable(), Variable(), false, 0.1, 0).data(), {2, 1},
                {(1 - 0.2) / std::sqrt(1.1), (3 - 0.2) / std::sqrt(1.1)}, 1e-12);
  expect_values(rm, {1}, {0.2});  // and leaves them alone
  // group norm with one group per channel of a (1, 2, 2) input: each channel to -1, 1
  expect_values(
      group_norm(Variable(tensor({0, 2, 5, 9}, {1, 2, 2}).to(DType::Float64)), 2, Variable(), Variable(), 0).data(),
      {1, 2, 2}, {-1, 1, -1, 1});
}

TEST(NNFunctional, BatchNormAndGroupNormGradcheck) {
  const Tensor x = rnd({4, 3, 2, 2}, 1), w = rnd({3}, 2), b = rnd({3}, 3);
  const Tensor rm = rnd({3}, 4), rv = rnd({3}, 5, 0.5, 2);
  expect_gradcheck([](const V& v) { return batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], true); }, {x, w, b});
  expect_gradcheck([&](const V& v) { return batch_norm(v[0], rm.clone(), rv.clone(), v[1], v[2], true); },
                   {x.transpose(2, 3), w, b});
  expect_gradcheck([&](const V& v) { return batch_norm(v[0], rm, rv, v[1], v[2], false); }, {x, w, b});
  expect_gradcheck([](const V& v) { return batch_norm(v[0], Tensor(), Tensor(), Variable(), Variable(), true); },
                   {rnd({5, 3}, 6)});
  expect_gradcheck([](const V& v) { return group_norm(v[0], 3, v[1], v[2]); },
                   {rnd({2, 6, 2, 2}, 7), rnd({6}, 8), rnd({6}, 9)});
  expect_gradcheck([](const V& v) { return group_norm(v[0], 1); }, {rnd({3, 2, 4}, 10)});
}

TEST(NNFunctional, BatchNormAndGroupNormGoldenPyTorch) {
  expect_golden("batch_norm_train_affine",
                [](const V& v) { return batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], true); });
  expect_golden("batch_norm_train_1d", [](const V& v) {
    return batch_norm(v[0], Tensor(), Tensor(), Variable(), Variable(), true, 0.1, 1e-3);
  });
  expect_golden("batch_norm_eval", [](const V& v) {
    return batch_norm(v[0], tensor({0.5, -1.0, 2.0}, {3}), tensor({1.5, 0.25, 4.0}, {3}), v[1], v[2], false);
  });
  expect_golden("group_norm_affine", [](const V& v) { return group_norm(v[0], 2, v[1], v[2]); });
  expect_golden("group_norm_plain_4d", [](const V& v) { return group_norm(v[0], 3, Variable(), Variable(), 1e-3); });
}

TEST(NNFunctional, BatchNormAndGroupNormErrors) {
  const Variable x(zeros({4, 3}));
  EXPECT_THAT(
      [&] {
        try {
          batch_norm(Variable(zeros({1, 3})), Tensor(), Tensor(), Variable(), Variable(), true);
        } catch (const ValueError& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("batch_norm: expected more than 1 value per channel when training"));
  EXPECT_THROW(batch_norm(x, zeros({4}), ones({4})), ShapeError);
  EXPECT_THROW(batch_norm(x, zeros({3}), Tensor()), StateError);
  EXPECT_THROW(batch_norm(x, Tensor(), Tensor(), Variable(zeros({2}))), ShapeError);
  EXPECT_THROW(group_norm(x, 2), ValueError);
  EXPECT_THROW(group_norm(Variable(zeros({3})), 1), ShapeError);
}
