// Differentiable matmul and linear.
#include "helpers.h"
#include "minigrad/tensor/blas.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

TEST(Matmul, HandComputedGradients) {
  // y = a @ b, loss = sum(y): da = 1 @ b^T (row sums of b), db = a^T @ 1 (column sums of a)
  Variable a(tensor({1, 2, 3, 4, 5, 6}, {2, 3}), true), b(tensor({1, 2, 3, 4, 5, 6}, {3, 2}), true);
  sum(matmul(a, b)).backward();
  expect_values(a.grad(), {2, 3}, {3, 7, 11, 3, 7, 11});
  expect_values(b.grad(), {3, 2}, {5, 5, 7, 7, 9, 9});
}

TEST(Matmul, Gradcheck) {
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({3, 4}, 1), rnd({4, 2}, 2)});
  // batched with broadcast batch dims: b's gradient is summed over a's batch
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({2, 1, 3, 4}, 3), rnd({5, 4, 2}, 4)});
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({2, 3, 4}, 5), rnd({4, 2}, 6)});
  // transposed (non-contiguous) operands
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); },
                   {rnd({4, 3}, 7).transpose(0, 1), rnd({2, 4}, 8).transpose(0, 1)});
  // vectors
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({4}, 9), rnd({4, 3}, 10)});
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({3, 4}, 11), rnd({4}, 12)});
  expect_gradcheck([](const V& v) { return linear(v[0], v[1], v[2]); },
                   {rnd({2, 3, 4}, 13), rnd({5, 4}, 14), rnd({5}, 15)});
}

TEST(Matmul, GoldenPyTorch) {
  expect_golden("matmul_2d", [](const V& v) { return matmul(v[0], v[1]); });
  expect_golden("matmul_batched_broadcast", [](const V& v) { return matmul(v[0], v[1]); });
  expect_golden("matmul_vec_mat", [](const V& v) { return matmul(v[0], v[1]); });
  expect_golden("matmul_mat_vec", [](const V& v) { return matmul(v[0], v[1]); });
  expect_golden("linear", [](const V& v) { return linear(v[0], v[1], v[2]); });
}

TEST(Matmul, ErrorsNameBothShapes) {
  Variable a(zeros({2, 3}), true), b(zeros({4, 5}), true);
  try {
    matmul(a, b);
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("matmul: shapes (2, 3) and (4, 5) cannot be multiplied"));
  }
  try {
    linear(Variable(zeros({2, 3})), Variable(zeros({4, 5})));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("linear: input of shape (2, 3) does not fit weight of shape (4, 5)"));
  }
}

TEST(Matmul, VectorsAndEmptySumsFollowTorch) {
  // A dot product of two vectors is a 0-dim tensor, and differentiable (it once was an IndexError).
  Variable a(tensor({1, 2, 3}, {3}), true), b(tensor({4, 5, 6}, {3}), true);
  Variable d = matmul(a, b);
  EXPECT_EQ(d.dim(), 0);
  EXPECT_EQ(d.item(), 32);
  d.backward();
  expect_values(a.grad(), {3}, {4, 5, 6});
  expect_values(b.grad(), {3}, {1, 2, 3});
  expect_gradcheck([](const V& v) { return matmul(v[0], v[1]); }, {rnd({4}, 20), rnd({4}, 21)});
  // with k = 0 the products are sums over nothing, and the vector dims still go
  EXPECT_EQ(matmul(zeros({0}), zeros({0})).shape(), (Shape{}));
  EXPECT_EQ(matmul(zeros({0}), zeros({0})).item(), 0);
  expect_values(matmul(zeros({2, 0}), zeros({0})), {2}, {0, 0});
  EXPECT_EQ(matmul(zeros({0, 3}), ones({3})).shape(), (Shape{0}));
  // linear with in_features = 0: the bias alone, as in PyTorch (once a reshape error)
  Variable w(zeros({2, 0}), true), bias(tensor({1, 2}, {2}), true), x(zeros({3, 0}), true);
  Variable y = linear(x, w, bias);
  expect_values(y.data(), {3, 2}, {1, 2, 1, 2, 1, 2});
  sum(y).backward();
  expect_values(bias.grad(), {2}, {3, 3});
  EXPECT_EQ(w.grad().shape(), (Shape{2, 0}));
}

TEST(Matmul, BatchMismatchNamesBothShapes) {
  try {
    matmul(zeros({2, 3, 4}), zeros({3, 4, 5}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(
        e.what(),
        HasSubstr("matmul: shapes (2, 3, 4) and (3, 4, 5) cannot be multiplied: their batch dims (2,) and (3,)"));
  }
}

TEST(Matmul, BlasRefusesIllegalArguments) {
  // cblas only prints a warning and skips the product on a bad leading dimension; blas::gemm
  // checks every call first (no caller of minigrad's should ever see this error).
  float a[4] = {1, 2, 3, 4}, c[4] = {0, 0, 0, 0};
  EXPECT_THROW(blas::gemm(false, false, 2, 2, 2, 1.f, a, 1, a, 2, 0.f, c, 2), ValueError);  // lda < k
  EXPECT_THROW(blas::gemm(false, true, 2, 2, 2, 1.f, a, 2, a, 0, 0.f, c, 2), ValueError);   // ldb 0
  EXPECT_NO_THROW(blas::gemm(false, false, 2, 2, 2, 1.f, a, 2, a, 2, 0.f, c, 2));
  EXPECT_EQ(c[0], 7);  // 1*1 + 2*3
  EXPECT_THROW(blas::gemm(false, false, 2, 2, 2, 1.f, a, 1, a, 2, 0.f, c, 2, blas::Engine::OneDNN), ValueError);
}

TEST(Matmul, BothBlasEnginesComputeTheSameProduct) {
  // C (2, 3) = alpha op(A) op(B) + beta C with leading dimensions wider than the rows, every
  // transpose combination, against the sums written out; OpenBLAS and oneDNN alike.
  const float A[2][4] = {{1, 2, 3, 9}, {4, 5, 6, 9}};                // (2, 3) in a row of 4
  const float At[3][3] = {{1, 4, 9}, {2, 5, 9}, {3, 6, 9}};          // its transpose (3, 2) in rows of 3
  const float B[3][4] = {{1, 0, 2, 9}, {0, 1, 3, 9}, {1, 1, 1, 9}};  // (3, 3) in rows of 4
  const float Bt[3][3] = {{1, 0, 1}, {0, 1, 1}, {2, 3, 1}};          // its transpose
  float expected[2][3];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float s = 0;
      for (int k = 0; k < 3; ++k) s += A[i][k] * B[k][j];
      expected[i][j] = 2 * s + 0.5f * 10;  // alpha 2, beta 0.5 on C = 10
    }
  for (blas::Engine e : {blas::Engine::OpenBLAS, blas::Engine::OneDNN})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(fmt::format("engine {}, trans_a {}, trans_b {}", e == blas::Engine::OneDNN ? "oneDNN" : "OpenBLAS",
                                 ta, tb));
        float C[2][5];
        for (auto& row : C)
          for (float& v : row) v = 10;
        blas::gemm(ta, tb, 2, 3, 3, 2.f, ta ? &At[0][0] : &A[0][0], ta ? 3 : 4, tb ? &Bt[0][0] : &B[0][0], tb ? 3 : 4,
                   0.5f, &C[0][0], 5, e);
        for (int i = 0; i < 2; ++i) {
          for (int j = 0; j < 3; ++j) EXPECT_EQ(C[i][j], expected[i][j]) << i << "," << j;
          EXPECT_EQ(C[i][3], 10);  // outside the product: untouched
        }
      }
}
