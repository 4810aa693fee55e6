// Which results depend on the thread count (README, "Conventions"). Same seed and same thread
// count: the same bits, always. Across thread counts, the kernels below give the same bits too,
// because their work is cut into pieces fixed by the shapes alone (lines, rows, blocks of 2^16
// elements, images, (batch, head) pairs). A matrix product is not among them: one large product is
// split into one block of rows per thread, and OpenBLAS's float32 kernel may round a row
// differently in a block of another height (measured: 31,108 of the 1,536,000 elements of a
// (1000, 384) @ (384, 1536) product differ between 1 and 2 threads). So linear, matmul, the RNNs
// and a training step are reproducible for a given thread count, not across thread counts.
#include <algorithm>
#include <mutex>

#include "helpers.h"
#include "minigrad/tensor/loops.h"

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

TEST(Threads, ALongContiguousRunIsSharedOutInPieces) {
  // A contiguous tensor is one run for the elementwise loop (tensor/loops.h); one longer than
  // kGrain elements is handed out in pieces of kGrain, so that the threads share it (before, the
  // whole tensor went to one thread). The pieces cover it exactly once, in every layout, and the
  // ops give the same bits for 1 and 2 threads.
  const int64_t n = 3 * kGrain + 123;
  auto values = [](const Shape& s) { return arange(numel_of(s)).to(DType::Float64).reshape(s); };
  const struct {
    Tensor x;
    int64_t calls;  // the pieces expected
  } cases[] = {
      {values({n}), 4},
      {values({2, n}), 7},                      // one run of 2n elements
      {values({2, n + 1}).narrow(1, 0, n), 8},  // two runs of n: 4 pieces each
      {values({n, 2}).transpose(0, 1), 8},      // two strided runs of n
      {values({0, n}), 0},
      {values({5, 7}), 1},
  };
  for (const auto& c : cases) {
    const Tensor& x = c.x;
    std::vector<int> seen(x.numel() == 0 ? 0 : static_cast<size_t>(x.max().item()) + 1, 0);
    int64_t calls = 0, longest = 0;
    const double* px = x.data<double>();
    std::mutex m;
    detail::for_each_run<1>(x.shape(), {x.strides()}, [&](const std::array<int64_t, 1>& off, int64_t len, auto st) {
      std::lock_guard<std::mutex> lock(m);
      ++calls, longest = std::max(longest, len);
      for (int64_t j = 0; j < len; ++j) ++seen[static_cast<size_t>(px[off[0] + j * st[0]])];
    });
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), x.numel()) << shape_str(x.shape());
    EXPECT_EQ(std::count_if(seen.begin(), seen.end(), [](int k) { return k > 1; }), 0) << shape_str(x.shape());
    EXPECT_LE(longest, kGrain) << shape_str(x.shape());
    EXPECT_EQ(calls, c.calls) << shape_str(x.shape());
  }
  Generator g(4);
  const Tensor big = randn({1 << 18}, g), other = randn({1 << 18}, g);
  expect_same_bits("tanh of 2^18 elements", [&] { return tanh(big); });
  expect_same_bits("mul of 2^18 elements", [&] { return big * other; });
  expect_same_bits("tanh_backward of 2^18 elements", [&] { return tanh_backward(other, tanh(big)); });
}
