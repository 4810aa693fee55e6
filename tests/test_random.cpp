// Sampling: multinomial with and without replacement, randperm, the *_like creators and linspace.
// Frequencies are checked against the weights over many draws; every draw depends on the seed only.
#include <cmath>
#include <set>

#include "helpers.h"

using namespace mg;
using mgtest::expect_values;

TEST(Random, MultinomialFollowsTheWeights) {
  Generator g(3);
  // weights 1 : 2 : 0 : 5 (not normalised): frequencies 1/8, 2/8, 0, 5/8 over 8000 draws
  const Tensor w = tensor({1, 2, 0, 5}, {4});
  const std::vector<int64_t> s = multinomial(w, 8000, true, g).to_vector<int64_t>();
  int counts[4] = {0, 0, 0, 0};
  for (int64_t i : s) ++counts[i];
  EXPECT_NEAR(counts[0], 1000, 100);
  EXPECT_NEAR(counts[1], 2000, 130);
  EXPECT_EQ(counts[2], 0);  // zero weight: never drawn
  EXPECT_NEAR(counts[3], 5000, 150);
  // without replacement: every id at most once per row, and zero weights never
  const Tensor rows = tensor({1, 1, 1, 1, 0, 3, 1, 1}, {2, 4});
  const Tensor d = multinomial(rows, 3, false, g);
  EXPECT_EQ(d.shape(), (Shape{2, 3}));
  for (int64_t r = 0; r < 2; ++r) {
    std::set<int64_t> seen;
    for (int64_t k = 0; k < 3; ++k) seen.insert(static_cast<int64_t>(d.at({r, k})));
    EXPECT_EQ(seen.size(), 3u);
    if (r == 1) EXPECT_FALSE(seen.count(0));
  }
  // the same seed draws the same ids
  Generator a(7), b(7);
  EXPECT_EQ(multinomial(w, 50, true, a).to_vector<int64_t>(), multinomial(w, 50, true, b).to_vector<int64_t>());
  EXPECT_THROW(multinomial(rows, 4, false, g), ValueError);                 // row 1 has 3 non-zero weights
  EXPECT_THROW(multinomial(tensor({1, -1}, {2}), 1, true, g), ValueError);  // negative weight
  EXPECT_THROW(multinomial(tensor({0, 0}, {2}), 1, true, g), ValueError);   // nothing to draw
  EXPECT_THROW(multinomial(tensor({NAN, 1}, {2}), 1, true, g), ValueError);
  EXPECT_THROW(multinomial(arange(3), 1, true, g), DTypeError);
}

TEST(Random, RandpermIsAPermutationAndUniform) {
  Generator g(5);
  const std::vector<int64_t> p = randperm(10, g).to_vector<int64_t>();
  EXPECT_EQ(std::set<int64_t>(p.begin(), p.end()).size(), 10u);
  // each value lands in position 0 about a tenth of the time
  int first_is_zero = 0;
  for (int i = 0; i < 2000; ++i) first_is_zero += randperm(10, g).to_vector<int64_t>()[0] == 0;
  EXPECT_NEAR(first_is_zero, 200, 50);
  EXPECT_EQ(randperm(0, g).numel(), 0);
  EXPECT_THROW(randperm(-1, g), ValueError);
}

TEST(Random, CreationLikeAndLinspace) {
  const Tensor x = zeros({2, 3}, DType::Float64);
  EXPECT_EQ(ones_like(x).dtype(), DType::Float64);
  expect_values(full_like(x, 2.5), {2, 3}, std::vector<double>(6, 2.5));
  EXPECT_EQ(zeros_like(x, DType::Int64).dtype(), DType::Int64);
  Generator g(1), h(1);
  EXPECT_EQ(randn_like(x, g).to_vector<double>(), randn({2, 3}, h, DType::Float64).to_vector<double>());
  // linspace: both ends exact, evenly spaced, as torch.linspace
  expect_values(linspace(0, 1, 5), {5}, {0, 0.25, 0.5, 0.75, 1});
  expect_values(linspace(-1, 1, 1), {1}, {-1});
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  EXPECT_EQ(linspace(0.1, 0.7, 7, DType::Float64).to_vector<double>().back(), 0.7);
  EXPECT_THROW(linspace(0, 1, -1), ValueError);
  EXPECT_THROW(linspace(0, INFINITY, 3), ValueError);
}

TEST(Random, SampleLogitsTemperatureAndTopK) {
  const Tensor logits = tensor({0.0, 2.0, 1.0, -1.0, 3.0, 0.5, 0.2, 0.1}, {2, 4});  // rows' largest: 1 and 0
  // Temperature 0 and top_k 1 both take each row's largest logit.
  EXPECT_EQ(sample_logits(logits, 0.0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  Generator g(1);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(sample_logits(logits, 5.0, 1, g).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  // top_k 2: only each row's two largest ever come out; temperature 1 draws them with softmax's odds.
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 4000; ++i) {
    const std::vector<int64_t> id = sample_logits(logits, 1.0, 2, g).to_vector<int64_t>();
    ++counts[static_cast<size_t>(id[0])];
    EXPECT_TRUE(id[1] == 0 || id[1] == 1);
  }
  EXPECT_EQ(counts[0] + counts[3], 0);
  EXPECT_NEAR(counts[1] / 4000.0, std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 0.03);  // 0.731
  // Float32, a strided (transposed) view, an empty batch.
  EXPECT_EQ(
      sample_logits(logits.to(DType::Float32).transpose(0, 1).contiguous().transpose(0, 1), 0.0).to_vector<int64_t>(),
      (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(sample_logits(zeros({0, 4}), 1.0).shape(), (Shape{0, 1}));
  EXPECT_THROW(sample_logits(logits, -1.0), ValueError);
  EXPECT_THROW(sample_logits(logits, NAN), ValueError);
  EXPECT_THROW(sample_logits(logits, 1.0, 0), ValueError);
  EXPECT_THROW(sample_logits(zeros({4}), 1.0), ShapeError);
  EXPECT_THROW(sample_logits(zeros({2, 4}, DType::Int64), 1.0), DTypeError);
}
