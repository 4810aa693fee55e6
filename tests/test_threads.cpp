// Which results depend on the thread count (README, "Conventions"). Same seed and same thread
// count: the same bits, always. Across thread counts, the kernels below give the same bits too,
// because their work is cut into pieces fixed by the shapes alone (lines, rows, blocks of 2^16
// elements, images, (batch, head) pairs). A matrix product is not among them: one large product is
// split into one block of rows per thread, and OpenBLAS's float32 kernel may round a row
// differently in a block of another height (measured: 31,108 of the 1,536,000 elements of a
// (1000, 384) @ (384, 1536) product differ between 1 and 2 threads). So linear, matmul, the RNNs
// and a training step are reproducible for a given thread count, not across thread counts.
#include "helpers.h"

using namespace mg;

namespace {
// fn's result with 1 thread and with 2 threads, as raw bits (float32 compared exactly).
void expect_same_bits(const char* what, const std::function<Tensor()>& fn) {
  const int before = get_num_threads();
  set_num_threads(1);
  const std::vector<double> one = fn().to_vector<double>();
  set_num_threads(2);
  const std::vector<double> two = fn().to_vector<double>();
  set_num_threads(before);
  ASSERT_EQ(one.size(), two.size()) << what;
  size_t differ = 0;
  for (size_t i = 0; i < one.size(); ++i) differ += one[i] != two[i];
  EXPECT_EQ(differ, 0u) << what << ": " << differ << " of " << one.size() << " elements differ between 1 and 2 threads";
}
}  // namespace

TEST(Threads, KernelsCutByShapeGiveTheSameBitsForAnyThreadCount) {
  Generator g(3);
  const Tensor x = randn({256, 384}, g), w = randn({384}, g), b = randn({384}, g), big = randn({1 << 18}, g);
  expect_same_bits("gelu", [&] { return gelu(x); });
  expect_same_bits("add (broadcast)", [&] { return x + w; });
  expect_same_bits("sum over rows", [&] { return sum(x, {1}); });
  expect_same_bits("sum over columns (bias gradient)", [&] { return sum(x, {0}); });
  expect_same_bits("sum of 2^18 elements", [&] { return sum(big); });
  expect_same_bits("softmax", [&] { return softmax(x, 1); });
  expect_same_bits("log_softmax over dim 0", [&] { return log_softmax(x, 0); });
  expect_same_bits("layer_norm", [&] { return layer_norm(x, {384}, w, b); });
  expect_same_bits("linear_gelu_backward: dh",
                   [&] { return linear_gelu_backward(x, x * 0.5, GeluApproximate::None, DType::Float32, true).first; });
  expect_same_bits("linear_gelu_backward: db", [&] {
    return linear_gelu_backward(x, x * 0.5, GeluApproximate::None, DType::Float32, true).second;
  });
  const Tensor img = randn({8, 3, 32, 32}, g), k = randn({16, 3, 3, 3}, g);
  expect_same_bits("conv2d", [&] {
    return conv2d(img, k, Tensor(), {.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1});
  });
  const Tensor q = randn({2, 4, 128, 32}, g), kk = randn({2, 4, 128, 32}, g), v = randn({2, 4, 128, 32}, g);
  expect_same_bits("fused attention", [&] { return attention_forward(q, kk, v, true).out; });
  expect_same_bits("fused attention backward", [&] {
    const AttentionForward f = attention_forward(q, kk, v, true);
    return attention_backward(f.out, q, kk, v, f, true)[0];
  });
}
