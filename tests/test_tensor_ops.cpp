// Kernels of tensor/ops: hand-computed values, non-contiguous inputs, errors, and determinism.
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::expect_values;
using testing::HasSubstr;

TEST(TensorOps, BinaryBroadcastAndNonContiguous) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor col = tensor({10, 20}, {2, 1});
  expect_values(a + col, {2, 3}, {11, 12, 13, 24, 25, 26});
  expect_values(a * 2.0, {2, 3}, {2, 4, 6, 8, 10, 12});
  // a^T (non-contiguous) minus a row vector
  expect_values(a.transpose(0, 1) - tensor({1, 1}, {2}), {3, 2}, {0, 3, 1, 4, 2, 5});
  expect_values(div(tensor({1, 3}, {2}), tensor({4, 2}, {2})), {2}, {0.25, 1.5});
  EXPECT_THROW(add(a, a.to(DType::Float64)), DTypeError);
  try {
    add(a, zeros({3, 2}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("add: shapes (2, 3) and (3, 2) cannot be broadcast"));
  }
}

TEST(TensorOps, UnaryValues) {
  Tensor x = tensor({-1, 0, 2}, {3});
  expect_values(relu(x), {3}, {0, 0, 2});
  expect_values(abs(x), {3}, {1, 0, 2});
  expect_values(sign(x), {3}, {-1, 0, 1});
  expect_values(exp(x), {3}, {std::exp(-1.0), 1, std::exp(2.0)}, 1e-6);
  expect_values(sigmoid(x), {3}, {1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-2.0))}, 1e-6);
  // gelu(x) = x * Phi(x): Phi(-1) = 0.158655, Phi(2) = 0.977250
  expect_values(gelu(x), {3}, {-0.158655, 0, 1.954500}, 1e-5);
  expect_values(pow(tensor({2, 3}, {2}), 3), {2}, {8, 27});
  EXPECT_THROW(exp(arange(3)), DTypeError);
}

TEST(TensorOps, ComparisonsWhereMaskedFill) {
  Tensor a = tensor({1, 5, 3}, {3}), b = tensor({2, 5, 1}, {3});
  Tensor m = gt(a, b);
  EXPECT_EQ(m.dtype(), DType::Bool);
  expect_values(m, {3}, {0, 0, 1});
  expect_values(eq(a, b), {3}, {0, 1, 0});
  expect_values(where(m, a, b), {3}, {2, 5, 3});
  expect_values(masked_fill(a, logical_not(m), -1), {3}, {-1, -1, 3});
  EXPECT_THROW(masked_fill(a, a, 0), DTypeError);
}

TEST(TensorOps, SumAndMeanOverDims) {
  Tensor x = arange(24, DType::Float32).view({2, 3, 4});
  expect_values(sum(x), {}, {276});
  // sum over dim 1: x[i, :, k] = 12i + 4j + k -> 36i + 12 + 3k
  expect_values(sum(x, {1}), {2, 4}, {12, 15, 18, 21, 48, 51, 54, 57});
  expect_values(sum(x, {0, 2}, true), {1, 3, 1}, {60, 92, 124});
  expect_values(mean(x, {-1}), {2, 3}, {1.5, 5.5, 9.5, 13.5, 17.5, 21.5});
  // leading-dims reduction (the column kernel) on a bias-gradient shape
  expect_values(sum(x.view({6, 4}), {0}), {4}, {60, 66, 72, 78});
  // non-contiguous input
  expect_values(sum(x.transpose(0, 2), {0}), {3, 2}, {6, 54, 22, 70, 38, 86});
  expect_values(sum(arange(5)), {}, {10});
  EXPECT_THROW(sum(x, {3}), IndexError);
  EXPECT_THROW(mean(arange(4)), DTypeError);
}

TEST(TensorOps, MaxArgmaxAndSumToShape) {
  Tensor x = tensor({3, 9, 2, 7, 1, 8}, {2, 3});
  auto [v, i] = max(x, 1);
  expect_values(v, {2}, {9, 8});
  expect_values(i, {2}, {1, 2});
  expect_values(argmax(x, 0, true), {1, 3}, {1, 0, 1});
  expect_values(max(x), {}, {9});
  expect_values(sum_to_shape(ones({2, 3, 4}), {3, 1}), {3, 1}, {8, 8, 8});
  EXPECT_THROW(sum_to_shape(ones({2, 3}), {4}), ShapeError);
}

namespace {
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
  Tensor c = zeros({n, m}, DType::Float64);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t) s += a.at({i, t}) * b.at({t, j});
      c.data<double>()[i * m + j] = s;
    }
  return c;
}
}  // namespace

TEST(TensorOps, MatmulHandValuesAndTransposedViews) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3}), b = tensor({7, 8, 9, 10, 11, 12}, {3, 2});
  expect_values(matmul(a, b), {2, 2}, {58, 64, 139, 154});
  // Transposed views go to BLAS as flags; the result must match the naive product.
  Tensor x = mgtest::rnd({5, 7}, 1), y = mgtest::rnd({4, 7}, 2);
  expect_close(matmul(x, y.transpose(0, 1)), naive_matmul(x, y.transpose(0, 1)), 1e-12);
  expect_close(matmul(x.transpose(0, 1), x), naive_matmul(x.transpose(0, 1), x), 1e-12);
  // A column slice (stride 2 in both dims) cannot be described to BLAS and is copied.
  Tensor big = mgtest::rnd({6, 8}, 3);
  Tensor s = big.slice(0, 0, 6, 2).slice(1, 0, 8, 2);
  expect_close(matmul(s, s.transpose(0, 1)), naive_matmul(s, s.transpose(0, 1)), 1e-12);
  // vector forms
  expect_values(matmul(tensor({1, 2, 3}, {3}), b), {2}, {58, 64});
  expect_values(matmul(a, tensor({1, 0, 1}, {3})), {2}, {4, 10});
}

TEST(TensorOps, MatmulBatchedBroadcast) {
  Tensor a = mgtest::rnd({2, 1, 3, 4}, 4), b = mgtest::rnd({5, 4, 2}, 5);
  Tensor c = matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 5, 3, 2}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j)
      expect_close(c.narrow(0, i, 1).narrow(1, j, 1).reshape({3, 2}),
                   naive_matmul(a.narrow(0, i, 1).reshape({3, 4}), b.narrow(0, j, 1).reshape({4, 2})), 1e-12);
  // (B, T, C) @ (C, D): one GEMM over all rows
  Tensor x = mgtest::rnd({3, 4, 5}, 6), w = mgtest::rnd({5, 2}, 7);
  expect_close(matmul(x, w).reshape({12, 2}), naive_matmul(x.reshape({12, 5}), w), 1e-12);
}

TEST(TensorOps, MatmulErrors) {
  try {
    matmul(zeros({2, 3}), zeros({4, 5}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("matmul: shapes (2, 3) and (4, 5) cannot be multiplied"));
  }
  EXPECT_THROW(matmul(zeros({2, 2, 3}), zeros({3, 3, 1})), ShapeError);
  EXPECT_THROW(matmul(arange(4).view({2, 2}), arange(4).view({2, 2})), DTypeError);
}

TEST(TensorOps, SoftmaxAndLogSoftmax) {
  Tensor x = tensor({0, std::log(3.0f), 1, 1}, {2, 2});
  expect_values(softmax(x, 1), {2, 2}, {0.25, 0.75, 0.5, 0.5}, 1e-6);
  expect_values(log_softmax(x, -1), {2, 2}, {std::log(0.25), std::log(0.75), std::log(0.5), std::log(0.5)}, 1e-6);
  // along dim 0, and stable for huge logits
  expect_values(softmax(tensor({1000, 0, 1000, 0}, {2, 2}), 0), {2, 2}, {0.5, 0.5, 0.5, 0.5});
  // a fully masked row (all -inf) gives nan, like PyTorch, not a crash
  Tensor inf = full({3}, -INFINITY);
  EXPECT_TRUE(std::isnan(softmax(inf, 0).at({0})));
}

TEST(TensorOps, LayerNormHandValues) {
  // row (1, 2, 3): mean 2, var 2/3 -> xhat = (-1, 0, 1) / sqrt(2/3 + eps)
  Tensor x = tensor({1, 2, 3, 10, 10, 10}, {2, 3});
  auto [y, mean_r, rstd_r] = layer_norm_forward(x, {3}, Tensor(), Tensor(), 1e-5);
  const double r = 1 / std::sqrt(2.0 / 3 + 1e-5);
  expect_values(y, {2, 3}, {-r, 0, r, 0, 0, 0}, 1e-5);
  expect_values(mean_r, {2}, {2, 10}, 1e-6);
  expect_values(rstd_r, {2}, {r, 1 / std::sqrt(1e-5)}, 1e-2);
  Tensor w = tensor({1, 2, 3}, {3}), b = tensor({0, 1, 0}, {3});
  expect_values(layer_norm(x, {3}, w, b, 1e-5), {2, 3}, {-r, 1, 3 * r, 0, 1, 0}, 1e-5);
  EXPECT_THROW(layer_norm(x, {3}, zeros({4}), Tensor(), 1e-5), ShapeError);
}

TEST(TensorOps, IndexSelectGatherScatter) {
  Tensor x = arange(12, DType::Float32).view({4, 3});
  expect_values(index_select(x, 0, from_vector<int64_t>({3, 0, 3}, {3})), {3, 3}, {9, 10, 11, 0, 1, 2, 9, 10, 11});
  expect_values(index_select(x, 1, from_vector<int64_t>({2}, {1})), {4, 1}, {2, 5, 8, 11});
  Tensor idx = from_vector<int64_t>({0, 2, 1, 1}, {2, 2});
  expect_values(gather(x.narrow(0, 0, 2), 1, idx), {2, 2}, {0, 2, 4, 4});
  // scatter_add: repeated indices add up
  expect_values(scatter_add(zeros({2, 3}), 1, idx, ones({2, 2})), {2, 3}, {1, 0, 1, 0, 2, 0});
  expect_values(index_add(zeros({3, 2}), 0, from_vector<int64_t>({2, 2, 0}, {3}), ones({3, 2})), {3, 2},
                {1, 1, 0, 0, 2, 2});
  expect_values(one_hot(from_vector<int64_t>({2, 0}, {2}), 3), {2, 3}, {0, 0, 1, 1, 0, 0});
}

TEST(TensorOps, IndexErrorsNameTheIndex) {
  Tensor x = zeros({4, 3});
  try {
    index_select(x, 0, from_vector<int64_t>({1, 4}, {2}));
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_THAT(e.what(), HasSubstr("index_select: index 4 is out of range for dim 0 of size 4"));
  }
  EXPECT_THROW(gather(x, 1, from_vector<int64_t>({-1}, {1, 1})), IndexError);
  EXPECT_THROW(index_select(x, 0, tensor({1}, {1})), DTypeError);
  EXPECT_THROW(one_hot(from_vector<int64_t>({3}, {1}), 3), IndexError);
}

TEST(TensorOps, ConcatStackSplitTril) {
  Tensor a = tensor({1, 2, 3, 4}, {2, 2}), b = tensor({5, 6}, {2, 1});
  expect_values(concat({a, b}, 1), {2, 3}, {1, 2, 5, 3, 4, 6});
  EXPECT_THROW(concat({a, b}, 0), ShapeError);
  expect_values(sum(stack({a, a}, 0), {0}), {2, 2}, {2, 4, 6, 8});
  auto parts = split(arange(5), 2, 0);
  ASSERT_EQ(parts.size(), 3u);
  expect_values(parts[2], {1}, {4});
  EXPECT_THROW(split(arange(5), std::vector<int64_t>{2, 2}, 0), ShapeError);
  expect_values(tril(ones({3, 3})), {3, 3}, {1, 0, 0, 1, 1, 0, 1, 1, 1});
  expect_values(triu(ones({2, 3}), 1), {2, 3}, {0, 1, 1, 0, 0, 1});
}

TEST(TensorOps, SameBitsForAnyThreadCount) {
  // minigrad's own kernels compute each output from a fixed sequence of inputs, so the thread
  // count does not change a single bit. Large enough that the work is split across threads.
  Generator g(11);
  Tensor x = randn({512, 1024}, g), w = randn({1024, 256}, g);
  auto run = [&] {
    return std::vector<Tensor>{
        sum(x), sum(x, {0}), mean(x, {1}), softmax(x, 1), layer_norm(x, {1024}, Tensor(), Tensor(), 1e-5), gelu(x) * x};
  };
  set_num_threads(1);
  std::vector<Tensor> one = run();
  set_num_threads(2);
  std::vector<Tensor> two = run();
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(one[i].to_vector<float>(), two[i].to_vector<float>()) << "result " << i;
  // OpenBLAS may split a GEMM differently for another thread count, so matmul promises the same
  // bits for the same thread count only.
  EXPECT_EQ(matmul(x, w).to_vector<float>(), matmul(x, w).to_vector<float>());
}
