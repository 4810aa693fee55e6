#pragma once
// The harness of the layout tests (test_layouts.cpp: the autograd ops and modules;
// test_layouts_kernels.cpp: the tensor kernels, zero-size and 0-dim inputs).
// Any layout gives the same numbers. For every op of the autograd headers and the tensor kernels
// without a differentiable twin, each input in turn is replaced by a view with the same values in
// another layout: transposed, strided (every other element of a wider tensor), offset into a larger
// storage, all dims permuted, and expanded with stride 0 (for inputs whose values repeat along a
// dim). The output and every gradient must equal those of the contiguous run (float64, to 1e-12).
// Weights and index tensors are inputs like any other. Zero-size and 0-dim inputs have cases of
// their own. A kernel that assumes a layout (a unit stride, a row stride of at least a row, no
// offset) fails here, as the fused attention once did for an expanded key.
#include <functional>
#include <numeric>

#include "helpers.h"

namespace layouts {
using namespace mg;
using mgtest::expect_close;

// How to make an input.
struct In {
  Shape shape;
  enum Kind { Real, Positive, Probability, Index, Mask } kind = Real;  // the first three are differentiable
  int64_t index_bound = 0;                                             // Index: values in [0, index_bound)
};
struct OpCase {
  std::string name;
  std::vector<In> inputs;
  std::function<Variable(const std::vector<Variable>&)> fn;
  bool differentiable = true;  // compare the gradients of the real inputs too
};

inline Tensor make(const In& in, uint64_t seed) {
  Generator g(seed);
  switch (in.kind) {
    case In::Real:
      return randn(in.shape, g, DType::Float64);
    case In::Positive:
      return uniform(in.shape, 0.5, 2.0, g, DType::Float64);
    case In::Index:
      return randint(0, in.index_bound, in.shape, g);
    case In::Probability:
      return uniform(in.shape, 0.05, 0.95, g, DType::Float64);
    case In::Mask:
      return lt(uniform(in.shape, 0, 1, g, DType::Float64), scalar_tensor(0.4, DType::Float64));
  }
  return Tensor();
}

// The same values as contiguous `t` in another layout, or undefined when the layout does not apply.
inline Tensor relayout(const Tensor& t, const std::string& how) {
  if (how == "transposed") {
    if (t.dim() < 2) return Tensor();
    return t.transpose(-2, -1).contiguous().transpose(-2, -1);
  }
  if (how == "permuted") {
    if (t.dim() < 3) return Tensor();
    std::vector<int64_t> rev(t.dim());
    std::iota(rev.rbegin(), rev.rend(), 0);
    return t.permute(rev).contiguous().permute(rev);
  }
  if (how == "strided") {
    if (t.dim() == 0) return Tensor();
    Shape wide = t.shape();
    wide.back() *= 2;
    Tensor w = zeros(wide, t.dtype());
    Tensor v = w.slice(-1, 1, wide.back(), 2);  // every other element, from the second: offset and stride
    v.copy_(t);
    return v;
  }
  if (how == "offset") {
    Tensor buf = zeros({t.numel() + 7}, t.dtype());
    Tensor v = buf.narrow(0, 7, t.numel()).view(t.shape());
    v.copy_(t);
    return v;
  }
  return Tensor();
}

struct Run {
  Tensor out;
  std::vector<Tensor> grads;  // per input; undefined for inputs without a gradient
};

inline Run run(const OpCase& c, const std::vector<Tensor>& data) {
  std::vector<Variable> vars;
  for (size_t i = 0; i < data.size(); ++i)
    vars.emplace_back(data[i], c.differentiable && c.inputs[i].kind <= In::Probability);
  Variable y = c.fn(vars);
  Run r{y.data().contiguous(), {}};
  if (c.differentiable && y.requires_grad()) {
    Generator g(99);
    sum(y * Variable(randn(y.shape(), g, y.dtype()))).backward();
  }
  for (const Variable& v : vars)
    r.grads.push_back(v.requires_grad() && v.grad().defined() ? v.grad().contiguous() : Tensor());
  return r;
}

inline void expect_same(const Run& a, const Run& b, const std::string& where) {
  SCOPED_TRACE(where);
  ASSERT_EQ(a.out.shape(), b.out.shape());
  if (a.out.dtype() == DType::Float64)
    expect_close(b.out, a.out, 1e-12, 1e-12);
  else
    EXPECT_EQ(b.out.to_vector<double>(), a.out.to_vector<double>());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    SCOPED_TRACE("gradient of input " + std::to_string(i));
    ASSERT_EQ(a.grads[i].defined(), b.grads[i].defined());
    if (a.grads[i].defined()) expect_close(b.grads[i], a.grads[i], 1e-12, 1e-12);
  }
}

// Every layout of every input of `c`, each against the contiguous run.
inline void check_case(const OpCase& c) {
  SCOPED_TRACE(c.name);
  std::vector<Tensor> base;
  for (size_t i = 0; i < c.inputs.size(); ++i) base.push_back(make(c.inputs[i], 17 + i));
  const Run ref = run(c, base);
  for (size_t i = 0; i < base.size(); ++i)
    for (const char* how : {"transposed", "strided", "offset", "permuted"}) {
      const Tensor alt = relayout(base[i], how);
      if (!alt.defined()) continue;
      std::vector<Tensor> data = base;
      data[i] = alt;
      expect_same(ref, run(c, data), fmt::format("input {} {}", i, how));
    }
  // Expanded: values that repeat along the first dim of size > 1, as a stride-0 view and as a
  // contiguous copy of the same values.
  for (size_t i = 0; i < base.size(); ++i) {
    const Tensor& t = base[i];
    int64_t d = 0;
    while (d < t.dim() && t.size(d) <= 1) ++d;
    if (d == t.dim()) continue;
    const Tensor expanded = t.narrow(d, 0, 1).expand(t.shape());
    std::vector<Tensor> plain = base, exp = base;
    plain[i] = expanded.contiguous();
    exp[i] = expanded;
    expect_same(run(c, plain), run(c, exp), fmt::format("input {} expanded along dim {}", i, d));
  }
}

using V = std::vector<Variable>;
inline const In R23{{2, 3}}, R34{{3, 4}}, R234{{2, 3, 4}}, P23{{2, 3}, In::Positive};

}  // namespace layouts
