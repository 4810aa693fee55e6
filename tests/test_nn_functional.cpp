// softmax, log_softmax, cross_entropy, mse_loss, layer_norm, embedding, dropout, gather,
// index_select.
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

TEST(NNFunctional, CrossEntropyHandValues) {
  // Uniform logits over 4 classes: loss = log 4, gradient = (softmax - onehot) / N.
  Variable x(zeros({2, 4}), true);
  Tensor t = from_vector<int64_t>({1, 3}, {2});
  Variable loss = cross_entropy(x, t);
  EXPECT_NEAR(loss.item(), std::log(4.0), 1e-6);
  loss.backward();
  expect_values(x.grad(), {2, 4}, {0.125, -0.375, 0.125, 0.125, 0.125, 0.125, 0.125, -0.375}, 1e-7);
  // ignore_index: the ignored row gets no gradient and is not counted
  Variable y(zeros({2, 4}), true);
  cross_entropy(y, from_vector<int64_t>({-100, 2}, {2})).backward();
  expect_values(y.grad(), {2, 4}, {0, 0, 0, 0, 0.25, 0.25, -0.75, 0.25}, 1e-7);
}

TEST(NNFunctional, Gradcheck) {
  Tensor x = rnd({3, 5}, 1, -2, 2);
  Tensor t = from_vector<int64_t>({4, 0, 2}, {3});
  expect_gradcheck([](const V& v) { return softmax(v[0], 1); }, {x});
  expect_gradcheck([](const V& v) { return softmax(v[0], 0); }, {x.transpose(0, 1)});
  expect_gradcheck([](const V& v) { return log_softmax(v[0], -1); }, {rnd({2, 3, 4}, 2)});
  expect_gradcheck([](const V& v) { return cross_entropy(v[0], v[1].data()); }, {x, t});
  expect_gradcheck([](const V& v) { return cross_entropy(v[0], v[1].data(), Reduction::None); }, {x, t});
  expect_gradcheck([](const V& v) { return cross_entropy(v[0], v[1].data(), Reduction::Sum, 0); }, {x, t});
  expect_gradcheck([](const V& v) { return mse_loss(v[0], v[1]); }, {x, rnd({3, 5}, 3)});
  expect_gradcheck([](const V& v) { return layer_norm(v[0], {5}, v[1], v[2]); }, {x, rnd({5}, 4), rnd({5}, 5)});
  expect_gradcheck([](const V& v) { return layer_norm(v[0], {3, 4}); }, {rnd({2, 3, 4}, 6)});
  expect_gradcheck([](const V& v) { return layer_norm(v[0], {3}, v[1]); }, {rnd({3, 4}, 7).transpose(0, 1), rnd({3}, 8)});
  Tensor ids = from_vector<int64_t>({0, 2, 2, 1}, {2, 2});
  expect_gradcheck([ids](const V& v) { return embedding(ids, v[0]); }, {rnd({3, 4}, 9)});
  Tensor gi = from_vector<int64_t>({1, 1, 0, 2, 0, 0}, {3, 2});
  expect_gradcheck([gi](const V& v) { return gather(v[0], 1, gi); }, {rnd({3, 3}, 10)});
  expect_gradcheck([](const V& v) { return index_select(v[0], 1, from_vector<int64_t>({2, 0, 2}, {3})); }, {rnd({2, 3}, 11)});
  expect_gradcheck([](const V& v) {
    Generator g(5);  // the same mask at every call, so central differences are valid
    return dropout(v[0], 0.4, true, g);
  }, {rnd({4, 5}, 12)});
}

TEST(NNFunctional, GoldenPyTorch) {
  expect_golden("softmax_dim1", [](const V& v) { return softmax(v[0], 1); });
  expect_golden("softmax_dim0", [](const V& v) { return softmax(v[0], 0); });
  expect_golden("log_softmax_last", [](const V& v) { return log_softmax(v[0], -1); });
  expect_golden("cross_entropy_mean", [](const V& v) { return cross_entropy(v[0], v[1].data()); });
  expect_golden("cross_entropy_sum", [](const V& v) { return cross_entropy(v[0], v[1].data(), Reduction::Sum); });
  expect_golden("cross_entropy_none", [](const V& v) { return cross_entropy(v[0], v[1].data(), Reduction::None); });
  expect_golden("cross_entropy_ignore", [](const V& v) { return cross_entropy(v[0], v[1].data()); });
  expect_golden("mse_loss", [](const V& v) { return mse_loss(v[0], v[1]); });
  expect_golden("mse_loss_sum", [](const V& v) { return mse_loss(v[0], v[1], Reduction::Sum); });
  expect_golden("layer_norm_affine", [](const V& v) { return layer_norm(v[0], {6}, v[1], v[2]); });
  expect_golden("layer_norm_2d_plain", [](const V& v) { return layer_norm(v[0], {3, 4}); });
  expect_golden("embedding", [](const V& v) { return embedding(v[0].data(), v[1]); });
  expect_golden("gather_dim1", [](const V& v) { return gather(v[0], 1, v[1].data()); });
  expect_golden("index_select_dim0", [](const V& v) { return index_select(v[0], 0, v[1].data()); });
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
  Variable logits(zeros({3, 5}), true);
  try {
    cross_entropy(logits, from_vector<int64_t>({1, 5, 0}, {3}));
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cross_entropy: target 5 at position 1 is out of range for 5 classes"));
  }
  EXPECT_THROW(cross_entropy(logits, tensor({1, 2, 3}, {3})), DTypeError);
  EXPECT_THROW(cross_entropy(Variable(zeros({2, 3, 5})), from_vector<int64_t>({1, 2}, {2})), ShapeError);
  Variable w(zeros({10, 4}), true);
  try {
    embedding(from_vector<int64_t>({3, 12}, {2}), w);
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_THAT(e.what(), HasSubstr("embedding: id 12 at position 1 is out of range for 10 embeddings"));
  }
  EXPECT_THROW(layer_norm(logits, {4}), ShapeError);
  EXPECT_THROW(mse_loss(logits, Variable(zeros({5, 3}))), ShapeError);
}
