// Checks exercise 8, qk_circuit: x_i C x_j / sqrt(d_k) equals the module's pre-softmax scores for
// every pair in every head, C has rank d_k (less than E), and it is not symmetric.
#include "08_qk_circuit.h"

#include <cmath>
#include <utility>
#include <vector>

#include "../../examples/common/numbers.h"  // numerical_rank, shared with related_not_similar
#include "check.h"

namespace exercises {
namespace {

const Hint kHint{"08_qk_circuit", "docs/05-attention.md", "Related, not similar: why are W_Q and W_K two matrices?"};

TEST(QKCircuit, HintNamesARealSection) { expect_hint_is_real(kHint); }

// MultiheadAttention(8, 2) without biases (d_k = 4), float64, random weights.
struct Fixture {
  Fixture() : gen(100), mha(8, 2, {.bias = false}, gen) { mha.to(mg::DType::Float64); }
  mg::Generator gen;
  mg::nn::MultiheadAttention mha;
};

TEST(QKCircuit, ReproducesThePreSoftmaxScores) {
  Fixture f;
  const mg::Tensor x = random64({1, 5, 8}, 101);
  // need_weights: the module returns its scores Q K^T / sqrt(d_k), (B, H, T, T).
  const mg::Tensor scores = f.mha(mg::Variable(x), {.need_weights = true}).scores.data();
  const mg::Tensor xs = x.reshape({5, 8});  // one token per row
  for (int64_t h = 0; h < 2; ++h) {
    const mg::Tensor c = qk_circuit(f.mha, h);
    ASSERT_TRUE(c.defined() && c.shape() == mg::Shape({8, 8})) << "qk_circuit should return an (8, 8) tensor";
    const mg::Tensor from_c = mg::matmul(mg::matmul(xs, c), xs.transpose(0, 1)) / 2.0;  // sqrt(d_k) = 2
    expect_close(from_c, scores.narrow(1, h, 1).reshape({5, 5}), 1e-12,
                 "x_i C x_j / sqrt(d_k) against the module's scores, head " + std::to_string(h));
  }
}

TEST(QKCircuit, HasRankDkAndIsNotSymmetric) {
  Fixture f;
  for (int64_t h = 0; h < 2; ++h) {
    const mg::Tensor c = qk_circuit(f.mha, h);
    ASSERT_TRUE(c.defined() && c.shape() == mg::Shape({8, 8})) << "qk_circuit should return an (8, 8) tensor";
    EXPECT_EQ(example::numerical_rank(c), 4)
        << "rank of head " << h << "'s C: a product through d_k = 4 dims, of E = 8";
    const double asymmetry =
        std::sqrt(mg::sum(mg::pow(c - c.transpose(0, 1), 2)).item()) / std::sqrt(mg::sum(mg::pow(c, 2)).item());
    EXPECT_GT(asymmetry, 0.1) << "head " << h << "'s C is (nearly) symmetric: ||C - C^T|| / ||C|| = " << asymmetry
                              << " (W_Q^h W_Q^h^T would be; W_Q^h W_K^h^T is not)";
  }
}

}  // namespace
}  // namespace exercises
