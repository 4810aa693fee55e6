// Recurrent layers: the fused recurrence op (gradcheck of every kind, both directions), the cells
// and the sequence layers against PyTorch, the layers equal to their cells in a loop, an LSTM
// that learns to remember, errors.
#include "helpers.h"

using namespace mg;
using mgtest::check_module;
using mgtest::expect_close;
using mgtest::expect_gradcheck;
using mgtest::rnd;
using V = std::vector<Variable>;

namespace {
Variable flat_cat(const std::vector<Variable>& parts) {
  std::vector<Variable> f;
  for (const Variable& p : parts) f.push_back(reshape(p, {-1}));
  return concat(f, 0);
}
}  // namespace

TEST(Recurrence, GradcheckEveryKindBothDirections) {
  const int64_t L = 4, N = 2, H = 3;
  for (RNNKind kind : {RNNKind::Tanh, RNNKind::ReLU, RNNKind::GRU, RNNKind::LSTM})
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(fmt::format("kind {} reverse {}", static_cast<int>(kind), reverse));
      const int64_t G = rnn_gates(kind);
      std::vector<Tensor> in{rnd({L, N, G * H}, 1), rnd({N, H}, 2), rnd({G * H, H}, 3, -0.7, 0.7), rnd({G * H}, 4)};
      if (kind == RNNKind::LSTM) in.push_back(rnd({N, H}, 5));
      expect_gradcheck(
          [kind, reverse](const V& v) {
            return recurrence(kind, v[0], v[1], kind == RNNKind::LSTM ? v[4] : Variable(), v[2], v[3], reverse);
          },
          in);
    }
  // without b_hh, and from a transposed xw
  expect_gradcheck([](const V& v) { return recurrence(RNNKind::GRU, v[0], v[1], Variable(), v[2]); },
                   {rnd({2, 3, 6}, 6).transpose(0, 1), rnd({2, 2}, 7), rnd({6, 2}, 8)});
}

TEST(Recurrence, ThreadsSplitTheStepsWork) {
  // With a batch and width large enough, each step's rows and dW's rows are split over the threads:
  // 2 threads agree with 1 (to rounding: the products have other shapes) and with themselves, bit for bit.
  const int before = get_num_threads();
  for (RNNKind kind : {RNNKind::Tanh, RNNKind::GRU, RNNKind::LSTM}) {
    const int64_t G = rnn_gates(kind), H = 128, N = 33, L = 5;
    const Tensor xw = rnd({L, N, G * H}, 1), h0 = rnd({N, H}, 2), w = rnd({G * H, H}, 3) * 0.1, b = rnd({G * H}, 4);
    const Tensor c0 = kind == RNNKind::LSTM ? rnd({N, H}, 5) : Tensor(), dh = rnd({L, N, H}, 6);
    std::vector<std::vector<double>> runs;
    for (int threads : {1, 2, 2}) {
      set_num_threads(threads);
      const RecurrenceForward f = recurrence_forward(kind, xw, h0, c0, w, b, false);
      const RecurrenceGrads g = recurrence_backward(kind, dh, Tensor(), xw, h0, c0, w, b, f, false);
      std::vector<double> all = f.h.to_vector<double>();
      for (const Tensor& t : {g.dxw, g.dw_hh, g.db_hh, g.dh0})
        for (double v : t.to_vector<double>()) all.push_back(v);
      runs.push_back(all);
    }
    set_num_threads(before);
    ASSERT_EQ(runs[0].size(), runs[1].size());
    for (size_t i = 0; i < runs[0].size(); ++i)
      ASSERT_NEAR(runs[0][i], runs[1][i], 1e-12 * (1 + std::abs(runs[0][i]))) << i;
    EXPECT_EQ(runs[1], runs[2]);
  }
}

TEST(Recurrence, Float32AgreesWithFloat64) {
  // The float32 gates run on fast::exp and fast::tanh (within 2 ulp); float64 on libm. From the same
  // (float32) inputs, every output of both directions agrees with float64's to float32 precision:
  // within 3e-6 of the largest magnitude of its tensor (5 steps of rounding, carried through the
  // recurrence). H = 37 leaves a tail after the last full vector; xw is a transposed view.
  for (RNNKind kind : {RNNKind::Tanh, RNNKind::ReLU, RNNKind::GRU, RNNKind::LSTM})
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(fmt::format("kind {} reverse {}", static_cast<int>(kind), reverse));
      const int64_t G = rnn_gates(kind), H = 37, N = 3, L = 5;
      const Tensor xw = (rnd({N, L, G * H}, 1, -3, 3).to(DType::Float32)).transpose(0, 1);
      const Tensor h0 = rnd({N, H}, 2).to(DType::Float32), w = rnd({G * H, H}, 3, -0.3, 0.3).to(DType::Float32);
      const Tensor b = rnd({G * H}, 4).to(DType::Float32), dh = rnd({L, N, H}, 6).to(DType::Float32);
      const Tensor c0 = kind == RNNKind::LSTM ? rnd({N, H}, 5, -2, 2).to(DType::Float32) : Tensor();
      auto run = [&](DType dt) {
        auto as = [dt](const Tensor& t) { return t.defined() ? t.to(dt) : t; };
        const RecurrenceForward f = recurrence_forward(kind, as(xw), as(h0), as(c0), as(w), as(b), reverse);
        const RecurrenceGrads g =
            recurrence_backward(kind, as(dh), Tensor(), as(xw), as(h0), as(c0), as(w), as(b), f, reverse);
        return std::vector<Tensor>{f.h, f.c, g.dxw, g.dw_hh, g.db_hh, g.dh0, g.dc0};
      };
      const std::vector<Tensor> lo = run(DType::Float32), hi = run(DType::Float64);
      for (size_t k = 0; k < lo.size(); ++k) {
        if (!hi[k].defined()) continue;
        const std::vector<double> a = lo[k].to_vector<double>(), e = hi[k].to_vector<double>();
        double scale = 0;
        for (double v : e) scale = std::max(scale, std::abs(v));
        for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], e[i], 3e-6 * scale) << "output " << k << " entry " << i;
      }
    }
}

TEST(RNNCells, GoldenPyTorch) {
  nn::RNNCell rnn(4, 3, {.nonlinearity = nn::RNNNonlinearity::ReLU});
  check_module(rnn, "rnn_cell_relu", [&](const V& v) { return std::pair{rnn(v[0], v[1]), Variable()}; });
  nn::GRUCell gru(4, 3);
  check_module(gru, "gru_cell", [&](const V& v) { return std::pair{gru(v[0], v[1]), Variable()}; });
  nn::LSTMCell lstm(4, 3);
  check_module(lstm, "lstm_cell", [&](const V& v) {
    auto [h, c] = lstm(v[0], std::tuple{v[1], v[2]});
    return std::pair{flat_cat({h, c}), Variable()};
  });
}

TEST(RNNLayers, GoldenPyTorch) {
  nn::RNN rnn(4, 3, {.num_layers = 2});
  check_module(rnn, "rnn_tanh_2layer", [&](const V& v) {
    auto [out, hn] = rnn(v[0], v[1]);
    return std::pair{flat_cat({out, hn}), Variable()};
  });
  nn::GRU gru(4, 3, {.batch_first = true, .bidirectional = true});
  check_module(gru, "gru_batch_first_bidirectional", [&](const V& v) {
    auto [out, hn] = gru(v[0]);
    return std::pair{flat_cat({out, hn}), Variable()};
  });
  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true});
  check_module(lstm, "lstm_2layer_bidirectional", [&](const V& v) {
    auto [out, state] = lstm(v[0], std::tuple{v[1], v[2]});
    return std::pair{flat_cat({out, std::get<0>(state), std::get<1>(state)}), Variable()};
  });
  nn::LSTM plain(3, 2, {.bias = false});
  check_module(plain, "lstm_unbatched_no_bias", [&](const V& v) {
    auto [out, state] = plain(v[0]);
    return std::pair{flat_cat({out, std::get<0>(state), std::get<1>(state)}), Variable()};
  });
}

TEST(RNNLayers, EqualTheirCellsInALoop) {
  // The fused recurrence and the cell written out of ops compute the same numbers, and the same
  // gradients, with the same weights (float64).
  Generator g(3);
  nn::LSTM lstm(3, 4, {}, g);
  nn::LSTMCell cell(3, 4, {}, g);
  nn::GRU gru(3, 4, {}, g);
  nn::GRUCell gcell(3, 4, {}, g);
  for (nn::Module* m : std::initializer_list<nn::Module*>{&lstm, &cell, &gru, &gcell}) m->to(DType::Float64);
  for (const char* w : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
    cell.parameter(w).data().copy_(lstm.parameter(std::string(w) + "_l0").data());
    gcell.parameter(w).data().copy_(gru.parameter(std::string(w) + "_l0").data());
  }
  const Tensor x = rnd({5, 2, 3}, 4);
  Variable xa(x, true), xb(x, true);
  auto [out, state] = lstm(xa);
  std::tuple<Variable, Variable> s{Variable(zeros({2, 4}, DType::Float64)), Variable(zeros({2, 4}, DType::Float64))};
  std::vector<Variable> hs;
  for (int64_t t = 0; t < 5; ++t) {
    s = cell(squeeze(narrow(xb, 0, t, 1), 0), s);
    hs.push_back(std::get<0>(s));
  }
  expect_close(out.data(), stack(hs, 0).data(), 1e-13, 1e-13);
  expect_close(std::get<1>(state).data().reshape({2, 4}), std::get<1>(s).data(), 1e-13, 1e-13);
  const Tensor gout = rnd({5, 2, 4}, 5);
  sum(out * Variable(gout)).backward();
  sum(stack(hs, 0) * Variable(gout)).backward();
  expect_close(xa.grad(), xb.grad(), 1e-13, 1e-13);
  expect_close(lstm.parameter("weight_hh_l0").grad(), cell.weight_hh.grad(), 1e-13, 1e-13);

  Variable ya(x, true), yb(x, true);
  auto [gout_seq, ghn] = gru(ya);
  Variable h(zeros({2, 4}, DType::Float64));
  std::vector<Variable> gh;
  for (int64_t t = 0; t < 5; ++t) gh.push_back(h = gcell(squeeze(narrow(yb, 0, t, 1), 0), h));
  expect_close(gout_seq.data(), stack(gh, 0).data(), 1e-13, 1e-13);
  sum(gout_seq * Variable(gout)).backward();
  sum(stack(gh, 0) * Variable(gout)).backward();
  expect_close(ya.grad(), yb.grad(), 1e-13, 1e-13);
  expect_close(gru.parameter("bias_hh_l0").grad(), gcell.bias_hh.grad(), 1e-13, 1e-13);
}

TEST(RNNLayers, AnLSTMLearnsToRememberTheFirstInput) {
  // Sequences of 6 random signs (+-1); the target is the first one, read after the last step. Only
  // the hidden state can carry it across the 5 steps in between.
  Generator g(7);
  nn::LSTM lstm(1, 8, {.batch_first = true}, g);
  nn::Linear head(8, 2, {}, g);
  std::vector<Variable> params = lstm.parameters();
  for (const Variable& p : head.parameters()) params.push_back(p);
  optim::Adam opt(params, {.lr = 0.02});
  auto batch = [&](int64_t n, Tensor& targets) {
    const Tensor bits = randint(0, 2, {n, 6}, g);
    targets = bits.narrow(1, 0, 1).reshape({n});
    return Variable(bits.to(DType::Float32).reshape({n, 6, 1}) * 2.0 - 1.0);
  };
  auto logits = [&](const Variable& x) { return head(squeeze(std::get<0>(std::get<1>(lstm(x))), 0)); };
  for (int step = 0; step < 400; ++step) {
    Tensor t;
    const Variable x = batch(32, t);
    Variable loss = cross_entropy(logits(x), t);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  Tensor t;
  const Variable x = batch(500, t);
  const double accuracy = mean(eq(argmax(logits(x).data(), 1), t).to(DType::Float32)).item();
  EXPECT_GT(accuracy, 0.98);  // chance is 0.5
}

TEST(RNNLayers, Errors) {
  nn::LSTM lstm(3, 4, {.num_layers = 2});
  EXPECT_THROW(lstm(Variable(zeros({5, 2, 4}))), ShapeError);  // input_size 3
  EXPECT_THROW(lstm(Variable(zeros({5, 2, 3})), std::tuple{Variable(zeros({1, 2, 4})), Variable(zeros({2, 2, 4}))}),
               ShapeError);  // h0 needs num_layers = 2 rows
  EXPECT_THROW(lstm(Variable(zeros({0, 2, 3}))), ShapeError);
  EXPECT_THROW(nn::GRU(3, 0), ValueError);
  EXPECT_THROW(nn::GRUCell(3, 4)(Variable(zeros({2, 3})), Variable(zeros({3, 4}))), ShapeError);
  EXPECT_THROW(recurrence(RNNKind::LSTM, Variable(zeros({2, 1, 8})), Variable(zeros({1, 2})), Variable(),
                          Variable(zeros({8, 2}))),
               StateError);  // an LSTM needs c0
}
