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
  EXPECT_THROW(multinomial(rows, 4, false, g), ValueError);             // row 1 has 3 non-zero weights
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
