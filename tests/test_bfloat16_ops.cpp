// Ops on bfloat16 values: elementwise ops against PyTorch's (tests/golden/bf16_ops.txt), reductions,
// softmax, SwiGLU, RoPE, dropout, the norms and losses under autocast, their float32 gradients, and
// what is refused. The format itself (conversion, layouts, printing, files) is in test_bfloat16.cpp;
// the products that read bfloat16 (autocast) in test_autocast.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "file_helpers.h"
#include "helpers.h"
#include "minigrad/minigrad.h"
#include "minigrad/tensor/blas.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::max_abs_diff;
using mgtest::rnd;

namespace {

// ---- elementwise ops on bfloat16, against PyTorch 2.x (tests/golden/bf16_ops.txt) ----

struct Golden {
  std::map<std::string, Tensor> t;
  const Tensor& operator[](const std::string& k) const {
    auto it = t.find(k);
    if (it == t.end()) throw std::runtime_error("tests/golden/bf16_ops.txt has no case " + k);
    return it->second;
  }
};
// "<case> <dtype> <ndim> <dims...> <values...>", values exact; a case name has no spaces
const Golden& golden() {
  static const Golden g = [] {
    Golden out;
    std::ifstream in(std::string(MG_GOLDEN_DIR) + "/bf16_ops.txt");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::string name, dtype;
      int64_t nd = 0;
      ss >> name >> dtype >> nd;
      Shape shape(nd);
      for (auto& d : shape) ss >> d;
      std::vector<double> v(numel_of(shape));
      for (auto& e : v) ss >> e;
      const DType dt = dtype == "bfloat16" ? DType::BFloat16 : dtype == "bool" ? DType::Bool : DType::Float32;
      out.t[name] = from_vector<double>(v, shape).to(dt);  // exact: every value is one of dt's
    }
    return out;
  }();
  return g;
}

// How many bfloat16 steps apart a and b are (0: the same value; +0 and -0 are the same step).
int64_t bf16_steps(float a, float b) {
  auto ordered = [](float f) {
    const int32_t bits = static_cast<int32_t>(bfloat16(f).bits);
    return bits & 0x8000 ? -(bits & 0x7fff) : bits;
  };
  return std::abs(static_cast<int64_t>(ordered(a)) - ordered(b));
}

// got equals want in dtype and shape, and value for value within `steps` bfloat16 steps (0: the
// same bits, as an op correctly rounded in float32 and then to bfloat16 gives on any CPU)
void expect_golden(const Tensor& got, const std::string& name, int64_t steps = 0) {
  SCOPED_TRACE(name);
  const Tensor& want = golden()[name];
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  int64_t worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (got.dtype() == DType::BFloat16) {
      worst = std::max(worst, bf16_steps(static_cast<float>(g[i]), static_cast<float>(w[i])));
    } else if (g[i] != w[i]) {
      ADD_FAILURE() << "element " << i << ": " << g[i] << " where PyTorch has " << w[i];
      return;
    }
  }
  EXPECT_LE(worst, steps);
}

TEST(BFloat16, UnaryOpsComputeInFloat32AndRoundOnceAsPyTorch) {
  const Golden& G = golden();
  const Tensor x = G["x"], p = G["p"];
  ASSERT_EQ(x.dtype(), DType::BFloat16);
  // exact in float32 (or correctly rounded there): the same bits as PyTorch's
  expect_golden(neg(x), "neg(x)");
  expect_golden(abs(x), "abs(x)");
  expect_golden(pow(x, 2.0), "square(x)");
  expect_golden(relu(x), "relu(x)");
  expect_golden(sqrt(p), "sqrt(p)");
  // transcendental: minigrad's float32 functions and PyTorch's (Sleef) differ by an ulp of float32 at
  // most here, which can move a value across a bfloat16 rounding boundary: one step allowed
  expect_golden(exp(x), "exp(x)", 1);
  expect_golden(tanh(x), "tanh(x)", 1);
  expect_golden(sigmoid(x), "sigmoid(x)", 1);
  expect_golden(sin(x), "sin(x)", 1);
  expect_golden(cos(x), "cos(x)", 1);
  expect_golden(expm1(x), "expm1(x)", 1);
  expect_golden(log(p), "log(p)", 1);
  expect_golden(log1p(p), "log1p(p)", 1);
  expect_golden(pow(p, 0.5), "pow_half(p)", 1);
  // and the same values from any layout: a strided view, a transposed matrix
  const Tensor every_other = x.slice(0, 1, 48, 2);  // stride 2, offset 1
  EXPECT_EQ(max_abs_diff(exp(every_other), exp(every_other.contiguous())), 0.0);
  const Tensor mt = G["m"].transpose(0, 1);
  EXPECT_EQ(max_abs_diff(tanh(mt), tanh(G["m"]).transpose(0, 1)), 0.0);
  EXPECT_EQ(tanh(mt).dtype(), DType::BFloat16);
}

TEST(BFloat16, EveryUnaryOpAndItsBackwardIsTheFloat32OneOnWidenedValues) {
  // The rule for bfloat16, stated per op: the forward is the float32 op on the widened (exact) input,
  // rounded once; the backward, with a float32 dy, is the float32 backward on the widened saved
  // tensor, bit for bit. Over a strided view, so every layout takes the same path.
  const Tensor x16 = (rnd({64}, 21) * 3.0).to(DType::Float32).to(DType::BFloat16).slice(0, 0, 64, 2);
  const Tensor x = x16.to(DType::Float32), dy = rnd({32}, 22).to(DType::Float32);
  using U = Tensor (*)(const Tensor&);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> forward = {
      {"neg", U(neg)},
      {"exp", U(exp)},
      {"abs", U(abs)},
      {"sign", U(sign)},
      {"tanh", U(tanh)},
      {"sigmoid", U(sigmoid)},
      {"sin", U(sin)},
      {"cos", U(cos)},
      {"expm1", U(expm1)},
      {"relu", U(relu)},
      {"silu", U(silu)},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"gelu_tanh", [](const Tensor& t) { return gelu(t, GeluApproximate::Tanh); }},
      {"softplus", [](const Tensor& t) { return softplus(t, 2.0, 5.0); }},
      {"leaky_relu", [](const Tensor& t) { return leaky_relu(t, 0.1); }},
      {"elu", [](const Tensor& t) { return elu(t, 0.7); }},
      {"clamp", [](const Tensor& t) { return clamp(t, -1.0, 0.5); }},
      {"pow3", [](const Tensor& t) { return pow(t, 3.0); }},
  };
  for (const auto& [name, f] : forward) {
    SCOPED_TRACE(name);
    const Tensor got = f(x16);
    ASSERT_EQ(got.dtype(), DType::BFloat16);
    EXPECT_EQ(max_abs_diff(got, f(x).to(DType::BFloat16)), 0.0);
  }
  using B = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&, const Tensor&)>>> backward = {
      {"relu_backward", B(relu_backward)},
      {"silu_backward", B(silu_backward)},
      {"tanh_backward", B(tanh_backward)},
      {"sigmoid_backward", B(sigmoid_backward)},
      {"gelu_backward", [](const Tensor& g, const Tensor& t) { return gelu_backward(g, t); }},
      {"softplus_backward", [](const Tensor& g, const Tensor& t) { return softplus_backward(g, t, 2.0, 5.0); }},
      {"elu_backward", [](const Tensor& g, const Tensor& t) { return elu_backward(g, t, 0.7); }},
      {"clamp_backward", [](const Tensor& g, const Tensor& t) { return clamp_backward(g, t, -1.0, 0.5); }},
  };
  for (const auto& [name, f] : backward) {
    SCOPED_TRACE(name);
    const Tensor got = f(dy, x16);
    ASSERT_EQ(got.dtype(), DType::Float32);  // a float32 dy: the gradient of a bfloat16 value is float32
    EXPECT_EQ(max_abs_diff(got, f(dy, x)), 0.0);
    EXPECT_EQ(f(dy.to(DType::BFloat16), x16).dtype(), DType::BFloat16);  // both bfloat16: bfloat16
  }
}

TEST(BFloat16, ArithmeticPromotesWithFloat32AsPyTorchDoes) {
  const Golden& G = golden();
  const Tensor m = G["m"], r = G["r"], f = G["f"], s = G["s"];
  ASSERT_EQ(s.dim(), 0);
  // bfloat16 with bfloat16 (r broadcast over rows): bfloat16; with float32: float32; with a 0-dim
  // float32: bfloat16 (it acts as a number). All computed in float32 from the operands as PyTorch
  // reads them, so the same values as PyTorch's.
  const std::vector<std::pair<std::string, Tensor (*)(const Tensor&, const Tensor&)>> ops = {
      {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}, {"maximum", maximum}, {"minimum", minimum}};
  for (const auto& [name, op] : ops) {
    expect_golden(op(m, r), name + "(m,r)");
    expect_golden(op(f, m), name + "(f,m)");
    expect_golden(op(m, s), name + "(m,s)");
  }
  // the 0-dim float32 (or a number) is rounded to bfloat16 first, as PyTorch's kernels round it,
  // except as the second operand of mul and div, which read it as a float32 (0.1f)
  expect_golden(mul(s, m), "mul(s,m)");
  expect_golden(div(s, m), "div(s,m)");
  expect_golden(eq(m, s), "eq(m,s)");
  EXPECT_EQ(eq(m, s).to_vector<int64_t>()[1], 1);  // m[0, 1] = bfloat16(0.3) equals s rounded
  expect_golden(m + 0.3, "m+0.3");
  expect_golden(m * 0.1, "m*0.1");
  expect_golden(0.1 - m, "0.1-m");
  expect_golden(m / 3.0, "m/3");
  expect_golden(lt(m, r), "lt(m,r)");
  expect_golden(ge(f, m), "ge(f,m)");
  const Tensor mask = G["mask"];
  expect_golden(where(mask, m, f), "where(mask,m,f)");
  expect_golden(where(mask, m, r), "where(mask,m,r)");
  expect_golden(masked_fill(m, mask, 0.1), "masked_fill(m,mask,0.1)");
  // layouts: a transposed bfloat16 operand and an expanded (stride 0) one give the same numbers
  const Tensor mt = m.transpose(0, 1).contiguous().transpose(0, 1);  // m's values, column-major
  EXPECT_EQ(max_abs_diff(add(mt, r), add(m, r)), 0.0);
  EXPECT_EQ(max_abs_diff(mul(f, r.expand({4, 12})), mul(f, r.expand({4, 12}).contiguous())), 0.0);
  // two 0-dim operands: float32 (a 0-dim float32 is a tensor here, as in PyTorch); a number beside a
  // 0-dim bfloat16 tensor also gives float32 here (PyTorch: bfloat16), the one stated deviation
  EXPECT_EQ(add(full({}, 1.5, DType::BFloat16), s).dtype(), DType::Float32);
  EXPECT_EQ((full({}, 1.5, DType::BFloat16) * 2.0).dtype(), DType::Float32);
  // zero-size
  EXPECT_EQ(add(zeros({0, 12}, DType::BFloat16), r).shape(), (Shape{0, 12}));
}

TEST(BFloat16, SumMeanAndSoftmaxAccumulateInFloat32AndRoundOnce) {
  const Tensor m = golden()["m"];
  // PyTorch's and minigrad's float32 sums may add in another order: one bfloat16 step allowed
  expect_golden(sum(m), "sum(m)", 1);
  expect_golden(sum(m, {1}), "sum(m,1)", 1);
  expect_golden(mean(m, {0}), "mean(m,0)", 1);
  expect_golden(softmax(m, 1), "softmax(m,1)", 1);
  expect_golden(log_softmax(m, 0), "log_softmax(m,0)", 1);
  // and exactly the float32 kernel on the widened values, from any layout (transposed here)
  const Tensor f = m.to(DType::Float32), mt = m.transpose(0, 1), ft = f.transpose(0, 1);
  EXPECT_EQ(max_abs_diff(sum(mt, {0}), sum(ft, {0}).to(DType::BFloat16)), 0.0);
  EXPECT_EQ(max_abs_diff(mean(mt, {1}, true), mean(ft, {1}, true).to(DType::BFloat16)), 0.0);
  EXPECT_EQ(max_abs_diff(softmax(mt, 0), softmax(ft, 0).to(DType::BFloat16)), 0.0);
  EXPECT_EQ(max_abs_diff(log_softmax(mt, -1), log_softmax(ft, -1).to(DType::BFloat16)), 0.0);
  EXPECT_EQ(sum(zeros({0, 3}, DType::BFloat16), {0}).to_vector<float>(), std::vector<float>(3, 0.0f));
}

TEST(BFloat16, SoftmaxOfABfloat16ValueHasItsRulesFloat32Gradient) {
  // y16 = softmax(a16, 1); L = sum(y16 * w). The rule, dx = y (dy - sum(dy y)), computes with the
  // float32 dy = w and the stored bfloat16 y: the same bits as those float32 ops on widened y.
  const Tensor a0 = rnd({3, 7}, 41).to(DType::Float32), w = rnd({3, 7}, 42).to(DType::Float32);
  Variable a(a0, true);
  Variable y16;
  {
    AutocastGuard guard;
    y16 = softmax(autocast(a), 1);
  }
  ASSERT_EQ(y16.dtype(), DType::BFloat16);
  sum(y16 * Variable(w)).backward();
  const Tensor y = y16.data().to(DType::Float32);
  const Tensor want = y * (w - sum(w * y, {1}, true));
  ASSERT_EQ(a.grad().dtype(), DType::Float32);
  EXPECT_EQ(max_abs_diff(a.grad(), want), 0.0);
  EXPECT_GT(max_abs_diff(want, zeros({3, 7})), 0.01);  // (not a vacuous comparison)
}

TEST(BFloat16, LogSoftmaxOfABfloat16ValueTakesExpOfItsOutputInFloat32) {
  // y16 = log_softmax(a16, 1); L = sum(y16 * w). The rule, dx = dy - exp(y) sum(dy), computes exp
  // of the stored bfloat16 y widened, in float32 (it rounded exp(y) to bfloat16 before), plain and
  // under create_graph.
  const Tensor a0 = rnd({3, 7}, 43).to(DType::Float32), w = rnd({3, 7}, 44).to(DType::Float32);
  for (const bool create_graph : {false, true}) {
    Variable a(a0, true);
    Variable y16;
    {
      AutocastGuard guard;
      y16 = log_softmax(autocast(a), 1);
    }
    ASSERT_EQ(y16.dtype(), DType::BFloat16);
    const VariableList g = grad({sum(y16 * Variable(w))}, {a}, {.create_graph = create_graph});
    const Tensor y = y16.data().to(DType::Float32);
    const Tensor want = w - exp(y) * sum(w, {1}, true);
    ASSERT_EQ(g[0].dtype(), DType::Float32);
    EXPECT_EQ(max_abs_diff(g[0].data(), want), 0.0) << "create_graph " << create_graph;
    const Tensor rounded = w - exp(y.to(DType::BFloat16)).to(DType::Float32) * sum(w, {1}, true);
    EXPECT_GT(max_abs_diff(rounded, want), 0.0);  // (the two differ on this input)
  }
}

TEST(BFloat16, GradientsThroughBfloat16OpsAreFloat32AndExact) {
  // y = tanh(a16) * a16 + c, a16 the bfloat16 copy of a (autocast's recorded cast), c float32:
  //   tanh and * write bfloat16, + with the float32 c writes float32. The gradient of a bfloat16
  //   value is float32, and each rule computes in float32 from the bfloat16 values it kept:
  //   da = (1 * A) * (1 - T^2) + T,  A = a16, T = tanh(a16) as stored;  dc = 1 summed over rows
  const Tensor a0 = rnd({4, 12}, 3).to(DType::Float32);
  Variable a(a0, true), c(rnd({12}, 4).to(DType::Float32), true);
  Variable y;
  {
    AutocastGuard guard;
    const Variable a16 = autocast(a);
    ASSERT_EQ(a16.dtype(), DType::BFloat16);
    const Variable t = tanh(a16);
    EXPECT_EQ(t.dtype(), DType::BFloat16);
    y = t * a16 + c;
  }
  EXPECT_EQ(y.dtype(), DType::Float32);
  sum(y).backward();
  ASSERT_EQ(a.grad().dtype(), DType::Float32);
  const std::vector<float> av = a0.to(DType::BFloat16).to_vector<float>();
  const std::vector<float> tv = tanh(a0.to(DType::BFloat16)).to_vector<float>();
  const std::vector<float> got = a.grad().to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i) {
    const float A = av[i], T = tv[i];
    EXPECT_EQ(got[i], (1.0f * A) * (1.0f - T * T) + T) << i;
  }
  EXPECT_EQ(max_abs_diff(c.grad(), full({12}, 4.0)), 0.0);
}

TEST(BFloat16, SwigluAndRopeTakeBfloat16ValuesAsTheComposedOpsRoundThem) {
  // SwiGLU on a bfloat16 x = [a | u] is silu(a) rounded to bfloat16, times u, rounded again (as
  // PyTorch's bfloat16 silu and mul compose); its gradient is float32: da = SiLU'(a) (w u), du = w
  // silu(a) as stored. Each expected value is built here from float32 kernels on the widened values.
  // The bfloat16 x is a transposed view (strides (1, 6)), not the fused kernel's own layout.
  const Tensor x_rows = rnd({10, 6}, 21).to(DType::Float32);
  const Tensor x0 = x_rows.transpose(0, 1);  // (6, 10): a = cols 0..4, u = 5..9
  const Tensor w = rnd({6, 5}, 22).to(DType::Float32);
  const Tensor A = x0.narrow(1, 0, 5).to(DType::BFloat16).to(DType::Float32);
  const Tensor U = x0.narrow(1, 5, 5).to(DType::BFloat16).to(DType::Float32);
  const Tensor S = silu(A).to(DType::BFloat16).to(DType::Float32);  // silu(a) as bfloat16 stores it
  const Tensor want_y = (S * U).to(DType::BFloat16);
  const Tensor want_dx = concat({silu_backward(w * U, A), w * S}, 1);
  for (const bool create_graph : {false, true}) {
    Variable x(x_rows, true);
    Variable y;
    {
      AutocastGuard guard;
      const Variable xt = transpose(autocast(x), 0, 1);
      ASSERT_EQ(xt.data().strides(), (Strides{1, 6}));
      y = swiglu(xt);
    }
    ASSERT_EQ(y.dtype(), DType::BFloat16);
    EXPECT_EQ(max_abs_diff(y.data().to(DType::Float32), want_y.to(DType::Float32)), 0.0);
    const VariableList g = grad({sum(y * Variable(w))}, {x}, {.create_graph = create_graph});
    ASSERT_EQ(g[0].dtype(), DType::Float32);
    EXPECT_EQ(max_abs_diff(g[0].data(), want_dx.transpose(0, 1)), 0.0) << "create_graph " << create_graph;
  }
  const auto dtype_error = [](auto&& fn) {
    try {
      fn();
    } catch (const DTypeError& e) {
      return std::string(e.what());
    }
    return std::string("no DTypeError");
  };
  EXPECT_NE(dtype_error([&] {
              swiglu_backward(ones({6, 5}, DType::BFloat16), x0.contiguous());
            }).find("swiglu_backward: dy is bfloat16 but x is float32"),
            std::string::npos);

  // RoPE on a bfloat16 x (float32 or bfloat16 tables): rotated in float32 on the widened values and
  // rounded once; the gradient (float32) is the float32 rotation back of the float32 dy.
  const auto tables = rotary_tables(8, 7);  // (not a structured binding: clang 14 cannot capture one)
  const Tensor c = tables.first, sn = tables.second;
  const Tensor q0 = rnd({2, 7, 8}, 23).to(DType::Float32), dq = rnd({2, 7, 8}, 24).to(DType::Float32);
  const Tensor Q = q0.to(DType::BFloat16).to(DType::Float32);
  for (const bool interleaved : {false, true}) {
    const Tensor want = rotary_embedding(Q, c, sn, interleaved).to(DType::BFloat16).to(DType::Float32);
    const Tensor q16 = q0.to(DType::BFloat16);
    EXPECT_EQ(max_abs_diff(rotary_embedding(q16, c, sn, interleaved).to(DType::Float32), want), 0.0);
    const Tensor c16 = c.to(DType::BFloat16), s16 = sn.to(DType::BFloat16);
    const Tensor want16 = rotary_embedding(Q, c16.to(DType::Float32), s16.to(DType::Float32), interleaved);
    EXPECT_EQ(max_abs_diff(rotary_embedding(q16, c16, s16, interleaved).to(DType::Float32),
                           want16.to(DType::BFloat16).to(DType::Float32)),
              0.0);
    nn::RotaryEmbedding rope(8, {.max_seq_len = 7, .interleaved = interleaved});
    Variable q(q0, true);
    Variable r;
    {
      AutocastGuard guard;
      r = rope(autocast(q));
    }
    ASSERT_EQ(r.dtype(), DType::BFloat16);
    EXPECT_EQ(max_abs_diff(r.data().to(DType::Float32), want), 0.0);
    sum(r * Variable(dq)).backward();
    EXPECT_EQ(max_abs_diff(q.grad(), rotary_embedding_backward(dq, c, sn, interleaved)), 0.0);
    // The functional form with bfloat16 tables: the float32 gradient is rotated back with the
    // widened tables (a DTypeError at backward once), plain and under create_graph.
    for (const bool create_graph : {false, true}) {
      Variable p(q0, true);
      Variable rp;
      {
        AutocastGuard guard;
        rp = rotary_embedding(autocast(p), c16, s16, interleaved);
      }
      EXPECT_EQ(max_abs_diff(rp.data().to(DType::Float32), want16.to(DType::BFloat16).to(DType::Float32)), 0.0);
      const VariableList g = grad({sum(rp * Variable(dq))}, {p}, {.create_graph = create_graph});
      ASSERT_EQ(g[0].dtype(), DType::Float32);
      const Tensor back = rotary_embedding_backward(dq, c16.to(DType::Float32), s16.to(DType::Float32), interleaved);
      EXPECT_EQ(max_abs_diff(g[0].data(), back), 0.0) << "create_graph " << create_graph;
    }
  }
  EXPECT_NE(dtype_error([&] {
              rotary_embedding(q0.to(DType::BFloat16), c.to(DType::Float64), sn.to(DType::Float64));
            }).find("rotary_embedding: input bfloat16, cos float64 and sin float64 must be bfloat16 or float32"),
            std::string::npos);
}

TEST(BFloat16, SwigluAndRopeGiveTheComposedBitsInEveryLayout) {
  // The same rule on every layout of the bfloat16 operand: an offset view, an expanded one (stride 0),
  // a transposed one, a zero-size one; each against the float32 kernels on the widened values, and
  // the backward against the float32 rule with silu(a) as bfloat16 stores it.
  const auto bf16 = [](const Tensor& t) { return t.to(DType::BFloat16); };
  const auto f32 = [](const Tensor& t) { return t.to(DType::Float32); };
  const Tensor base = bf16(rnd({5, 12}, 41).to(DType::Float32));  // rows of [a | u], 6 + 6
  const std::vector<std::pair<std::string, Tensor>> layouts = {
      {"offset", base.narrow(0, 2, 3).narrow(1, 1, 10)},  // (3, 10): storage offset 25, row stride 12
      {"expanded", base.narrow(0, 1, 1).expand({4, 12})},
      {"transposed", bf16(rnd({8, 3}, 42).to(DType::Float32)).transpose(0, 1)},
      {"zero-size", base.narrow(0, 0, 0)}};
  for (const auto& [name, x] : layouts) {
    SCOPED_TRACE(name);
    const int64_t half = x.size(1) / 2;
    const Tensor A = f32(x.narrow(1, 0, half)), U = f32(x.narrow(1, half, half));
    const Tensor S = f32(bf16(silu(A)));
    const Tensor y = swiglu(x);
    ASSERT_EQ(y.dtype(), DType::BFloat16);
    ASSERT_EQ(y.shape(), (Shape{x.size(0), half}));
    EXPECT_EQ(f32(y).to_vector<float>(), f32(bf16(S * U)).to_vector<float>());
    const Tensor dy = rnd({x.size(0), half}, 43).to(DType::Float32);
    const Tensor dx = swiglu_backward(dy, x);
    ASSERT_EQ(dx.dtype(), DType::Float32);
    EXPECT_EQ(dx.to_vector<float>(), concat({silu_backward(dy * U, A), dy * S}, 1).to_vector<float>());
  }
  // RoPE, (B, T, d) = (2, 5, 6): the same four kinds of view of a bfloat16 x, and of the float32 dy
  // its backward reads; float32 and bfloat16 tables, whole or an offset view of longer ones (as
  // nn::RotaryEmbedding narrows them at a start position).
  const auto view = [](const std::string& kind, uint64_t seed, DType dt) {
    const Tensor q = rnd({3, 6, 8}, seed).to(DType::Float32).to(dt);
    if (kind == "offset") return q.narrow(0, 1, 2).narrow(1, 1, 5).narrow(2, 2, 6);
    if (kind == "expanded") return q.narrow(0, 0, 1).narrow(1, 0, 5).narrow(2, 0, 6).expand({2, 5, 6});
    if (kind == "transposed") return q.narrow(1, 0, 6).narrow(2, 0, 5).transpose(1, 2).narrow(0, 0, 2);
    return q.narrow(0, 0, 0).narrow(1, 0, 5).narrow(2, 0, 6);  // zero-size
  };
  const auto whole = rotary_tables(6, 5), longer = rotary_tables(6, 9);
  for (const std::string kind : {"offset", "expanded", "transposed", "zero-size"}) {
    const Tensor x = view(kind, 44, DType::BFloat16), dy = view(kind, 46, DType::Float32);
    ASSERT_EQ(x.shape(), (Shape{kind == "zero-size" ? 0 : 2, 5, 6}));
    for (const bool interleaved : {false, true})
      for (const bool bf16_tables : {false, true})
        for (const bool offset_tables : {false, true}) {
          SCOPED_TRACE(kind + (interleaved ? " interleaved" : " halves") + (bf16_tables ? " bf16 tables" : "") +
                       (offset_tables ? " offset tables" : ""));
          Tensor ct = offset_tables ? longer.first.narrow(0, 3, 5) : whole.first;
          Tensor st = offset_tables ? longer.second.narrow(0, 3, 5) : whole.second;
          if (bf16_tables) ct = bf16(ct), st = bf16(st);
          const Tensor y = rotary_embedding(x, ct, st, interleaved);
          ASSERT_EQ(y.dtype(), DType::BFloat16);
          ASSERT_EQ(y.shape(), x.shape());
          const Tensor c32 = f32(ct).contiguous(), s32 = f32(st).contiguous();
          EXPECT_EQ(f32(y).to_vector<float>(),
                    f32(bf16(rotary_embedding(f32(x).contiguous(), c32, s32, interleaved))).to_vector<float>());
          const Tensor dx = rotary_embedding_backward(dy, ct, st, interleaved);
          ASSERT_EQ(dx.dtype(), DType::Float32);
          EXPECT_EQ(dx.to_vector<float>(),
                    rotary_embedding_backward(dy.contiguous(), c32, s32, interleaved).to_vector<float>());
        }
  }
}

TEST(BFloat16, IndexingABfloat16ValueGivesAFloat32Gradient) {
  // index's rule built its zeros in x's dtype, bfloat16, and then added the float32 gradient into
  // them: a DTypeError at backward. Rows 2, 0, 2 of a16: row 2 gets two contributions.
  Variable a(from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}), true);
  const Tensor rows = from_vector<int64_t>({2, 0, 2}, {3});
  const Variable w(from_vector<float>({1, 10, 100, 1000, 1e4f, 1e5f}, {3, 2}));
  Variable y;
  {
    AutocastGuard guard;
    y = index_get(autocast(a), {rows}) * w;  // bfloat16 rows times float32: float32
  }
  ASSERT_EQ(y.dtype(), DType::Float32);
  sum(y).backward();
  ASSERT_EQ(a.grad().dtype(), DType::Float32);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{100, 1000, 0, 0, 1 + 1e4f, 10 + 1e5f}));
}

TEST(BFloat16, DropoutOnABfloat16ValueDropsWhatFloat32DropsAndStaysBfloat16) {
  // y = x16 * m16, m16 = 0 or bfloat16(1 / 0.7) (PyTorch's mask is in x's dtype too); dx = dy * m16
  const Tensor x0 = rnd({6, 40}, 31).to(DType::Float32), w = rnd({6, 40}, 32).to(DType::Float32);
  Variable a(x0, true), b(x0, true);
  Generator g16(5), g32(5);
  Variable y16;
  {
    AutocastGuard guard;
    y16 = dropout(autocast(a), 0.3, true, g16);
  }
  const Variable y32 = dropout(b, 0.3, true, g32);
  ASSERT_EQ(y16.dtype(), DType::BFloat16);
  sum(y16 * Variable(w)).backward();
  const float scale = static_cast<float>(bfloat16(1.0f / static_cast<float>(1 - 0.3)));
  const std::vector<float> x16 = x0.to(DType::BFloat16).to_vector<float>(), wv = w.to_vector<float>();
  const std::vector<float> got = y16.data().to_vector<float>(), kept32 = y32.data().to_vector<float>();
  const std::vector<float> grad = a.grad().to_vector<float>();
  int dropped = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool kept = kept32[i] != 0;  // (no element of x0 is 0)
    dropped += !kept;
    EXPECT_EQ(got[i], kept ? static_cast<float>(bfloat16(x16[i] * scale)) : 0.0f) << i;
    EXPECT_EQ(grad[i], kept ? wv[i] * scale : 0.0f) << i;
  }
  EXPECT_GT(dropped, 40);  // about 30% of 240
  EXPECT_LT(dropped, 110);
}

TEST(BFloat16, NormsAndLossesReadABfloat16ValueWidenedUnderAutocastAndRefuseItOutside) {
  // Under autocast, layer_norm, rms_norm and the losses run in float32, as PyTorch's autocast runs
  // them: a bfloat16 input is widened (exact, a recorded cast whose gradient passes through). So
  // value and gradient equal the same ops on the widened float32 values, bit for bit.
  const Tensor x0 = rnd({4, 10}, 51).to(DType::Float32), w0 = rnd({10}, 52).to(DType::Float32);
  const Tensor x16f = x0.to(DType::BFloat16).to(DType::Float32);  // what the ops should see
  const Tensor targets = from_vector<int64_t>({3, 0, 9, 3}, {4});
  using Op = std::function<Variable(const Variable&, const Variable&)>;
  const std::vector<std::pair<const char*, Op>> ops = {
      {"layer_norm", [](const Variable& x, const Variable& w) { return sum(layer_norm(x, {10}, w) * w); }},
      {"rms_norm", [](const Variable& x, const Variable& w) { return sum(rms_norm(x, {10}, w) * w); }},
      {"cross_entropy", [&](const Variable& x, const Variable&) { return cross_entropy(x, targets); }},
      {"mse_loss", [](const Variable& x, const Variable& w) { return mse_loss(x, x * w); }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    Variable a(x0, true), w(w0, true), ref_x(x16f, true), ref_w(w0, true);
    Variable loss;
    {
      AutocastGuard guard;
      const Variable a16 = autocast(a);  // the bfloat16 value (what a product's bfloat16 output would be)
      loss = op(a16, w);
    }
    ASSERT_EQ(loss.dtype(), DType::Float32);
    loss.backward();
    const Variable want = op(ref_x, ref_w);
    want.backward();
    EXPECT_EQ(loss.item(), want.item());
    EXPECT_EQ(max_abs_diff(a.grad(), ref_x.grad()), 0.0);
    ASSERT_EQ(w.grad().defined(), ref_w.grad().defined());
    if (ref_w.grad().defined()) EXPECT_EQ(max_abs_diff(w.grad(), ref_w.grad()), 0.0);
  }
  // outside autocast a bfloat16 input is refused, naming the op
  const Variable x16(x0.to(DType::BFloat16));
  EXPECT_THROW(layer_norm(x16, {10}), DTypeError);
  EXPECT_THROW(cross_entropy(x16, targets), DTypeError);
}

TEST(BFloat16, ABfloat16OutputsGradientIsFloat32) {
  Variable a(from_vector<float>({0.3f, -1.7f}, {2}), true);
  Variable y;
  {
    AutocastGuard guard;
    y = autocast(a) * 3.0;  // bfloat16 times a number: bfloat16
  }
  ASSERT_EQ(y.dtype(), DType::BFloat16);
  // given: float32, as every gradient of a bfloat16 value
  y.backward(from_vector<float>({1.0f, 2.0f}, {2}));
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{3.0f, 6.0f}));
  // a bfloat16 gradient is refused, saying what it should be
  Variable y2;
  {
    AutocastGuard guard;
    y2 = autocast(a) * 3.0;
  }
  try {
    y2.backward(ones({2}, DType::BFloat16));
    ADD_FAILURE() << "no DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("the gradient of a bfloat16 value is float32"), std::string::npos) << e.what();
  }
  // implicit, for one element: ones in float32
  Variable b(from_vector<float>({0.5f}, {1}), true);
  Variable z;
  {
    AutocastGuard guard;
    z = autocast(b) * 3.0;
  }
  z.backward();
  EXPECT_EQ(b.grad().to_vector<float>(), std::vector<float>{3.0f});
}

}  // namespace

TEST(BFloat16, WhatDoesNotComputeWithItIsRefusedWithTheOpNamed) {
  const Tensor b = ones({3}, DType::BFloat16);
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const DTypeError& e) {
      return std::string(e.what());
    }
    return std::string("no DTypeError");
  };
  // float64 and int64 do not mix with it (PyTorch would promote; minigrad asks for .to())
  EXPECT_NE(message([&] { add(b, ones({3}, DType::Float64)); }).find("add: dtype mismatch, bfloat16 and float64"),
            std::string::npos);
  EXPECT_NE(message([&] { mul(full({3}, 2, DType::Int64), b); }).find("mul: dtype mismatch"), std::string::npos);
  EXPECT_NE(message([&] { var(b); }).find("var"), std::string::npos);  // so do most reductions
  EXPECT_NE(message([&] { cumsum(b, 0); }).find("cumsum"), std::string::npos);
  EXPECT_NE(message([&] { Variable(b, true); }).find("float"), std::string::npos);  // no gradients of bfloat16
  EXPECT_NE(message([&] {
              matmul(ones({2, 2}, DType::Float64), ones({2, 2}, DType::BFloat16));
            }).find("float32 or bfloat16"),
            std::string::npos);
  nn::Linear lin(3, 2);
  const Tensor w_before = lin.weight.data().clone();
  EXPECT_NE(message([&] { lin.to(DType::BFloat16); }).find("AutocastGuard"), std::string::npos);
  EXPECT_EQ(lin.weight.dtype(), DType::Float32);
  EXPECT_EQ(max_abs_diff(lin.weight.data(), w_before), 0.0);
}
