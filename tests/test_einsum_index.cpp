// einsum, diagonal, and the scatters and advanced indexing of the toolbox round: scatter,
// scatter_reduce, index_get (x[i, j]), index_put. Golden values from PyTorch 2.x
// (tests/golden/gen_golden_modern.py), hand-computed results, gradchecks, and bad inputs, each a
// typed error naming the op.
#include "bad_inputs.h"

using namespace mg;
using namespace mgtest;

namespace {
using V = std::vector<Variable>;
Tensor i64(std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); }
Tensor f64(std::vector<double> v, Shape s) { return from_vector<double>(v, s); }
}  // namespace

TEST(Einsum, GoldenPyTorch) {
  auto E = [](std::string eq) { return [eq](const V& v) { return einsum(eq, v); }; };
  expect_golden("einsum_matmul", E("ij,jk->ik"));
  expect_golden("einsum_bmm", E("bij,bjk->bik"));
  expect_golden("einsum_attention_scores", E("bhqd,bhkd->bhqk"));
  expect_golden("einsum_diagonal", E("ii->i"));
  expect_golden("einsum_trace", E("ii"));
  expect_golden("einsum_repeated_with_others", E("iji->j"));
  expect_golden("einsum_triple_diagonal", E("iii->i"));
  expect_golden("einsum_outer", E("i,j->ij"));
  expect_golden("einsum_ellipsis_broadcast", E("...ij,...jk"));
  expect_golden("einsum_ellipsis_summed", E("...ij->j"));
  expect_golden("einsum_ellipsis_middle", E("i...j->j...i"));
  expect_golden("einsum_dot_all", E("ij,ij->"));
  expect_golden("einsum_chain", E("ij,jk,kl->il"));
  expect_golden("einsum_three_way", E("i,i,i->i"));
  expect_golden("einsum_uppercase_implicit", E("bA,Ab"));
  expect_golden("einsum_size_one_broadcast", E("ij,jk->ik"));
  expect_golden("einsum_scalar_operand", E("i,->i"));
  expect_golden("einsum_own_sums", E("ab,cd->"));
  expect_golden("einsum_permuted_contraction", E("ijk,jil->kl"));
  expect_golden("einsum_later_operand_needs", E("ia,jb,ab->ij"));
  expect_golden("einsum_spaces", E(" i j , j k -> k i "));
  expect_golden("diagonal_offset", [](const V& v) { return diagonal(v[0], 1, 0, 2); });
  expect_golden("diagonal_negative_offset", [](const V& v) { return diagonal(v[0], -1, 2, 1); });
}

TEST(Einsum, HandComputed) {
  const Tensor m = f64({1, 2, 3, 4}, {2, 2});
  expect_values(einsum("ii", {m}), {}, {5});                   // trace
  expect_values(einsum("ii->i", {m}), {2}, {1, 4});            // diagonal
  expect_values(einsum("ij->ji", {m}), {2, 2}, {1, 3, 2, 4});  // transpose
  expect_values(einsum("ij->", {m}), {}, {10});
  expect_values(einsum("i,j->ij", {f64({1, 2}, {2}), f64({3, 4, 5}, {3})}), {2, 3}, {3, 4, 5, 6, 8, 10});
  expect_values(einsum("ij,jk", {m, m}), {2, 2}, {7, 10, 15, 22});
  // "ij,jk->ik" with j of size 1 on the left broadcasts: a[i, 0] times the column sums of b
  expect_values(einsum("ij,jk->ik", {f64({2, 3}, {2, 1}), m}), {2, 2}, {8, 12, 12, 18});
  // the diagonal view: offset above and below, and its strides
  const Tensor x = arange(12, DType::Float64).reshape({3, 4});
  expect_values(x.diagonal(), {3}, {0, 5, 10});
  expect_values(x.diagonal(1), {3}, {1, 6, 11});
  expect_values(x.diagonal(-1), {2}, {4, 9});
  expect_values(x.diagonal(-3), {0}, {});
  EXPECT_EQ(x.diagonal().strides(), Strides({5}));
}

TEST(Einsum, TensorAndVariableComputeTheSameBits) {
  const Tensor a = rnd({2, 3, 4}, 1), b = rnd({4, 3, 5}, 2), c = rnd({5, 2}, 3);
  const std::string eq = "ijk,kjl,lm->im";
  const Tensor t = einsum(eq, {a, b, c});
  const Variable v = einsum(eq, {Variable(a), Variable(b), Variable(c)});
  EXPECT_EQ(t.to_vector<double>(), v.data().to_vector<double>());
  // and the same as the products written out
  expect_close(t, matmul(matmul(a.permute({0, 2, 1}).reshape({2, 12}), b.reshape({12, 5})), c), 1e-12, 1e-12);
}

TEST(Einsum, Gradients) {
  for (const std::string eq : {"ij,jk->ik", "ii->i", "iji->j", "...ij,...jk", "i,j->ij", "ij,jk,kl->il", "ab,cd->",
                               "ia,jb,ab->ij", "i...j->j...i"}) {
    SCOPED_TRACE(eq);
    std::vector<Tensor> in;
    if (eq == "ii->i")
      in = {rnd({3, 3}, 1)};
    else if (eq == "iji->j")
      in = {rnd({3, 2, 3}, 1)};
    else if (eq == "...ij,...jk")
      in = {rnd({2, 1, 3, 2}, 1), rnd({3, 2, 2}, 2)};
    else if (eq == "i,j->ij")
      in = {rnd({3}, 1), rnd({2}, 2)};
    else if (eq == "ij,jk,kl->il")
      in = {rnd({2, 3}, 1), rnd({3, 2}, 2), rnd({2, 2}, 3)};
    else if (eq == "ab,cd->")
      in = {rnd({2, 3}, 1), rnd({2, 2}, 2)};
    else if (eq == "ia,jb,ab->ij")
      in = {rnd({2, 3}, 1), rnd({2, 2}, 2), rnd({3, 2}, 3)};
    else if (eq == "i...j->j...i")
      in = {rnd({2, 3, 2}, 1)};
    else
      in = {rnd({2, 3}, 1), rnd({3, 2}, 2)};
    expect_gradcheck([eq](const V& v) { return einsum(eq, v); }, in);
  }
}

TEST(Einsum, BadEquationsAreTypedErrorsNamingEinsum) {
  const Tensor a = ones({2, 3}, DType::Float64), sq = ones({3, 3}, DType::Float64);
  BAD(ValueError, "einsum", einsum("ij,jk", {a}));            // two terms, one operand
  BAD(ValueError, "einsum", einsum("ij", {a, a}));            // one term, two operands
  BAD(ValueError, "einsum", einsum("i.j", {a}));              // a lone '.'
  BAD(ValueError, "einsum", einsum("...i...", {a}));          // two ellipses
  BAD(ValueError, "einsum", einsum("i$", {a}));               // not a letter
  BAD(ValueError, "einsum", einsum("ij->ii", {a}));           // an output letter twice
  BAD(ValueError, "einsum", einsum("ij->k", {a}));            // an output letter no operand has
  BAD(ValueError, "einsum", einsum("i->i->i", {ones({2})}));  // two arrows
  BAD(ValueError, "einsum", einsum("ij->i,j", {a}));          // a comma in the output
  BAD(ValueError, "einsum", einsum("", std::vector<Tensor>{}));
  BAD(ShapeError, "einsum", einsum("ij", {ones({2, 3, 4})}));                     // 2 subscripts, 3 dims
  BAD(ShapeError, "einsum", einsum("ijk...", {a}));                               // more letters than dims
  BAD(ShapeError, "einsum", einsum("ii", {a}));                                   // a repeated letter of sizes 2 and 3
  BAD(ShapeError, "einsum", einsum("ij,jk", {a, ones({2, 2}, DType::Float64)}));  // j: 3 vs 2
  BAD(DTypeError, "einsum", einsum("ij,jk", {a, ones({3, 2})}));                  // float64 and float32
  BAD(StateError, "einsum", einsum("ij", {Tensor()}));
  BAD(ShapeError, "einsum", einsum("ij,jk", {Variable(a), Variable(a)}));  // the Variable version checks the same
  BAD(ShapeError, "diagonal", sq.diagonal(0, 1, 1));
  BAD(IndexError, "diagonal", sq.diagonal(0, 0, 2));
}

TEST(Scatter, GoldenPyTorch) {
  expect_golden("scatter", [](const V& v) { return scatter(v[0], 0, v[1].data(), v[2]); });
  expect_golden("scatter_value", [](const V& v) { return scatter(v[0], 1, v[1].data(), 2.5); });
  expect_golden("scatter_add", [](const V& v) { return scatter_add(v[0], 0, v[1].data(), v[2]); });
  for (std::string r : {"sum", "prod", "mean", "amax", "amin"})
    for (bool self : {true, false}) {
      const std::string name = "scatter_reduce_" + r + (self ? "_self" : "_noself");
      SCOPED_TRACE(name);
      expect_golden(name, [r, self](const V& v) { return scatter_reduce(v[0], 0, v[1].data(), v[2], r, self); });
    }
  expect_golden("scatter_reduce_prod_random",
                [](const V& v) { return scatter_reduce(v[0], 1, v[1].data(), v[2], "prod"); });
  expect_golden("index_get", [](const V& v) { return index_get(v[0], {v[1].data(), v[2].data()}); });
  expect_golden("index_get_mask", [](const V& v) { return index_get(v[0], {v[1].data()}); });
  expect_golden("index_put", [](const V& v) { return index_put(v[0], {v[1].data()}, v[2]); });
  expect_golden("index_put_broadcast_values", [](const V& v) {
    return index_put(v[0], {v[1].data(), v[2].data()}, v[3]);
  });
  expect_golden("index_put_accumulate", [](const V& v) { return index_put(v[0], {v[1].data()}, v[2], true); });
}

TEST(Scatter, HandComputedAndRepeatsInAFixedOrder) {
  const Tensor z = zeros({3}, DType::Float64);
  // two writes to element 1: the later one (in index order) wins, on every run
  expect_values(scatter(z, 0, i64({1, 1}, {2}), f64({5, 7}, {2})), {3}, {0, 7, 0});
  expect_values(scatter(z, 0, i64({2}, {1}), 4.0), {3}, {0, 0, 4});
  expect_values(scatter_reduce(f64({1, 2, 3}, {3}), 0, i64({0, 0, 2}, {3}), f64({4, 5, 6}, {3}), "sum"), {3},
                {10, 2, 9});
  expect_values(scatter_reduce(f64({1, 2, 3}, {3}), 0, i64({0, 0, 2}, {3}), f64({4, 5, 6}, {3}), "mean", false), {3},
                {4.5, 2, 6});
  expect_values(scatter_reduce(f64({1, 2, 3}, {3}), 0, i64({0, 0, 2}, {3}), f64({4, 5, 6}, {3}), "prod"), {3},
                {20, 2, 18});
  expect_values(scatter_reduce(f64({9, 2, 3}, {3}), 0, i64({0, 0, 2}, {3}), f64({4, 5, 6}, {3}), "amax"), {3},
                {9, 2, 6});
  expect_values(scatter_reduce(f64({9, 2, 3}, {3}), 0, i64({0, 0, 2}, {3}), f64({4, 5, 6}, {3}), "amax", false), {3},
                {5, 2, 6});
  // -inf sources without include_self: the maximum is -inf, not the lowest finite float
  const Tensor ninf = full({1}, -std::numeric_limits<double>::infinity(), DType::Float64);
  EXPECT_EQ(scatter_reduce(z, 0, i64({1}, {1}), ninf, "amax", false).to_vector<double>()[1], ninf.item<double>());
  // integer mean floors, as PyTorch
  EXPECT_EQ(
      scatter_reduce(i64({0, 0}, {2}), 0, i64({0, 0}, {2}), i64({-3, 0}, {2}), "mean", false).to_vector<int64_t>(),
      std::vector<int64_t>({-2, 0}));
  // advanced indexing: negative indices, broadcast, a mask
  const Tensor x = arange(12, DType::Float64).reshape({3, 4});
  expect_values(index_get(x, {i64({-1, 0}, {2}), i64({1}, {1})}), {2}, {9, 1});
  expect_values(index_get(x, {i64({2}, {1})}), {1, 4}, {8, 9, 10, 11});
  expect_values(index_get(x, {gt(x, full({}, 8.5, DType::Float64))}), {3}, {9, 10, 11});
  expect_values(index_put(z, {i64({1, 1, 0}, {3})}, f64({1, 2, 3}, {3}), true), {3}, {3, 3, 0});
  expect_values(index_put(z, {i64({1, 1, 0}, {3})}, f64({1, 2, 3}, {3})), {3}, {3, 2, 0});
}

TEST(Scatter, Gradients) {
  const Tensor idx = i64({0, 2, 1, 2, 0, 0}, {2, 3});
  // src larger than index: its elements past the index get gradient 0 (PyTorch 2.x refuses this backward)
  expect_gradcheck([idx](const V& v) { return scatter(v[0], 0, idx, v[1]); }, {rnd({3, 4}, 1), rnd({3, 5}, 2)});
  expect_gradcheck([idx](const V& v) { return scatter(v[0], 1, idx, 0.5); }, {rnd({2, 4}, 1)});
  expect_gradcheck([idx](const V& v) { return scatter_add(v[0], 0, idx, v[1]); }, {rnd({3, 4}, 1), rnd({2, 4}, 2)});
  for (std::string r : {"sum", "prod", "mean", "amax", "amin"})
    for (bool self : {true, false}) {
      SCOPED_TRACE(r + (self ? " include_self" : ""));
      expect_gradcheck([idx, r, self](const V& v) { return scatter_reduce(v[0], 0, idx, v[1], r, self); },
                       {rnd({3, 4}, 3), rnd({2, 3}, 4)});
    }
  expect_gradcheck(
      [](const V& v) {
        return index_get(v[0], {i64({1, -1, 1}, {3}), i64({0, 2, 0}, {3})});
      },
      {rnd({3, 4}, 5)});
  expect_gradcheck(
      [](const V& v) {
        return index_put(v[0], {i64({1, 0}, {2})}, v[1], true);
      },
      {rnd({3, 4}, 6), rnd({4}, 7)});
  expect_gradcheck(
      [](const V& v) {
        return index_put(v[0], {i64({2, 0}, {2})}, v[1]);
      },
      {rnd({3, 4}, 8), rnd({2, 1}, 9)});
}

TEST(Scatter, BadInputsAreTypedErrorsNamingTheOp) {
  const Tensor x = zeros({3, 4}, DType::Float64), s = ones({2, 4}, DType::Float64);
  BAD(IndexError, "scatter", scatter(x, 0, i64({0, 3, 0, 0, 0, 0, 0, 0}, {2, 4}), s));  // 3 past dim 0 of size 3
  BAD(IndexError, "scatter", scatter(x, 0, i64({-1, 0, 0, 0, 0, 0, 0, 0}, {2, 4}), s));
  BAD(ShapeError, "scatter", scatter(x, 0, i64({0}, {1}), s));                // index 1-D, base 2-D
  BAD(ShapeError, "scatter", scatter(x, 0, zeros({3, 4}, DType::Int64), s));  // index larger than src
  BAD(DTypeError, "scatter", scatter(x, 0, zeros({2, 4}), s));                // float index
  BAD(DTypeError, "scatter", scatter(x, 0, zeros({2, 4}, DType::Int64), ones({2, 4})));
  BAD(IndexError, "scatter", scatter(x, 2, zeros({2, 4}, DType::Int64), s));
  BAD(ValueError, "scatter_reduce", scatter_reduce(x, 0, zeros({2, 4}, DType::Int64), s, "max"));
  BAD(IndexError, "scatter_add", scatter_add(x, 0, full({2, 4}, 5, DType::Int64), s));
  BAD(IndexError, "index", index_get(x, {i64({3}, {1})}));
  BAD(IndexError, "index", index_get(x, {i64({-4}, {1})}));
  BAD(IndexError, "index", index_get(x, {i64({0}, {1}), i64({0}, {1}), i64({0}, {1})}));  // 3 indices, 2 dims
  BAD(ShapeError, "index", index_get(x, {i64({0, 1}, {2}), i64({0, 1, 2}, {3})}));  // (2) and (3) do not broadcast
  BAD(IndexError, "index", index_get(x, {ones({3, 3}, DType::Bool)}));              // mask (3, 3) on (3, 4)
  BAD(DTypeError, "index", index_get(x, {ones({2})}));
  BAD(ValueError, "index", index_get(x, {}));
  BAD(ShapeError, "index_put", index_put(x, {i64({0, 1}, {2})}, ones({3, 4}, DType::Float64)));  // (3, 4) into (2, 4)
  BAD(DTypeError, "index_put", index_put(x, {i64({0}, {1})}, ones({4})));
  BAD(IndexError, "index_put", index_put(Variable(x), {i64({7}, {1})}, Variable(ones({4}, DType::Float64))));
}
