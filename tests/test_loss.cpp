// cross_entropy and mse_loss: hand values, gradcheck, PyTorch golden values, error texts.
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_golden;
using mgtest::expect_gradcheck;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;

TEST(Loss, CrossEntropyHandValues) {
  // Uniform logits over 4 classes: loss = log 4, gradient = (softmax - onehot) / N.
  Variable x(zeros({2, 4}), true);
  Tensor t = from_vector<int64_t>({1, 3}, {2});
  Variable loss = cross_entropy(x, t);
  EXPECT_NEAR(loss.item(), std::log(4.0), 1e-6);
  loss.backward();
  expect_values(x.grad(), {2, 4}, {0.125, -0.375, 0.125, 0.125, 0.125, 0.125, 0.125, -0.375}, 1e-7);
  // ignore_index: the ignored row gets no gradient and is not counted
  Variable y(zeros({2, 4}), true);
  cross_entropy(y, from_vector<int64_t>({-100, 2}, {2})).backward();
  expect_values(y.grad(), {2, 4}, {0, 0, 0, 0, 0.25, 0.25, -0.75, 0.25}, 1e-7);
}

TEST(Loss, MseHandValues) {
  // ((1 - 0)^2 + (3 - 1)^2) / 2 = 2.5; d/dx = 2 (x - t) / 2 = (1, 2)
  Variable x(tensor({1, 3}, {2}), true);
  Variable loss = mse_loss(x, Variable(tensor({0, 1}, {2})));
  EXPECT_NEAR(loss.item(), 2.5, 1e-6);
  loss.backward();
  expect_values(x.grad(), {2}, {1, 2});
}

TEST(Loss, Gradcheck) {
  Tensor x = rnd({3, 5}, 1, -2, 2);
  Tensor t = from_vector<int64_t>({4, 0, 2}, {3});
  expect_gradcheck([](const V& v) { return cross_entropy(v[0], v[1].data()); }, {x, t});
  expect_gradcheck([](const V& v) { return cross_entropy(v[0], v[1].data()); },
                   {x.transpose(0, 1).contiguous().transpose(0, 1), t});
  expect_gradcheck([](const V& v) { return cross_entropy(v[0], v[1].data(), {.reduction = Reduction::None}); }, {x, t});
  expect_gradcheck(
      [](const V& v) { return cross_entropy(v[0], v[1].data(), {.ignore_index = 0, .reduction = Reduction::Sum}); },
      {x, t});
  expect_gradcheck([](const V& v) { return mse_loss(v[0], v[1]); }, {x, rnd({3, 5}, 3)});
  expect_gradcheck([](const V& v) { return mse_loss(v[0], v[1], {.reduction = Reduction::None}); },
                   {x, rnd({3, 5}, 4)});
}

TEST(Loss, GoldenPyTorch) {
  expect_golden("cross_entropy_mean", [](const V& v) { return cross_entropy(v[0], v[1].data()); });
  expect_golden("cross_entropy_sum",
                [](const V& v) { return cross_entropy(v[0], v[1].data(), {.reduction = Reduction::Sum}); });
  expect_golden("cross_entropy_none",
                [](const V& v) { return cross_entropy(v[0], v[1].data(), {.reduction = Reduction::None}); });
  expect_golden("cross_entropy_ignore", [](const V& v) { return cross_entropy(v[0], v[1].data()); });
  expect_golden("mse_loss", [](const V& v) { return mse_loss(v[0], v[1]); });
  expect_golden("mse_loss_sum", [](const V& v) { return mse_loss(v[0], v[1], {.reduction = Reduction::Sum}); });
}

TEST(Loss, ErrorsNameTheProblem) {
  Variable logits(zeros({3, 5}), true);
  try {
    cross_entropy(logits, from_vector<int64_t>({1, 5, 0}, {3}));
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cross_entropy: target 5 at position 1 is out of range for 5 classes"));
  }
  EXPECT_THROW(cross_entropy(logits, tensor({1, 2, 3}, {3})), DTypeError);
  EXPECT_THROW(cross_entropy(Variable(zeros({2, 3, 5})), from_vector<int64_t>({1, 2}, {2})), ShapeError);
  EXPECT_THROW(mse_loss(logits, Variable(zeros({5, 3}))), ShapeError);
}

TEST(Loss, MoreLossesHandValues) {
  // nll: -x[i, t_i] averaged; with weights (1, 3): (-(-1) * 1 + -(-2) * 3) / (1 + 3) = 7/4
  const Variable lp(tensor({-1, -5, -4, -2}, {2, 2}), true);
  EXPECT_NEAR(nll_loss(lp, from_vector<int64_t>({0, 1}, {2})).item(), 1.5, 1e-6);
  EXPECT_NEAR(nll_loss(lp, from_vector<int64_t>({0, 1}, {2}), {.weight = tensor({1, 3}, {2})}).item(), 7.0 / 4, 1e-6);
  // bce at x = 0.5: log 2 whatever the target; with logits, 0 gives log 2 too
  EXPECT_NEAR(binary_cross_entropy(Variable(tensor({0.5}, {1})), Variable(tensor({1}, {1}))).item(), std::log(2.0),
              1e-6);
  EXPECT_NEAR(binary_cross_entropy_with_logits(Variable(tensor({0}, {1})), Variable(tensor({0}, {1}))).item(),
              std::log(2.0), 1e-6);
  // x = 0 or 1 gives a large finite loss (logs clamped at -100), not inf
  EXPECT_NEAR(binary_cross_entropy(Variable(tensor({0}, {1})), Variable(tensor({1}, {1}))).item(), 100, 1e-4);
  // logits of +-1000: stable, no inf or NaN
  EXPECT_NEAR(binary_cross_entropy_with_logits(Variable(tensor({1000, -1000}, {2})), Variable(tensor({0, 1}, {2})),
                                               {.reduction = Reduction::Sum})
                  .item(),
              2000, 1e-2);
  // l1 (mean |d|), smooth l1 and huber on d = (0.2, 3)
  const Variable x(tensor({0.2, 3}, {2})), t(zeros({2}));
  EXPECT_NEAR(l1_loss(x, t).item(), 1.6, 1e-6);
  EXPECT_NEAR(smooth_l1_loss(x, t, {.reduction = Reduction::Sum}).item(), 0.5 * 0.04 + 2.5, 1e-6);
  EXPECT_NEAR(huber_loss(x, t, {.reduction = Reduction::Sum, .delta = 2}).item(), 0.5 * 0.04 + 2 * (3 - 1), 1e-6);
  // kl_div of a distribution from itself is 0; a target 0 contributes 0, not NaN
  const Variable p(tensor({0.25, 0.75, 0}, {3}));
  EXPECT_NEAR(kl_div(Variable(log(tensor({0.25, 0.75, 1}, {3}))), p, {.reduction = Reduction::Sum}).item(), 0, 1e-6);
  // cross_entropy with label smoothing: uniform logits over 4 classes give log 4 whatever s is
  EXPECT_NEAR(
      cross_entropy(Variable(zeros({2, 4})), from_vector<int64_t>({1, 3}, {2}), {.label_smoothing = 0.4}).item(),
      std::log(4.0), 1e-6);
}

TEST(Loss, MoreLossesGradcheck) {
  const Tensor x = rnd({4, 3}, 5), t = from_vector<int64_t>({2, 0, -100, 1}, {4}), w = rnd({3}, 6, 0.5, 2);
  expect_gradcheck(
      [&](const V& v) { return cross_entropy(v[0], t, {.weight = w.to(DType::Float64), .label_smoothing = 0.2}); },
      {x});
  expect_gradcheck([&](const V& v) { return cross_entropy(v[0], t, {.label_smoothing = 0.3}); }, {x});
  expect_gradcheck(
      [&](const V& v) {
        return cross_entropy(v[0], t,
                             {.weight = w.to(DType::Float64), .reduction = Reduction::None, .label_smoothing = 0.1});
      },
      {x});
  expect_gradcheck([&](const V& v) { return nll_loss(v[0], t, {.weight = w.to(DType::Float64)}); }, {x});
  const Tensor p = rnd({3, 4}, 7, 0.1, 0.9), q = rnd({3, 4}, 8, 0.1, 0.9);
  expect_gradcheck(
      [](const V& v) { return binary_cross_entropy(v[0], v[1], {.weight = full({4}, 1.5, DType::Float64)}); }, {p, q});
  expect_gradcheck(
      [](const V& v) {
        return binary_cross_entropy_with_logits(v[0], v[1], {.pos_weight = full({4}, 2.0, DType::Float64)});
      },
      {rnd({3, 4}, 9, -3, 3), q});
  expect_gradcheck([](const V& v) { return kl_div(v[0], v[1], {.reduction = Reduction::BatchMean}); },
                   {rnd({3, 4}, 10, -3, -0.5), p});
  expect_gradcheck([](const V& v) { return kl_div(v[0], v[1], {.log_target = true}); },
                   {rnd({3, 4}, 11, -3, -0.5), rnd({3, 4}, 12, -3, -0.5)});
  expect_gradcheck([](const V& v) { return l1_loss(v[0], v[1]); }, {rnd({3, 4}, 13), rnd({3, 4}, 14)});
  expect_gradcheck([](const V& v) { return smooth_l1_loss(v[0], v[1], {.beta = 0.5}); },
                   {rnd({3, 4}, 15), rnd({3, 4}, 16)});
  expect_gradcheck([](const V& v) { return huber_loss(v[0], v[1], {.delta = 0.7}); },
                   {rnd({3, 4}, 17), rnd({3, 4}, 18)});
}

TEST(Loss, MoreLossesGoldenPyTorch) {
  const Tensor w5 = from_vector<double>({0.5, 2.0, 1.0, 0.25, 1.5}, {5});
  expect_golden("nll_weighted_ignore", [&](const V& v) {
    return nll_loss(log_softmax(v[0], 1), v[1].data(), {.weight = w5.to(v[0].dtype())});
  });
  expect_golden("nll_sum", [](const V& v) { return nll_loss(v[0], v[1].data(), {.reduction = Reduction::Sum}); });
  expect_golden("cross_entropy_weight_smoothing", [&](const V& v) {
    return cross_entropy(v[0], v[1].data(), {.weight = w5.to(v[0].dtype()), .label_smoothing = 0.2});
  });
  expect_golden("cross_entropy_smoothing_ignore",
                [](const V& v) { return cross_entropy(v[0], v[1].data(), {.label_smoothing = 0.3}); });
  expect_golden("cross_entropy_smoothing_none", [&](const V& v) {
    return cross_entropy(v[0], v[1].data(),
                         {.weight = w5.to(v[0].dtype()), .reduction = Reduction::None, .label_smoothing = 0.1});
  });
  expect_golden("bce_weighted", [](const V& v) {
    return binary_cross_entropy(v[0], v[1], {.weight = from_vector<double>({1, 2, 0.5, 1}, {4}).to(v[0].dtype())});
  });
  expect_golden("bce_with_logits_pos_weight", [](const V& v) {
    return binary_cross_entropy_with_logits(v[0], v[1],
                                            {.weight = from_vector<double>({1, 0.5, 2}, {3, 1}).to(v[0].dtype()),
                                             .pos_weight = from_vector<double>({1, 3, 0.5, 2}, {4}).to(v[0].dtype())});
  });
  expect_golden("bce_with_logits_sum",
                [](const V& v) { return binary_cross_entropy_with_logits(v[0], v[1], {.reduction = Reduction::Sum}); });
  expect_golden("kl_div_batchmean", [](const V& v) { return kl_div(v[0], v[1], {.reduction = Reduction::BatchMean}); });
  expect_golden("kl_div_log_target",
                [](const V& v) { return kl_div(v[0], v[1], {.reduction = Reduction::Sum, .log_target = true}); });
  expect_golden("l1_loss", [](const V& v) { return l1_loss(v[0], v[1]); });
  expect_golden("smooth_l1_beta", [](const V& v) { return smooth_l1_loss(v[0], v[1], {.beta = 0.5}); });
  expect_golden("huber_delta",
                [](const V& v) { return huber_loss(v[0], v[1], {.reduction = Reduction::Sum, .delta = 0.7}); });
}

TEST(Loss, MoreLossesErrors) {
  const Variable x(zeros({2, 3})), t(zeros({2, 3}));
  EXPECT_THROW(mse_loss(x, t, {.reduction = Reduction::BatchMean}), ValueError);
  EXPECT_THROW(smooth_l1_loss(x, t, {.beta = -1}), ValueError);
  EXPECT_THROW(huber_loss(x, t, {.delta = 0}), ValueError);
  EXPECT_THROW(l1_loss(x, Variable(zeros({3}))), ShapeError);
  EXPECT_THROW(nll_loss(x, from_vector<int64_t>({0}, {1})), ShapeError);
  EXPECT_THROW(cross_entropy(x, from_vector<int64_t>({0, 1}, {2}), {.label_smoothing = -0.1}), ValueError);
}

TEST(Loss, Float32BinaryCrossEntropyAndKlAgreeWithFloat64) {
  // float32 runs on fast::log, log1p and exp (tensor/fastmath.h), float64 on libm: from the same
  // float32 inputs, each entry of the losses and their gradients agrees with float64's within
  // 2e-6 of the size of its terms (the sums inside cancel where x is large, so the bound is on the
  // terms, not on the result). Strided views, probabilities up to 0 and 1 (the -100 clamp) included.
  Generator g(3);
  const Tensor x = (randn({41, 29}, g) * 4.0).to(DType::Float32).transpose(0, 1);
  const Tensor t = uniform({29, 41}, 0, 1, g), pw = uniform({41}, 0, 3, g);
  Tensor p = sigmoid(x);
  const Tensor few = full({}, 0.05);
  p = where(lt(uniform({29, 41}, 0, 1, g), few), zeros_like(p), p);  // some exact 0s and 1s
  p = where(lt(uniform({29, 41}, 0, 1, g), few), ones_like(p), p);
  const Tensor one = ones({}, DType::Float32);
  auto check = [](const std::string& what, const Tensor& lo, const Tensor& hi, const Tensor& size) {
    const std::vector<double> a = lo.to_vector<double>(), e = hi.to_vector<double>(), s = size.to_vector<double>();
    ASSERT_EQ(a.size(), e.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], e[i], 2e-6 * (1 + s[i])) << what << " entry " << i;
  };
  auto d = [](const Tensor& v) { return v.to(DType::Float64); };
  const Tensor hundred = full({}, 100.0), ax = abs(x);
  const Tensor lp = minimum(abs(log(p)), hundred) + minimum(abs(log1p(-p)), hundred);  // the two logs' sizes
  const BCELossOptions bo{.reduction = Reduction::None};
  check("bce", binary_cross_entropy(p, t, bo), binary_cross_entropy(d(p), d(t), bo), lp);
  const auto [bx, bt] = binary_cross_entropy_backward(one, p, t, bo);
  const auto [bx64, bt64] = binary_cross_entropy_backward(d(one), d(p), d(t), bo);
  check("bce dx", bx, bx64, abs(bx64));
  check("bce dt", bt, bt64, full({29, 41}, 200.0, DType::Float64));
  const BCEWithLogitsLossOptions lo{.pos_weight = pw, .reduction = Reduction::None};
  const BCEWithLogitsLossOptions lo64{.pos_weight = d(pw), .reduction = Reduction::None};
  check("bce with logits", binary_cross_entropy_with_logits(x, t, lo),
        binary_cross_entropy_with_logits(d(x), d(t), lo64), ax * 4.0);
  const auto [lx, lt_] = binary_cross_entropy_with_logits_backward(one, x, t, lo);
  const auto [lx64, lt64] = binary_cross_entropy_with_logits_backward(d(one), d(x), d(t), lo64);
  check("bce with logits dx", lx, lx64, full({29, 41}, 4.0, DType::Float64));
  check("bce with logits dt", lt_, lt64, ax * 4.0);
  for (bool log_target : {false, true}) {
    const KLDivLossOptions ko{.reduction = Reduction::None, .log_target = log_target};
    const Tensor tt = log_target ? x.transpose(0, 1).contiguous().transpose(0, 1) * 0.5 : t;
    const Tensor size = log_target ? exp(tt) * (abs(tt) + ax + 1.0) : t * (abs(log(t)) + ax);
    check("kl_div", kl_div(x, tt, ko), kl_div(d(x), d(tt), ko), size);
    const auto [kx, kt] = kl_div_backward(one, x, tt, ko);
    const auto [kx64, kt64] = kl_div_backward(d(one), d(x), d(tt), ko);
    check("kl_div dx", kx, kx64, abs(kx64));
    check("kl_div dt", kt, kt64, log_target ? size + 1.0 : abs(log(t)) + ax + 1.0);
  }
  // logsumexp over either dim, and softmax over the strided one
  check("logsumexp", logsumexp(x, {0}), logsumexp(d(x), {0}), max(ax, 0).first);
  check("logsumexp", logsumexp(x, {1}), logsumexp(d(x), {1}), max(ax, 1).first);
  check("softmax", softmax(x, 0), softmax(d(x), 0), zeros({29, 41}, DType::Float64));
}
