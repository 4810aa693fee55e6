// Checks exercise 8, qk_circuit: x_i C x_j / sqrt(d_k) equals the module's pre-softmax scores for
// every pair in every head, C has rank d_k (less than E), and it is not symmetric.
#include "08_qk_circuit.h"

#include <cmath>
#include <utility>
#include <vector>

#include "check.h"

namespace exercises {
namespace {

const Hint kHint{"08_qk_circuit", "docs/05-attention.md", "Related, not similar: why are W_Q and W_K two matrices?"};

TEST(QKCircuit, HintNamesARealSection) { expect_hint_is_real(kHint); }

// The numerical rank of a square float64 matrix: Gaussian elimination with partial pivoting,
// counting pivots larger than rel_tol times the largest entry.
int64_t numerical_rank(const mg::Tensor& m, double rel_tol = 1e-9) {
  const int64_t n = m.size(0);
  std::vector<double> a = m.to(mg::DType::Float64).contiguous().to_vector<double>();
  double largest = 0;
  for (double v : a) largest = std::max(largest, std::abs(v));
  int64_t rank = 0;
  for (int64_t col = 0; col < n && rank < n; ++col) {
    int64_t pivot = rank;
    for (int64_t r = rank; r < n; ++r)
      if (std::abs(a[r * n + col]) > std::abs(a[pivot * n + col])) pivot = r;
    if (std::abs(a[pivot * n + col]) <= rel_tol * largest) continue;
    for (int64_t c = 0; c < n; ++c) std::swap(a[rank * n + c], a[pivot * n + c]);
    for (int64_t r = rank + 1; r < n; ++r) {
      const double f = a[r * n + col] / a[rank * n + col];
      for (int64_t c = col; c < n; ++c) a[r * n + c] -= f * a[rank * n + c];
    }
    ++rank;
  }
  return rank;
}

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
    EXPECT_EQ(numerical_rank(c), 4) << "rank of head " << h << "'s C: a product through d_k = 4 dims, of E = 8";
    const double asymmetry =
        std::sqrt(mg::sum(mg::pow(c - c.transpose(0, 1), 2)).item()) / std::sqrt(mg::sum(mg::pow(c, 2)).item());
    EXPECT_GT(asymmetry, 0.1) << "head " << h << "'s C is (nearly) symmetric: ||C - C^T|| / ||C|| = " << asymmetry
                              << " (W_Q^h W_Q^h^T would be; W_Q^h W_K^h^T is not)";
  }
}

}  // namespace
}  // namespace exercises
