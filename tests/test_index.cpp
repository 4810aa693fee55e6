// gather, index_select and embedding: the forward picks by index, the backward adds each
// gradient back where its value came from.
#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

TEST(Index, RepeatedIndicesAddTheirGradients) {
  // rows 2, 0, 2 of a (3, 2) matrix: row 2 is picked twice, so its gradient is 2, row 1's is 0
  Variable x(zeros({3, 2}), true);
  sum(index_select(x, 0, from_vector<int64_t>({2, 0, 2}, {3}))).backward();
  expect_values(x.grad(), {3, 2}, {1, 1, 0, 0, 2, 2});
  Variable w(zeros({4, 2}), true);
  sum(embedding(from_vector<int64_t>({3, 3, 1}, {3}), w)).backward();
  expect_values(w.grad(), {4, 2}, {0, 0, 1, 1, 0, 0, 2, 2});
}

TEST(Index, EmbeddingPaddingRowGetsNoGradient) {
  // ids 1, 0, 1 with padding_idx 1: row 1 is looked up twice but stays without gradient
  Variable w(ones({3, 2}), true);
  Variable y = embedding(from_vector<int64_t>({1, 0, 1}, {3}), w, 1);
  expect_values(y.data(), {3, 2}, {1, 1, 1, 1, 1, 1});  // the forward still reads the row
  sum(y).backward();
  expect_values(w.grad(), {3, 2}, {1, 1, 0, 0, 0, 0});
  Variable w2(ones({3, 2}), true);
  sum(embedding(from_vector<int64_t>({2, 2}, {2}), w2, -1)).backward();  // -1: the last row
  expect_values(w2.grad(), {3, 2}, {0, 0, 0, 0, 0, 0});
  EXPECT_THROW(embedding(from_vector<int64_t>({0}, {1}), w, 3), IndexError);
  // the module starts the padding row at zero
  Generator g(1);
  nn::Embedding emb(5, 3, {.padding_idx = 2}, g);
  expect_values(emb.weight.data().narrow(0, 2, 1), {1, 3}, {0, 0, 0});
  EXPECT_EQ(emb.extra_repr(), "5, 3, padding_idx=2");
}

TEST(Index, Gradcheck) {
  Tensor ids = from_vector<int64_t>({0, 2, 2, 1}, {2, 2});
  expect_gradcheck([ids](const V& v) { return embedding(ids, v[0]); }, {rnd({3, 4}, 9)});
  // with a padding row that no id uses (the padding row's gradient is 0 by definition, not by calculus)
  expect_gradcheck([ids](const V& v) { return embedding(ids, v[0], 3); }, {rnd({4, 4}, 9)});
  expect_gradcheck([ids](const V& v) { return embedding(ids, v[0]); }, {rnd({4, 3}, 9).transpose(0, 1)});
  Tensor gi = from_vector<int64_t>({1, 1, 0, 2, 0, 0}, {3, 2});
  expect_gradcheck([gi](const V& v) { return gather(v[0], 1, gi); }, {rnd({3, 3}, 10)});
  expect_gradcheck([gi](const V& v) { return gather(v[0], 1, gi); }, {rnd({3, 3}, 10).transpose(0, 1)});
  expect_gradcheck(
      [](const V& v) {
        return index_select(v[0], 1, from_vector<int64_t>({2, 0, 2}, {3}));
      },
      {rnd({2, 3}, 11)});
}

TEST(Index, GoldenPyTorch) {
  expect_golden("embedding", [](const V& v) { return embedding(v[0].data(), v[1]); });
  expect_golden("embedding_padding", [](const V& v) { return embedding(v[0].data(), v[1], 3); });
  expect_golden("gather_dim1", [](const V& v) { return gather(v[0], 1, v[1].data()); });
  expect_golden("index_select_dim0", [](const V& v) { return index_select(v[0], 0, v[1].data()); });
}

TEST(Index, ErrorsNameTheProblem) {
  Variable w(zeros({10, 4}), true);
  try {
    embedding(from_vector<int64_t>({3, 12}, {2}), w);
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_THAT(e.what(), HasSubstr("embedding: id 12 at position 1 is out of range for 10 embeddings"));
  }
  EXPECT_THROW(embedding(tensor({1}, {1}), w), DTypeError);
  EXPECT_THROW(gather(w, 1, from_vector<int64_t>({4}, {1, 1})), IndexError);
  EXPECT_THROW(index_select(w, 0, from_vector<int64_t>({10}, {1})), IndexError);
}
