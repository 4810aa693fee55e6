// mg::Tensor: storage, shapes, strides, views, creation, the generator.
#include <limits>
#include <sstream>

#include "helpers.h"
#include "minigrad/tensor/scratch.h"

using namespace mg;
using mgtest::expect_values;
using testing::HasSubstr;

TEST(Tensor, ContiguousStridesAndShape) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.strides(), (Strides{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(shape_str({2, 3}), "(2, 3)");
  EXPECT_EQ(shape_str({5}), "(5,)");
}

TEST(Tensor, CreationValues) {
  expect_values(arange(5), {5}, {0, 1, 2, 3, 4});
  expect_values(arange(1.0, 2.0, 0.25, DType::Float32), {4}, {1, 1.25, 1.5, 1.75});
  // the dtype follows the arguments, as in torch.arange: whole numbers give int64, else float32
  EXPECT_EQ(arange(0, 5).dtype(), DType::Int64);
  Tensor tenths = arange(0, 1, 0.1);
  EXPECT_EQ(tenths.dtype(), DType::Float32);
  expect_values(tenths, {10}, {0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9});
  EXPECT_EQ(arange(0.5, 3).dtype(), DType::Float32);
  EXPECT_EQ(arange(0, 1, 0.5, DType::Float64).dtype(), DType::Float64);
  expect_values(full({2, 2}, 3.5), {2, 2}, {3.5, 3.5, 3.5, 3.5});
  expect_values(ones({3}, DType::Float64), {3}, {1, 1, 1});
  EXPECT_EQ(scalar_tensor(2.5).item(), 2.5);
  EXPECT_EQ(scalar_tensor(2.5).dim(), 0);
  expect_values(eye(3), {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1});
}

TEST(Tensor, TransposeIsAViewSharingStorage) {
  Tensor a = arange(6, DType::Float32).view({2, 3});
  Tensor t = a.transpose(0, 1);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.strides(), (Strides{1, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.storage(), a.storage());
  expect_values(t, {3, 2}, {0, 3, 1, 4, 2, 5});
  // A write through the view is seen by the original.
  t.narrow(0, 1, 1).fill_(9);  // t[1, :] = a[:, 1]
  expect_values(a, {2, 3}, {0, 9, 2, 3, 9, 5});
}

TEST(Tensor, PermuteNarrowSliceSqueeze) {
  Tensor a = arange(24, DType::Float32).view({2, 3, 4});
  Tensor p = a.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.at({1, 1, 2}), 1 * 12 + 2 * 4 + 1);           // element a[1, 2, 1]
  Tensor s = arange(10, DType::Float32).slice(0, 1, 8, 3);  // 1, 4, 7
  expect_values(s, {3}, {1, 4, 7});
  expect_values(arange(10, DType::Float32).slice(0, -3, 100), {3}, {7, 8, 9});
  Tensor u = a.unsqueeze(1);
  EXPECT_EQ(u.shape(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(u.squeeze(1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(zeros({1, 3, 1}).squeeze().shape(), (Shape{3}));
}

TEST(Tensor, ExpandUsesZeroStrides) {
  Tensor b = tensor({1, 2, 3}, {3, 1});
  Tensor e = b.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (Strides{0, 1, 0}));
  EXPECT_EQ(e.at({1, 2, 3}), 3);
  expect_values(sum(e.contiguous(), {0, 2}), {3}, {8, 16, 24});
}

TEST(Tensor, AZeroSizeViewWithAnOffsetHasANullDataPointer) {
  // A tensor with no elements has no memory: its view at offset 8 (columns 8.. of a (0, 16)) once
  // returned null + 8 floats, a pointer into nothing (undefined behaviour, which clang's UBSan
  // reported from the fused attention's per-head addressing and from copy_).
  Tensor empty_rows = zeros({0, 16});
  Tensor view = empty_rows.narrow(1, 8, 4);
  EXPECT_EQ(view.offset(), 8);
  EXPECT_EQ(view.data<float>(), nullptr);
  EXPECT_EQ(zeros({0, 3, 8}, DType::Float64).narrow(2, 5, 2).data<double>(), nullptr);
  EXPECT_EQ(view.data_ptr(), nullptr);  // the untyped pointer too
  EXPECT_EQ(Tensor().data_ptr(), nullptr);
  // copied, it is still an empty tensor of its shape
  EXPECT_EQ(view.contiguous().shape(), (Shape{0, 4}));
  Tensor into = empty({0, 4});
  into.copy_(view);
  EXPECT_EQ(into.numel(), 0);
}

TEST(Tensor, DataPtrIsTheFirstElementsAddressInBytes) {
  // data_ptr() is data<T>() without the type: offset * itemsize bytes past the storage's start
  const Tensor x = arange(0, 24, 1, DType::Float64).reshape({4, 6});
  const Tensor v = x.narrow(0, 1, 2).narrow(1, 3, 2);  // offset 1*6 + 3 = 9 elements
  EXPECT_EQ(v.offset(), 9);
  EXPECT_EQ(v.data_ptr(), static_cast<void*>(v.data<double>()));
  EXPECT_EQ(static_cast<char*>(v.data_ptr()) - static_cast<char*>(x.data_ptr()), 9 * 8);
  EXPECT_EQ(*static_cast<const double*>(v.data_ptr()), 9.0);
  const Tensor h = full({3}, 1.5, DType::BFloat16).narrow(0, 2, 1);  // 2-byte elements
  EXPECT_EQ(static_cast<char*>(h.data_ptr()) - static_cast<char*>(h.storage()->data()), 2 * 2);
}

TEST(Tensor, ViewAndReshape) {
  Tensor a = arange(12, DType::Float32).view({3, 4});
  EXPECT_EQ(a.view({2, -1}).shape(), (Shape{2, 6}));
  EXPECT_EQ(a.view({4, 3}).storage(), a.storage());
  // A transposed tensor cannot be flattened without a copy: view refuses, reshape copies.
  Tensor t = a.transpose(0, 1);
  EXPECT_THROW(t.view({12}), ShapeError);
  Tensor r = t.reshape({12});
  EXPECT_NE(r.storage(), a.storage());
  expect_values(r, {12}, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  // Splitting one dim of a non-contiguous tensor is still a view.
  Tensor v = a.transpose(0, 1).view({2, 2, 3});
  EXPECT_EQ(v.storage(), a.storage());
  EXPECT_EQ(v.at({1, 0, 2}), a.at({2, 2}));
}

TEST(Tensor, ViewErrorsNameShapes) {
  try {
    arange(12).view({5, -1});
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("view: shape (5, -1) is invalid for input of size 12"));
  }
  EXPECT_THROW(arange(6).view({-1, -1}), ShapeError);
  EXPECT_THROW(zeros({2, 3}).transpose(0, 2), IndexError);
  EXPECT_THROW(zeros({2, 3}).narrow(1, 2, 2), IndexError);
  EXPECT_THROW(zeros({2, 3}).expand({2, 4}), ShapeError);
  EXPECT_EQ(zeros({1, 3}).expand({4, -1}).shape(), (Shape{4, 3}));  // -1 keeps a size
  EXPECT_THROW(zeros({3}).expand({-1, 3}), ShapeError);             // ...but a new dim has none to keep
  EXPECT_THROW(zeros({1, 3}).expand({-5, 3}), ShapeError);
  try {
    zeros({2}).unsqueeze(3);
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("unsqueeze: position 3 is out of range for a tensor with 1 dims (expected -2 to 1)"));
  }
  EXPECT_THROW(zeros({2}).permute({0, 0}), ShapeError);
}

TEST(Tensor, CopyBroadcastsAndConverts) {
  Tensor dst = zeros({2, 3});
  dst.copy_(tensor({1, 2, 3}, {3}));
  expect_values(dst, {2, 3}, {1, 2, 3, 1, 2, 3});
  Tensor d = dst.to(DType::Float64);
  EXPECT_EQ(d.dtype(), DType::Float64);
  expect_values(tensor({1.7f, -2.2f}, {2}).to(DType::Int64), {2}, {1, -2});
  EXPECT_THROW(dst.copy_(zeros({2, 3}, DType::Float64)), DTypeError);
  EXPECT_THROW(dst.copy_(zeros({4})), ShapeError);
}

TEST(Tensor, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes({4, 1, 3}, {2, 1}, "t"), (Shape{4, 2, 3}));
  EXPECT_EQ(broadcast_shapes({}, {2, 2}, "t"), (Shape{2, 2}));
  try {
    broadcast_shapes({2, 3}, {4, 3}, "add");
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("add: shapes (2, 3) and (4, 3) cannot be broadcast"));
  }
}

TEST(Tensor, GeneratorIsDeterministic) {
  Generator a(42), b(42), c(43);
  Tensor x = randn({100}, a), y = randn({100}, b), z = randn({100}, c);
  EXPECT_EQ(x.to_vector<float>(), y.to_vector<float>());
  EXPECT_NE(x.to_vector<float>(), z.to_vector<float>());
  // Reseeding restarts the sequence.
  a.manual_seed(42);
  EXPECT_EQ(randn({100}, a).to_vector<float>(), x.to_vector<float>());
}

TEST(Tensor, RandomDistributionsHaveTheRightMoments) {
  Generator g(7);
  Tensor n = randn({200000}, g, DType::Float64);
  EXPECT_NEAR(mean(n).item(), 0.0, 0.01);
  EXPECT_NEAR(mean(n * n).item(), 1.0, 0.01);
  Tensor u = uniform({200000}, 2, 4, g, DType::Float64);
  EXPECT_NEAR(mean(u).item(), 3.0, 0.01);
  EXPECT_GE(max(u).item(), 3.99);
  EXPECT_LT(max(u).item(), 4.0);
  Tensor b = bernoulli({200000}, 0.3, g);
  EXPECT_NEAR(mean(b).item(), 0.3, 0.005);
  Tensor r = randint(3, 6, {1000}, g);
  EXPECT_EQ(max(r).item(), 5);
  EXPECT_EQ(-max(-r.to(DType::Float32)).item(), 3);
  EXPECT_THROW(bernoulli({2}, 1.5, g), ValueError);
}

TEST(Tensor, PrintsLikePyTorch) {
  // Each expected string is PyTorch 1.13's repr() of the same tensor (torch.float64 written float64).
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(tensor({1, 2, 3, 4}, {2, 2}).str(), "tensor([[1., 2.],\n        [3., 4.]])");
  // small values were printed as 0.0000; a wide range goes to scientific notation
  EXPECT_EQ(tensor({5e-5, 1.0, 2.5}, {3}).str(), "tensor([5.0000e-05, 1.0000e+00, 2.5000e+00])");
  EXPECT_EQ(tensor({1e9, 1.0}, {2}).str(), "tensor([1.0000e+09, 1.0000e+00])");
  EXPECT_EQ(tensor({1e-5, 2e-5}, {2}).str(), "tensor([1.0000e-05, 2.0000e-05])");
  EXPECT_EQ(tensor({1.5, -2.25, 100.0}, {3}).str(), "tensor([  1.5000,  -2.2500, 100.0000])");  // aligned
  EXPECT_EQ(tensor({1, 2, -30}, {3}).str(), "tensor([  1.,   2., -30.])");
  EXPECT_EQ(tensor({-1.5, 2.0, 3.25, -40.0}, {2, 2}).str(),
            "tensor([[ -1.5000,   2.0000],\n        [  3.2500, -40.0000]])");
  EXPECT_EQ(tensor({nan, 1.5, inf, -inf}, {4}).str(), "tensor([   nan, 1.5000,    inf,   -inf])");  // not -nan
  EXPECT_EQ(tensor({nan, 1, inf}, {3}).str(), "tensor([nan, 1., inf])");
  EXPECT_EQ(zeros({3}).str(), "tensor([0., 0., 0.])");
  EXPECT_EQ(arange(10, DType::Int64).str(), "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])");  // not cut short
  EXPECT_EQ(arange(1001, DType::Int64).str(), "tensor([   0,    1,    2,  ...,  998,  999, 1000])");
  EXPECT_EQ(zeros({0, 3}).str(), "tensor([], size=(0, 3))");  // the shape of an empty tensor
  EXPECT_EQ(zeros({0}, DType::Int64).str(), "tensor([], dtype=int64)");
  EXPECT_EQ(tensor({1.5, 2.0}, {2}).to(DType::Float64).str(), "tensor([1.5000, 2.0000], dtype=float64)");
  EXPECT_EQ(full({}, 1.5).str(), "tensor(1.5000)");
  EXPECT_EQ(full({}, 7, DType::Int64).str(), "tensor(7)");
  EXPECT_EQ(tensor({1, 0}, {2}).to(DType::Bool).str(), "tensor([ True, False])");
  EXPECT_EQ(arange(8, DType::Float32).reshape({2, 2, 2}).str(),
            "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])");
  // rows wrap at 80 columns
  EXPECT_EQ(div(arange(30, DType::Float32), full({30}, 7.0)).str(),
            "tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n"
            "        1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286,\n"
            "        2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857, 3.4286, 3.5714, 3.7143,\n"
            "        3.8571, 4.0000, 4.1429])");
  // past 1000 elements: 3 at each end of every dim, the format chosen from those alone
  EXPECT_EQ(arange(2000, DType::Float32).reshape({40, 50}).str(),
            "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,\n"
            "         4.9000e+01],\n"
            "        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,\n"
            "         9.9000e+01],\n"
            "        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,\n"
            "         1.4900e+02],\n"
            "        ...,\n"
            "        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,\n"
            "         1.8990e+03],\n"
            "        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,\n"
            "         1.9490e+03],\n"
            "        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
            "         1.9990e+03]])");
  // views print their own elements: transposed, expanded (stride 0), offset
  EXPECT_EQ(tensor({1, 2, 3, 4}, {2, 2}).transpose(0, 1).str(), "tensor([[1., 3.],\n        [2., 4.]])");
  EXPECT_EQ(tensor({1, 2}, {2}).expand({2, 2}).str(), "tensor([[1., 2.],\n        [1., 2.]])");
  EXPECT_EQ(tensor({1, 2, 3, 4}, {4}).narrow(0, 2, 2).str(), "tensor([3., 4.])");
}

TEST(Tensor, VariablesPrintHowTheyTakePartInAutograd) {
  // PyTorch: tensor([1., 2.], requires_grad=True) and tensor([2., 4.], grad_fn=<MulBackward0>)
  Variable x(tensor({1, 2}, {2}), true);
  std::ostringstream leaf, made, plain;
  leaf << x;
  made << x * 2.0;
  plain << Variable(tensor({1, 2}, {2}));
  EXPECT_EQ(leaf.str(), "tensor([1., 2.], requires_grad=True)");
  EXPECT_EQ(made.str(), "tensor([2., 4.], grad_fn=<mul>)");
  EXPECT_EQ(plain.str(), "tensor([1., 2.])");
}

TEST(Tensor, ItemAndDataChecks) {
  EXPECT_THROW(zeros({2}).item(), ValueError);
  EXPECT_THROW(zeros({2}).data<double>(), DTypeError);
  EXPECT_THROW(Tensor().clone(), StateError);
  EXPECT_THROW(empty({-1}), ValueError);
  // a count that would overflow 64 bits is refused, not wrapped round to a tiny allocation
  try {
    zeros({int64_t{1} << 40, int64_t{1} << 40});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("has too many elements to allocate"));
  }
  EXPECT_THROW(arange(0.0, 1e30, 1.0), ValueError);
  EXPECT_THROW(arange(0.0, INFINITY, 1.0), ValueError);
}

TEST(Tensor, OverlappingCopiesGiveTheRightValues) {
  // A copy between two views of one storage reads every value before writing any: shifting a
  // row by one once spread its first value everywhere, and u.copy_(u^T) once gave [0, 2, 2, 3].
  Tensor t = arange(6, DType::Float32);
  t.narrow(0, 1, 5).copy_(t.narrow(0, 0, 5));
  expect_values(t, {6}, {0, 0, 1, 2, 3, 4});
  Tensor u = arange(4, DType::Float32).view({2, 2});
  u.copy_(u.transpose(0, 1));
  expect_values(u, {2, 2}, {0, 2, 1, 3});
  Tensor a = arange(6, DType::Float32);
  Tensor a1 = a.narrow(0, 1, 5);
  add_(a1, a.narrow(0, 0, 5));  // once a running sum
  expect_values(a, {6}, {0, 1, 3, 5, 7, 9});
  // writing through an expanded view would write one place several times: refused
  Tensor e = zeros({1, 3}).expand({2, 3});
  EXPECT_THROW(e.copy_(ones({2, 3})), ValueError);
  EXPECT_THROW(add_(e, ones({2, 3})), ValueError);
  EXPECT_FALSE(has_internal_overlap(zeros({2, 3}).transpose(0, 1)));
  EXPECT_TRUE(may_overlap(u, u.transpose(0, 1)));
  EXPECT_FALSE(may_overlap(t.narrow(0, 0, 3), t.narrow(0, 3, 3)));
}

TEST(Tensor, ViewsMustStayInsideTheirStorage) {
  Tensor t = zeros({4});
  EXPECT_THROW(Tensor(t.storage(), DType::Float32, {100}, {1}, 0), IndexError);
  EXPECT_THROW(Tensor(t.storage(), DType::Float32, {2}, {-1}, 0), IndexError);
  EXPECT_THROW(Tensor(t.storage(), DType::Float64, {3}, {1}, 0), IndexError);  // 16 bytes hold two float64s
  EXPECT_NO_THROW(Tensor(t.storage(), DType::Float32, {2, 2}, {1, 2}, 0));
  // views near int64's end are refused with a clear error, not wrapped round
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_THROW(t.narrow(0, 2, big), IndexError);
  EXPECT_EQ(t.slice(0, 1, big, big).shape(), (Shape{1}));
  EXPECT_THROW(t.reshape({big, 2, -1}), ShapeError);
  EXPECT_THROW(t.expand({big, big, 4}), ValueError);
  EXPECT_THROW(zeros({big / 2}), ValueError);  // 4 bytes each: more than 2^62 bytes
}

TEST(Tensor, ZeroDimTensorsHaveNoDimToIndex) {
  const Tensor s = scalar_tensor(3);
  EXPECT_THROW(s.size(0), IndexError);
  EXPECT_THROW(s.narrow(0, 0, 1), IndexError);
  EXPECT_THROW(s.slice(0, 0, 1), IndexError);
  EXPECT_THROW(index_select(s, 0, from_vector<int64_t>({0}, {1})), IndexError);
  EXPECT_THROW(gather(s, 0, from_vector<int64_t>({0}, {})), IndexError);
  EXPECT_THROW(concat({s, s}, 0), ShapeError);
  EXPECT_THROW(split(s, 1, 0), IndexError);
  // as in PyTorch, a scalar's dim 0 (or -1) is accepted where it leaves the scalar as it is
  EXPECT_EQ(s.squeeze(0).dim(), 0);
  EXPECT_EQ(s.transpose(0, -1).dim(), 0);
  EXPECT_EQ(s.flatten().shape(), (Shape{1}));
  EXPECT_EQ(sum(Variable(s, false), {0}).item(), 3);
  EXPECT_THROW(softmax(s, 1), IndexError);
  EXPECT_THROW(concat({Tensor(), s}, 0), StateError);
}

TEST(Tensor, RandintCoversTheWholeInt64Range) {
  Generator g(1);
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> v = randint(lo, hi, {1000}, g).to_vector<int64_t>();
  int negative = 0;
  for (int64_t x : v) negative += x < 0;
  EXPECT_NEAR(negative, 500, 60);  // both halves of the range are drawn
  // small ranges are exact and unbiased enough to see: each of 0..2 about a third of the time
  const std::vector<int64_t> w = randint(0, 3, {3000}, g).to_vector<int64_t>();
  int counts[3] = {0, 0, 0};
  for (int64_t x : w) ++counts[x];
  for (int c : counts) EXPECT_NEAR(c, 1000, 90);
  EXPECT_THROW(uniform({2}, 0, INFINITY, g), ValueError);
}

TEST(Tensor, PrintsInt64Exactly) {
  // printing went through double, which holds 53 bits: INT64_MAX came out as INT64_MIN
  EXPECT_EQ(from_vector<int64_t>({std::numeric_limits<int64_t>::max(), (int64_t{1} << 53) + 1}, {2}).str(),
            "tensor([9223372036854775807,    9007199254740993])");  // aligned, as PyTorch
}

TEST(Tensor, ScratchBuffersAreAlignedAndReused) {
  const void *first = nullptr, *second = nullptr;
  {
    Scratch<float> a(1000), none(0);
    EXPECT_EQ(none.get(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.get()) % 64, 0u);
    a.get()[999] = 1.f;  // all of it is ours (ASan checks)
    first = a.get();
    Scratch<float> b(1000);  // held at the same time: a different buffer
    EXPECT_NE(b.get(), a.get());
    second = b.get();
  }
  Scratch<double> again(400);  // 3200 bytes: one of the two 4000-byte buffers given back above
  if (detail::scratch_reuses_buffers()) EXPECT_TRUE(again.get() == first || again.get() == second);
  EXPECT_THROW(static_cast<void>(Scratch<double>(-1)), ValueError);
  // (cast to void: clang reads a bare statement Scratch<double>(...) as a declaration)
  EXPECT_THROW(static_cast<void>(Scratch<double>(std::numeric_limits<int64_t>::max())),
               ValueError);       // bytes would overflow
  Scratch<float> bigger(100000);  // more than any cached buffer: a new one
  EXPECT_NE(bigger.get(), first);
  EXPECT_NE(bigger.get(), second);
}

// ---- method forms, item<T>, scalars on the left ----

TEST(TensorMethods, EachIsItsFreeFunction) {
  Generator g(3);
  const Tensor x = randn({3, 4}, g, DType::Float64), p = uniform({3, 4}, 1.5, 3, g, DType::Float64);
  auto same = [](const Tensor& a, const Tensor& b) { EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()); };
  same(x.sum({1}, true), sum(x, {1}, true));
  same(x.mean(), mean(x));
  same(x.max(1).first, max(x, 1).first);
  same(x.max(1).second, max(x, 1).second);
  same(x.min(), min(x));
  same(x.argmax(1), argmax(x, 1));
  same(x.argmin(), argmin(x));
  same(x.var({0}), var(x, {0}));
  same(x.std({1}, 0), mg::std(x, {1}, 0));
  same(x.prod(1), prod(x, 1));
  same(x.cumsum(0), cumsum(x, 0));
  same(x.logsumexp({1}), logsumexp(x, {1}));
  same(x.topk(2).first, topk(x, 2).first);
  same(x.sort(1, true).second, sort(x, 1, true).second);
  same(x.argsort(0), argsort(x, 0));
  same(x.matmul(p.transpose(0, 1)), matmul(x, p.transpose(0, 1)));
  same(p.pow(1.5).log().sqrt(), sqrt(log(pow(p, 1.5))));
  same(x.exp().abs().neg(), neg(abs(exp(x))));
  same(x.tanh() + x.sigmoid() + x.relu() + x.sin() + x.cos(), tanh(x) + sigmoid(x) + relu(x) + sin(x) + cos(x));
  same(p.log1p().expm1(), expm1(log1p(p)));
  same(x.clamp(-0.5, 0.5), clamp(x, -0.5, 0.5));
  same(x.softmax(1), softmax(x, 1));
  same(x.log_softmax(0), log_softmax(x, 0));
  same(x.masked_fill(x.gt(p), 7), masked_fill(x, gt(x, p), 7));
  same(x.sign(), sign(x));
  EXPECT_EQ(x.chunk(2, 1).size(), 2u);
  EXPECT_EQ(x.split(1, 0).size(), 3u);
  same(x.eq(x).to(DType::Float64), ones({3, 4}, DType::Float64));
  same(x.ne(x).to(DType::Float64) + x.lt(x).to(DType::Float64) + x.ge(p).to(DType::Float64),
       ge(x, p).to(DType::Float64));
  same(x.le(x).to(DType::Float64), ones({3, 4}, DType::Float64));
  // the indexing family
  const Tensor idx = from_vector<int64_t>({2, 0, 1, 1}, {1, 4}), rows = from_vector<int64_t>({2, 0}, {2});
  same(x.gather(0, idx), gather(x, 0, idx));
  same(x.index_select(0, rows), index_select(x, 0, rows));
  same(x.scatter(0, idx, p), scatter(x, 0, idx, p));
  same(x.scatter(0, idx, 2.5), scatter(x, 0, idx, 2.5));
  same(x.scatter_add(0, idx, p), scatter_add(x, 0, idx, p));
  same(x.scatter_reduce(0, idx, p, "amax", false), scatter_reduce(x, 0, idx, p, "amax", false));
  same(x.index_put({rows}, p.narrow(0, 0, 2), true), index_put(x, {rows}, p.narrow(0, 0, 2), true));
  same(x.masked_select(x.gt(p)), masked_select(x, gt(x, p)));
  same(x.repeat({2, 1}).flip({0, 1}), flip(repeat(x, {2, 1}), {0, 1}));
  same(x.diagonal(1), x.narrow(1, 1, 3).diagonal());
}

TEST(TensorMethods, ItemReadsTheElementInItsOwnDtype) {
  const int64_t big = (int64_t{1} << 60) + 1;  // not a double: item() would round it
  EXPECT_EQ(full({}, 0, DType::Int64).fill_(0).item<int64_t>(), 0);
  Tensor b = empty({1}, DType::Int64);
  b.data<int64_t>()[0] = big;
  EXPECT_EQ(b.item<int64_t>(), big);
  EXPECT_NE(static_cast<int64_t>(b.item()), big);
  EXPECT_EQ(scalar_tensor(-3.75).item<int64_t>(), -3);  // truncated toward zero, as static_cast
  EXPECT_EQ(scalar_tensor(2.5).item<float>(), 2.5f);
  EXPECT_EQ(scalar_tensor(2.5, DType::Float64).item<double>(), 2.5);
  EXPECT_TRUE(scalar_tensor(1, DType::Bool).item<bool>());
  EXPECT_EQ(scalar_tensor(1, DType::Bool).item<int32_t>(), 1);
  EXPECT_EQ(Variable(scalar_tensor(7, DType::Int64)).item<int64_t>(), 7);
  EXPECT_THROW(scalar_tensor(NAN).item<int64_t>(), ValueError);
  EXPECT_THROW(scalar_tensor(1e19, DType::Float64).item<int64_t>(), ValueError);
  EXPECT_THROW(scalar_tensor(3e9, DType::Int64).item<int32_t>(), ValueError);
  EXPECT_THROW(ones({2}).item<float>(), ValueError);
  EXPECT_THROW(Tensor().item<float>(), StateError);
}

TEST(TensorMethods, ScalarsOnTheLeft) {
  const Tensor t = from_vector<double>({1, 2, 4}, {3});
  EXPECT_EQ((1.0 - t).to_vector<double>(), std::vector<double>({0, -1, -3}));
  EXPECT_EQ((2.0 / t).to_vector<double>(), std::vector<double>({2, 1, 0.5}));
  EXPECT_EQ((1 + t).to_vector<double>(), std::vector<double>({2, 3, 5}));
  EXPECT_EQ((3 * t).to_vector<double>(), std::vector<double>({3, 6, 12}));
  EXPECT_EQ((1 - ones({2}, DType::Float32)).dtype(), DType::Float32);  // the tensor's dtype, not double's
}
