// Differentiable shape ops: reshape, transpose, permute, slice, expand, concat, split.
#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using V = std::vector<Variable>;

TEST(Shape, SliceGradientLandsInPlace) {
  Variable x(arange(6, DType::Float32), true);
  Variable s = slice(x, 0, 1, 6, 2);  // elements 1, 3, 5
  expect_values(s.data(), {3}, {1, 3, 5});
  sum(s * Variable(tensor({1, 2, 3}, {3}))).backward();
  expect_values(x.grad(), {6}, {0, 1, 0, 2, 0, 3});
}

TEST(Shape, SplitPiecesFlowBackIndependently) {
  Variable x(arange(5, DType::Float32), true);
  auto parts = split(x, 2, 0);
  ASSERT_EQ(parts.size(), 3u);
  (sum(parts[0]) + sum(parts[2] * 3.0)).backward();  // parts[1] unused: its gradient is 0
  expect_values(x.grad(), {5}, {1, 1, 0, 0, 3});
}

TEST(Shape, Gradcheck) {
  Tensor x = rnd({2, 3, 4}, 1);
  expect_gradcheck([](const V& v) { return reshape(v[0], {4, -1}) * 2.0; }, {x});
  expect_gradcheck([](const V& v) { return reshape(v[0], {6, 4}); }, {x.transpose(0, 1)});
  expect_gradcheck([](const V& v) { return transpose(v[0], 0, 2) * 1.0; }, {x});
  expect_gradcheck([](const V& v) { return permute(v[0], {2, 0, 1}) * 1.0; }, {x});
  expect_gradcheck([](const V& v) { return slice(v[0], 2, 1, 4, 2) * 1.0; }, {x});
  expect_gradcheck([](const V& v) { return narrow(v[0], 1, 1, 2) * 1.0; }, {x});
  expect_gradcheck([](const V& v) { return expand(v[0], {3, 4, 2}) * 1.0; }, {rnd({4, 1}, 2)});
  expect_gradcheck([](const V& v) { return unsqueeze(squeeze(v[0], 1), 0) * 1.0; }, {rnd({3, 1, 2}, 3)});
  expect_gradcheck([](const V& v) { return squeeze(v[0]) * 1.0; }, {rnd({1, 3, 1, 2}, 3)});
  expect_gradcheck([](const V& v) { return view(v[0], {6, 4}) * 1.0; }, {x});
  expect_gradcheck([](const V& v) { return flatten(v[0], 1) * 1.0; }, {x});
  expect_gradcheck([](const V& v) { return flatten(v[0]) * 1.0; }, {x.transpose(0, 2)});
  expect_gradcheck([](const V& v) { return concat({v[0], v[1], v[0]}, 1); }, {rnd({2, 3}, 4), rnd({2, 1}, 5)});
  expect_gradcheck(
      [](const V& v) {
        auto p = split(v[0], std::vector<int64_t>{1, 3}, 1);
        return p[0] * p[1];  // (2,1) * (2,3): broadcast between two pieces of the same input
      },
      {rnd({2, 4}, 6)});
  expect_gradcheck(
      [](const V& v) {
        return stack({v[0], v[1], v[0]}, 1);
      },
      {rnd({2, 3}, 7), rnd({2, 3}, 8).transpose(0, 1).transpose(0, 1)});
  expect_gradcheck([](const V& v) { return unflatten(v[0], 1, {2, -1}) * 1.0; }, {rnd({3, 6}, 9)});
  expect_gradcheck(
      [](const V& v) {
        auto p = chunk(v[0], 3, 1);  // sizes 2, 2, 1
        return concat({p[2] * p[0], p[1]}, 1);
      },
      {rnd({2, 5}, 10)});
}

TEST(Shape, GoldenPyTorch) {
  expect_golden("reshape", [](const V& v) { return reshape(v[0], {4, 6}); });
  expect_golden("transpose", [](const V& v) { return transpose(v[0], 0, 2); });
  expect_golden("permute", [](const V& v) { return permute(v[0], {2, 0, 1}); });
  expect_golden("slice_step2", [](const V& v) { return slice(v[0], 1, 1, 6, 2); });
  expect_golden("concat_dim1", [](const V& v) { return concat({v[0], v[1]}, 1); });
  expect_golden("split_weighted", [](const V& v) {
    std::vector<Variable> p = split(v[0], 2, 0);
    for (size_t i = 0; i < p.size(); ++i) p[i] = p[i] * static_cast<double>(i + 1);
    return concat(p, 0);
  });
  expect_golden("expand", [](const V& v) { return expand(v[0], {3, 4, 2}); });
  expect_golden("view", [](const V& v) { return view(v[0], {6, 4}); });
  expect_golden("flatten_1_2", [](const V& v) { return flatten(v[0], 1, 2); });
  expect_golden("narrow", [](const V& v) { return narrow(v[0], 1, 1, 3); });
  expect_golden("squeeze_dim", [](const V& v) { return squeeze(v[0], 1); });
  expect_golden("squeeze_all", [](const V& v) { return squeeze(v[0]); });
  expect_golden("unsqueeze", [](const V& v) { return unsqueeze(v[0], 1); });
  expect_golden("stack_dim1", [](const V& v) { return stack({v[0], v[1] * 2.0}, 1); });
  expect_golden("unflatten", [](const V& v) { return unflatten(v[0], 1, {2, 3}); });
  expect_golden("chunk3", [](const V& v) {
    std::vector<Variable> c = chunk(v[0], 3, 1);
    for (size_t i = 0; i < c.size(); ++i) c[i] = c[i] * static_cast<double>(i + 1);
    return concat(c, 1);
  });
}

TEST(Shape, StackChunkUnflatten) {
  // chunk(7, 3) is sizes 3, 3, 1, as torch.chunk; chunk(2, 3) only two pieces of 1
  const Tensor x = arange(7, DType::Float32);
  std::vector<int64_t> sizes;
  for (const Tensor& c : chunk(x, 3)) sizes.push_back(c.numel());
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(chunk(arange(2), 3).size(), 2u);
  EXPECT_EQ(zeros({2, 12}).unflatten(1, {3, -1}).shape(), (Shape{2, 3, 4}));
  Variable a(tensor({1, 2}, {2}), true), b(tensor({3, 4}, {2}), true);
  Variable s = stack({a, b}, 1);  // (2, 2): rows (1, 3) and (2, 4)
  expect_values(s.data(), {2, 2}, {1, 3, 2, 4});
  s.backward(tensor({1, 2, 3, 4}, {2, 2}));
  expect_values(a.grad(), {2}, {1, 3});
  expect_values(b.grad(), {2}, {2, 4});
  expect_gradcheck([](const V& v) { return stack({v[0], v[1]}, 0) * 1.0; }, {rnd({2, 3}, 1), rnd({2, 3}, 2)});
  expect_gradcheck([](const V& v) { return unflatten(v[0], 0, {2, 3}) * 1.0; }, {rnd({6, 2}, 3)});
  expect_gradcheck(
      [](const V& v) {
        auto c = v[0].chunk(2, 1);
        return c[0] * c[1];
      },
      {rnd({3, 4}, 4)});
  EXPECT_THROW(zeros({2, 12}).unflatten(1, {5, -1}), ShapeError);
  EXPECT_THROW(chunk(x, 0), ValueError);
  EXPECT_THROW(stack({a, Variable(zeros({3}))}), ShapeError);
}

TEST(Shape, MethodFormsRecordTheSameOps) {
  // x.transpose(-2, -1) is transpose(x, -2, -1), and so on: same values, same gradients.
  Variable a(rnd({2, 3, 4}, 7), true), b(rnd({2, 3, 4}, 7), true);
  Variable ya = a.transpose(-2, -1).reshape({2, 12}).view({24}).pow(2).sum();
  Variable yb = sum(pow(view(reshape(transpose(b, -2, -1), {2, 12}), {24}), 2));
  EXPECT_EQ(ya.item(), yb.item());
  EXPECT_EQ(ya.grad_fn()->name, "sum");
  ya.backward();
  yb.backward();
  mgtest::expect_close(a.grad(), b.grad(), 0, 0);
  Variable c(rnd({1, 3, 1}, 8), true);
  EXPECT_EQ(c.squeeze().shape(), (Shape{3}));
  EXPECT_EQ(c.squeeze(0).unsqueeze(-1).shape(), (Shape{3, 1, 1}));
  EXPECT_EQ(c.flatten().shape(), (Shape{3}));
  EXPECT_EQ(c.mean({1}, true).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(c.permute({2, 0, 1}).narrow(2, 1, 2).expand({4, 1, 2}).shape(), (Shape{4, 1, 2}));
  mgtest::expect_close(c.abs().neg().exp().log().data(), neg(abs(c)).data(), 1e-15, 0);
  EXPECT_EQ(c.max().item(), max(c).item());
  EXPECT_EQ(c.softmax(1).shape(), c.log_softmax(1).shape());
  // the indexing family records the functions' nodes
  Variable d(rnd({3, 4}, 9), true);
  const Tensor idx = from_vector<int64_t>({2, 0, 1, 1}, {1, 4});
  EXPECT_EQ(d.gather(0, idx).grad_fn()->name, "gather");
  EXPECT_EQ(d.index_select(0, from_vector<int64_t>({1}, {1})).grad_fn()->name, "index_select");
  EXPECT_EQ(d.scatter(0, idx, d.narrow(0, 0, 1)).grad_fn()->name, "scatter");
  EXPECT_EQ(d.scatter(0, idx, 1.0).grad_fn()->name, "scatter");
  EXPECT_EQ(d.scatter_add(0, idx, d).grad_fn()->name, "scatter_add");
  EXPECT_EQ(d.scatter_reduce(0, idx, d, "prod").grad_fn()->name, "scatter_reduce");
  EXPECT_EQ(d.index_put({from_vector<int64_t>({1}, {1})}, d.narrow(0, 0, 1)).grad_fn()->name, "index_put");
  EXPECT_EQ(d.masked_select(gt(d.data(), zeros({}, DType::Float64))).dim(), 1);
  EXPECT_EQ(d.repeat({1, 2}).flip({1}).shape(), (Shape{3, 8}));
  EXPECT_EQ(d.diagonal().grad_fn()->name, "diagonal");
}

TEST(Shape, Errors) {
  Variable x(zeros({2, 3}), true);
  try {
    view(transpose(x, 0, 1), {6});  // a transposed matrix cannot be flattened without a copy
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("view: cannot view shape (3, 2)"));
  }
  EXPECT_THROW(flatten(x, 1, 0), IndexError);
  EXPECT_THROW(reshape(x, {4}), ShapeError);
  EXPECT_THROW(transpose(x, 0, 2), IndexError);
  EXPECT_THROW(narrow(x, 1, 2, 5), IndexError);
  EXPECT_THROW(concat({x, Variable(zeros({3, 3}))}, 1), ShapeError);
  EXPECT_THROW(split(x, std::vector<int64_t>{1, 1}, 1), ShapeError);
}
