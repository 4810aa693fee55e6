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

using namespace mg;
using mgtest::expect_close;

namespace {

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

Tensor make(const In& in, uint64_t seed) {
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
Tensor relayout(const Tensor& t, const std::string& how) {
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

Run run(const OpCase& c, const std::vector<Tensor>& data) {
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

void expect_same(const Run& a, const Run& b, const std::string& where) {
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
void check_case(const OpCase& c) {
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
const In R23{{2, 3}}, R34{{3, 4}}, R234{{2, 3, 4}}, P23{{2, 3}, In::Positive};

std::vector<OpCase> autograd_cases() {
  return {
      {"add", {R23, {{3}}}, [](const V& v) { return v[0] + v[1]; }},
      {"sub", {R234, {{3, 1}}}, [](const V& v) { return v[0] - v[1]; }},
      {"mul", {R23, R23}, [](const V& v) { return v[0] * v[1]; }},
      {"div", {R23, P23}, [](const V& v) { return v[0] / v[1]; }},
      {"neg", {R234}, [](const V& v) { return -v[0]; }},
      {"pow", {P23}, [](const V& v) { return pow(v[0], 2.5); }},
      {"exp", {R234}, [](const V& v) { return exp(v[0]); }},
      {"log", {P23}, [](const V& v) { return log(v[0]); }},
      {"sqrt", {P23}, [](const V& v) { return sqrt(v[0]); }},
      {"abs", {R23}, [](const V& v) { return abs(v[0]); }},
      {"tanh", {R234}, [](const V& v) { return tanh(v[0]); }},
      {"sigmoid", {R23}, [](const V& v) { return sigmoid(v[0]); }},
      {"relu", {R23}, [](const V& v) { return relu(v[0]); }},
      {"gelu", {R234}, [](const V& v) { return gelu(v[0]); }},
      {"gelu_tanh", {R23}, [](const V& v) { return gelu(v[0], "tanh"); }},
      {"masked_fill", {R23, {{2, 3}, In::Mask}}, [](const V& v) { return masked_fill(v[0], v[1].data(), -2); }},
      {"where", {{{2, 3}, In::Mask}, R23, {{3}}}, [](const V& v) { return where(v[0].data(), v[1], v[2]); }},
      {"sum",
       {R234},
       [](const V& v) {
         return sum(v[0], {0, 2});
       }},
      {"sum_all", {R234}, [](const V& v) { return sum(v[0]); }},
      {"mean", {R234}, [](const V& v) { return mean(v[0], {1}, true); }},
      {"max", {R234}, [](const V& v) { return max(v[0], 1).first; }},
      {"max_all", {R23}, [](const V& v) { return max(v[0]); }},
      {"matmul", {R23, R34}, [](const V& v) { return matmul(v[0], v[1]); }},
      {"matmul_batched", {R234, {{2, 4, 3}}}, [](const V& v) { return matmul(v[0], v[1]); }},
      {"matmul_broadcast", {R234, {{4, 2}}}, [](const V& v) { return matmul(v[0], v[1]); }},
      {"matmul_vector", {R34, {{4}}}, [](const V& v) { return matmul(v[0], v[1]); }},
      {"linear", {R234, {{5, 4}}, {{5}}}, [](const V& v) { return linear(v[0], v[1], v[2]); }},
      {"linear_gelu", {R234, {{5, 4}}, {{5}}}, [](const V& v) { return linear_gelu(v[0], v[1], v[2]); }},
      {"reshape",
       {R234},
       [](const V& v) {
         return reshape(v[0], {6, 4});
       }},
      {"flatten", {R234}, [](const V& v) { return flatten(v[0], 1); }},
      {"transpose", {R234}, [](const V& v) { return transpose(v[0], 0, 2); }},
      {"permute",
       {R234},
       [](const V& v) {
         return permute(v[0], {2, 0, 1});
       }},
      {"slice", {R234}, [](const V& v) { return slice(v[0], 2, 0, 4, 3); }},
      {"narrow", {R234}, [](const V& v) { return narrow(v[0], 1, 1, 2); }},
      {"expand",
       {{{3, 1}}},
       [](const V& v) {
         return expand(v[0], {2, 3, 4});
       }},
      {"squeeze", {{{3, 1, 2}}}, [](const V& v) { return squeeze(v[0]); }},
      {"unsqueeze", {R23}, [](const V& v) { return unsqueeze(v[0], 1); }},
      {"concat",
       {R23, {{2, 2}}},
       [](const V& v) {
         return concat({v[0], v[1], v[0]}, 1);
       }},
      {"split",
       {{{2, 5}}},
       [](const V& v) {
         auto p = split(v[0], 2, 1);
         return p[0] * p[1] + sum(p[2]);
       }},
      {"gather", {R34, {{3, 2}, In::Index, 4}}, [](const V& v) { return gather(v[0], 1, v[1].data()); }},
      {"index_select", {R34, {{5}, In::Index, 3}}, [](const V& v) { return index_select(v[0], 0, v[1].data()); }},
      {"embedding", {{{2, 3}, In::Index, 5}, {{5, 4}}}, [](const V& v) { return embedding(v[0].data(), v[1]); }},
      {"embedding_padding",
       {{{2, 3}, In::Index, 5}, {{5, 4}}},
       [](const V& v) { return embedding(v[0].data(), v[1], 2); }},
      {"softmax", {R234}, [](const V& v) { return softmax(v[0], 1); }},
      {"log_softmax", {R234}, [](const V& v) { return log_softmax(v[0], -1); }},
      {"layer_norm", {R234, {{4}}, {{4}}}, [](const V& v) { return layer_norm(v[0], {4}, v[1], v[2]); }},
      {"layer_norm_2d",
       {R234, {{3, 4}}},
       [](const V& v) {
         return layer_norm(v[0], {3, 4}, v[1]);
       }},
      {"dropout",
       {R234},
       [](const V& v) {
         Generator g(3);
         return dropout(v[0], 0.3, true, g);
       }},
      {"cross_entropy", {{{4, 3}}, {{4}, In::Index, 3}}, [](const V& v) { return cross_entropy(v[0], v[1].data()); }},
      {"cross_entropy_none",
       {{{4, 3}}, {{4}, In::Index, 3}},
       [](const V& v) { return cross_entropy(v[0], v[1].data(), {.reduction = Reduction::None}); }},
      {"mse_loss", {R23, R23}, [](const V& v) { return mse_loss(v[0], v[1]); }},
      {"sdpa",
       {{{1, 2, 5, 3}}, {{1, 2, 4, 3}}, {{1, 2, 4, 3}}},
       [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2]); }},
      {"sdpa_causal",
       {{{2, 2, 5, 3}}, {{2, 2, 5, 3}}, {{2, 2, 5, 3}}},
       [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], true); }},
      {"self_attention_qkv", {{{2, 4, 12}}}, [](const V& v) { return self_attention_qkv(v[0], 2, true); }},
      {"sin_cos", {R234}, [](const V& v) { return sin(v[0]) + cos(v[0]); }},
      {"log1p", {P23}, [](const V& v) { return log1p(v[0]); }},
      {"expm1", {R23}, [](const V& v) { return expm1(v[0]); }},
      {"clamp", {R234}, [](const V& v) { return clamp(v[0], -0.5, 0.7); }},
      {"maximum_minimum", {R23, {{3}}}, [](const V& v) { return maximum(v[0], v[1]) * minimum(v[0], v[1]); }},
      {"silu", {R234}, [](const V& v) { return silu(v[0]); }},
      {"softplus", {R23}, [](const V& v) { return softplus(v[0], 2.0, 1.0); }},
      {"leaky_relu", {R23}, [](const V& v) { return leaky_relu(v[0], 0.1); }},
      {"elu", {R23}, [](const V& v) { return elu(v[0], 1.2); }},
      {"min", {R234}, [](const V& v) { return min(v[0], 2, true).first; }},
      {"min_all", {R23}, [](const V& v) { return min(v[0]); }},
      {"var",
       {R234},
       [](const V& v) {
         return var(v[0], {0, 2});
       }},
      {"std", {R234}, [](const V& v) { return mg::std(v[0], {1}, 0, true); }},
      {"prod", {R234}, [](const V& v) { return prod(v[0], 1); }},
      {"prod_all", {R23}, [](const V& v) { return prod(v[0]); }},
      {"cumsum", {R234}, [](const V& v) { return cumsum(v[0], 1); }},
      {"logsumexp",
       {R234},
       [](const V& v) {
         return logsumexp(v[0], {0, 2});
       }},
      {"topk", {R234}, [](const V& v) { return topk(v[0], 2, 1).first; }},
      {"topk_smallest", {R234}, [](const V& v) { return topk(v[0], 3, -1, false).first; }},
      {"sort", {R234}, [](const V& v) { return sort(v[0], 0, true).first; }},
      {"stack",
       {R23, R23},
       [](const V& v) {
         return stack({v[0], v[1], v[0]}, 2);
       }},
      {"unflatten",
       {{{2, 6}}},
       [](const V& v) {
         return unflatten(v[0], 1, {3, 2});
       }},
      {"chunk",
       {{{2, 5}}},
       [](const V& v) {
         auto p = chunk(v[0], 3, 1);
         return p[0] * p[1] + sum(p[2]);
       }},
      {"cross_entropy_weighted_smoothing",
       {{{4, 3}}, {{4}, In::Index, 3}, {{3}, In::Positive}},
       [](const V& v) { return cross_entropy(v[0], v[1].data(), {.weight = v[2].data(), .label_smoothing = 0.2}); }},
      {"nll_loss",
       {{{4, 3}}, {{4}, In::Index, 3}, {{3}, In::Positive}},
       [](const V& v) { return nll_loss(v[0], v[1].data(), {.weight = v[2].data()}); }},
      {"bce",
       {{{2, 3}, In::Probability}, {{2, 3}, In::Probability}, {{3}, In::Positive}},
       [](const V& v) { return binary_cross_entropy(v[0], v[1], {.weight = v[2].data()}); }},
      {"bce_with_logits",
       {R23, {{2, 3}, In::Probability}, {{2, 1}, In::Positive}, {{3}, In::Positive}},
       [](const V& v) {
         return binary_cross_entropy_with_logits(v[0], v[1], {.weight = v[2].data(), .pos_weight = v[3].data()});
       }},
      {"kl_div",
       {R23, {{2, 3}, In::Probability}},
       [](const V& v) { return kl_div(v[0], v[1], {.reduction = Reduction::BatchMean}); }},
      {"kl_div_log_target",
       {R23, R23},
       [](const V& v) { return kl_div(v[0], v[1], {.reduction = Reduction::Sum, .log_target = true}); }},
      {"l1_loss", {R23, R23}, [](const V& v) { return l1_loss(v[0], v[1]); }},
      {"smooth_l1_loss",
       {R23, R23},
       [](const V& v) { return smooth_l1_loss(v[0], v[1], {.reduction = Reduction::None, .beta = 0.5}); }},
      {"huber_loss", {R23, R23}, [](const V& v) { return huber_loss(v[0], v[1], {.delta = 0.5}); }},
      {"conv2d",
       {{{2, 3, 5, 4}}, {{4, 3, 3, 2}}, {{4}}},
       [](const V& v) {
         return conv2d(v[0], v[1], v[2], {.stride = {2, 1}, .padding = 1});
       }},
      {"conv2d_groups_dilation",
       {{{2, 4, 6, 5}}, {{2, 2, 2, 2}}},
       [](const V& v) { return conv2d(v[0], v[1], Variable(), {.padding = "same", .dilation = 2, .groups = 2}); }},
      {"conv2d_pointwise", {{{2, 3, 4, 5}}, {{2, 3, 1, 1}}}, [](const V& v) { return conv2d(v[0], v[1]); }},
      {"conv1d",
       {{{2, 3, 7}}, {{2, 3, 3}}, {{2}}},
       [](const V& v) { return conv1d(v[0], v[1], v[2], {.stride = 2, .padding = 1}); }},
      {"max_pool2d",
       {{{2, 3, 5, 6}}},
       [](const V& v) { return max_pool2d(v[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true}); }},
      {"avg_pool2d",
       {{{2, 3, 5, 6}}},
       [](const V& v) { return avg_pool2d(v[0], 2, {.stride = 1, .padding = 1, .count_include_pad = false}); }},
      {"adaptive_avg_pool2d",
       {{{2, 3, 5, 6}}},
       [](const V& v) {
         return adaptive_avg_pool2d(v[0], {2, 4});
       }},
      {"batch_norm_train",
       {{{4, 3, 2, 2}}, {{3}}, {{3}}},
       [](const V& v) { return batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], true); }},
      {"batch_norm_eval",
       {{{4, 3, 2}}, {{3}}, {{3}, In::Positive}, {{3}}},
       [](const V& v) { return batch_norm(v[0], v[3].data(), v[2].data(), v[1], Variable(), false); }},
      {"group_norm", {{{2, 6, 2, 3}}, {{6}}, {{6}}}, [](const V& v) { return group_norm(v[0], 3, v[1], v[2]); }},
      {"recurrence_lstm",
       {{{4, 2, 12}}, {{2, 3}}, {{12, 3}}, {{12}}, {{2, 3}}},
       [](const V& v) { return recurrence(RNNKind::LSTM, v[0], v[1], v[4], v[2], v[3]); }},
      {"recurrence_gru_reverse",
       {{{4, 2, 9}}, {{2, 3}}, {{9, 3}}, {{9}}},
       [](const V& v) { return recurrence(RNNKind::GRU, v[0], v[1], Variable(), v[2], v[3], true); }},
      {"recurrence_tanh",
       {{{3, 2, 3}}, {{2, 3}}, {{3, 3}}},
       [](const V& v) { return recurrence(RNNKind::Tanh, v[0], v[1], Variable(), v[2]); }},
  };
}

// Kernels with no differentiable twin, or whose extra arguments the autograd ops do not reach.
std::vector<OpCase> kernel_cases() {
  auto k = [](std::string name, std::vector<In> in, std::function<Tensor(const std::vector<Tensor>&)> f) {
    return OpCase{std::move(name), std::move(in),
                  [f](const V& v) {
                    std::vector<Tensor> t;
                    for (const Variable& x : v) t.push_back(x.data());
                    return Variable(f(t));
                  },
                  false};
  };
  return {
      k("eq", {R23, {{3}}}, [](const auto& t) { return eq(t[0], t[1]); }),
      k("lt", {R23, R23}, [](const auto& t) { return lt(t[0], t[1]); }),
      k("maximum", {R23, {{2, 1}}}, [](const auto& t) { return maximum(t[0], t[1]); }),
      k("sign", {R234}, [](const auto& t) { return sign(t[0]); }),
      k("logical_not", {{{2, 3}, In::Mask}}, [](const auto& t) { return logical_not(t[0]); }),
      k("argmax", {R234}, [](const auto& t) { return argmax(t[0], 2); }),
      k("argmax_dim0", {R234}, [](const auto& t) { return argmax(t[0], 0); }),
      k("sum_to_shape", {R234},
        [](const auto& t) {
          return sum_to_shape(t[0], {3, 1});
        }),
      k("one_hot", {{{2, 3}, In::Index, 4}}, [](const auto& t) { return one_hot(t[0], 4, DType::Float64); }),
      k("scatter_add", {R34, {{2, 4}, In::Index, 3}, {{2, 4}}},
        [](const auto& t) { return scatter_add(t[0], 0, t[1], t[2]); }),
      k("index_add", {R34, {{2}, In::Index, 3}, {{2, 4}}},
        [](const auto& t) { return index_add(t[0], 0, t[1], t[2]); }),
      k("embedding_backward", {{{2, 3, 4}}, {{2, 3}, In::Index, 5}},
        [](const auto& t) { return embedding_backward(t[0], t[1], 5, 1); }),
      k("tril", {R234}, [](const auto& t) { return tril(t[0], 1); }),
      k("triu", {R34}, [](const auto& t) { return triu(t[0], -1); }),
      k("stack", {R23, R23},
        [](const auto& t) {
          return stack({t[0], t[1]}, 1);
        }),
      k("copy_", {R23, {{3}}},
        [](const auto& t) {
          Tensor out = empty({2, 3}, DType::Float64);
          return out.copy_(t[1]) + t[0];
        }),
      k("to_float32", {R234}, [](const auto& t) { return t[0].to(DType::Float32).to(DType::Float64); }),
      k("clone", {R234}, [](const auto& t) { return t[0].clone(); }),
      k("layer_norm_backward", {R234, R234, {{4}}},
        [](const auto& t) {
          const LayerNormForward f = layer_norm_forward(t[1], {4}, t[2], Tensor(), 1e-5);
          const LayerNormGrads g = layer_norm_backward(t[0], t[1], t[2], f.mean, f.rstd, {4}, true, true);
          return concat({g.dx.reshape({-1}), g.dweight, g.dbias}, 0);
        }),
      k("cross_entropy_backward", {{{4}}, {{4, 3}}, {{4}, In::Index, 3}},
        [](const auto& t) {
          const CrossEntropyOptions o{.reduction = Reduction::None, .label_smoothing = 0.1};
          const CrossEntropyForward f = cross_entropy_forward(t[1], t[2], o);
          return cross_entropy_backward(t[0], t[2], f, o);
        }),
      k("attention_backward", {{{1, 2, 4, 3}}, {{1, 2, 4, 3}}, {{1, 2, 4, 3}}, {{1, 2, 4, 3}}},
        [](const auto& t) {
          const AttentionForward f = attention_forward(t[1], t[2], t[3], true);
          auto [dq, dk, dv] = attention_backward(t[0], t[1], t[2], t[3], f, true);
          return concat({dq.reshape({-1}), dk.reshape({-1}), dv.reshape({-1})}, 0);
        }),
      k("argmin", {R234}, [](const auto& t) { return argmin(t[0], 1); }),
      k("argsort", {R234}, [](const auto& t) { return argsort(t[0], 2, true); }),
      k("topk_indices", {R234}, [](const auto& t) { return topk(t[0], 2, 0).second; }),
      k("cumsum_reverse", {R234}, [](const auto& t) { return cumsum(t[0], 2, true); }),
      k("clamp_backward", {R23, R23}, [](const auto& t) { return clamp_backward(t[0], t[1], -0.3, std::nullopt); }),
      k("prod_backward", {{{2}}, R23}, [](const auto& t) { return prod_backward(t[0], t[1], 1); }),
      k("multinomial", {{{3, 5}, In::Positive}},
        [](const auto& t) {
          Generator g(11);
          return multinomial(t[0], 4, true, g);
        }),
      k("multinomial_no_replacement", {{{3, 5}, In::Positive}},
        [](const auto& t) {
          Generator g(12);
          return multinomial(t[0], 3, false, g);
        }),
      k("max_pool2d_indices", {{{2, 3, 5, 6}}},
        [](const auto& t) {
          return max_pool2d(t[0], Pool2dArgs{.kernel_h = 2, .kernel_w = 3, .stride_h = 1, .stride_w = 2}).indices;
        }),
      k("conv2d_backward", {{{2, 2, 3, 3}}, {{2, 3, 5, 5}}, {{2, 3, 3, 3}}},
        [](const auto& t) {
          const Conv2dGrads g = conv2d_backward(
              t[0], t[1], t[2],
              Conv2dArgs{.stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1},
              true, true, true);
          return concat({g.dx.reshape({-1}), g.dweight.reshape({-1}), g.dbias}, 0);
        }),
      k("adam_step_", {R23, R23},
        [](const auto& t) {
          Tensor p = t[0].clone(), m = zeros({2, 3}, DType::Float64), v = zeros({2, 3}, DType::Float64);
          adam_step_(
              p, t[1], m, v,
              {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1, .step = 1, .decoupled = true});
          return concat({p.reshape({-1}), m.reshape({-1}), v.reshape({-1})}, 0);
        }),
  };
}

// Zero-size and 0-dim inputs: each runs, and its layouts agree, like any other case.
std::vector<OpCase> edge_cases() {
  return {
      {"add_zero_size", {{{0, 3}}, {{3}}}, [](const V& v) { return v[0] + v[1]; }},
      {"add_scalar", {{{}}, R23}, [](const V& v) { return v[0] * v[1]; }},
      {"sum_zero_size", {{{0, 3}}}, [](const V& v) { return sum(v[0], {0}); }},
      {"sum_scalar_dim0", {{{}}}, [](const V& v) { return sum(v[0], {0}); }},
      {"mean_scalar", {{{}}}, [](const V& v) { return mean(v[0]); }},
      {"softmax_scalar", {{{}}}, [](const V& v) { return softmax(v[0], 0); }},
      {"softmax_zero_rows", {{{0, 4}}}, [](const V& v) { return softmax(v[0], 1); }},
      {"matmul_zero_k", {{{2, 0}}, {{0, 3}}}, [](const V& v) { return matmul(v[0], v[1]); }},
      {"matmul_zero_rows", {{{0, 4}}, {{4, 2}}}, [](const V& v) { return matmul(v[0], v[1]); }},
      {"linear_zero_batch", {{{0, 4}}, {{3, 4}}, {{3}}}, [](const V& v) { return linear(v[0], v[1], v[2]); }},
      {"linear_zero_in", {{{2, 0}}, {{3, 0}}, {{3}}}, [](const V& v) { return linear(v[0], v[1], v[2]); }},
      {"linear_gelu_zero_batch", {{{0, 4}}, {{3, 4}}, {{3}}}, [](const V& v) { return linear_gelu(v[0], v[1], v[2]); }},
      {"linear_gelu_zero_out", {{{2, 4}}, {{0, 4}}, {{0}}}, [](const V& v) { return linear_gelu(v[0], v[1], v[2]); }},
      {"layer_norm_zero_rows", {{{0, 4}}, {{4}}}, [](const V& v) { return layer_norm(v[0], {4}, v[1]); }},
      {"concat_zero",
       {{{2, 0}}, R23},
       [](const V& v) {
         return concat({v[0], v[1]}, 1);
       }},
      {"index_select_empty_index",
       {R34, {{0}, In::Index, 3}},
       [](const V& v) { return index_select(v[0], 0, v[1].data()); }},
      {"embedding_zero_dim", {{{2}, In::Index, 4}, {{4, 0}}}, [](const V& v) { return embedding(v[0].data(), v[1]); }},
      {"cross_entropy_zero_rows",
       {{{0, 3}}, {{0}, In::Index, 3}},
       [](const V& v) { return cross_entropy(v[0], v[1].data(), {.reduction = Reduction::Sum}); }},
      {"sdpa_no_queries",
       {{{1, 2, 0, 3}}, {{1, 2, 4, 3}}, {{1, 2, 4, 3}}},
       [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2]); }},
      {"gelu_scalar", {{{}}}, [](const V& v) { return gelu(v[0]); }},
      {"var_zero_rows", {{{0, 3}}}, [](const V& v) { return var(v[0], {1}); }},
      {"prod_zero_size", {{{2, 0}}}, [](const V& v) { return prod(v[0], 1); }},
      {"prod_scalar", {{{}}}, [](const V& v) { return prod(v[0]); }},
      {"cumsum_zero_size", {{{0, 3}}}, [](const V& v) { return cumsum(v[0], 0); }},
      {"cumsum_scalar", {{{}}}, [](const V& v) { return cumsum(v[0], 0); }},
      {"logsumexp_zero_rows", {{{0, 3}}}, [](const V& v) { return logsumexp(v[0], {1}); }},
      {"topk_zero_k", {R23}, [](const V& v) { return topk(v[0], 0, 1).first; }},
      {"sort_scalar", {{{}}}, [](const V& v) { return sort(v[0], 0).first; }},
      {"stack_scalars",
       {{{}}, {{}}},
       [](const V& v) {
         return stack({v[0], v[1]}, 0);
       }},
      {"conv2d_zero_batch",
       {{{0, 3, 4, 4}}, {{2, 3, 3, 3}}, {{2}}},
       [](const V& v) { return conv2d(v[0], v[1], v[2]); }},
      {"conv2d_zero_in_channels",
       {{{2, 0, 4, 4}}, {{2, 0, 3, 3}}, {{2}}},
       [](const V& v) { return conv2d(v[0], v[1], v[2]); }},
      {"conv2d_zero_out_channels", {{{2, 3, 4, 4}}, {{0, 3, 3, 3}}}, [](const V& v) { return conv2d(v[0], v[1]); }},
      {"max_pool2d_zero_channels", {{{2, 0, 4, 4}}}, [](const V& v) { return max_pool2d(v[0], 2); }},
      {"group_norm_zero_batch", {{{0, 4, 3}}, {{4}}}, [](const V& v) { return group_norm(v[0], 2, v[1]); }},
      {"l1_loss_zero_size_sum",
       {{{0, 3}}, {{0, 3}}},
       [](const V& v) { return l1_loss(v[0], v[1], {.reduction = Reduction::Sum}); }},
  };
}
}  // namespace

TEST(Layouts, EveryAutogradOpGivesTheSameNumbersForAnyLayout) {
  for (const OpCase& c : autograd_cases()) check_case(c);
}

TEST(Layouts, EveryKernelGivesTheSameNumbersForAnyLayout) {
  for (const OpCase& c : kernel_cases()) check_case(c);
}

TEST(Layouts, ZeroSizeAndZeroDimInputs) {
  for (const OpCase& c : edge_cases()) check_case(c);
}

TEST(Layouts, ModulesWithParametersInAnyLayout) {
  // A module's weights replaced by non-contiguous views with the same values (set_data): the
  // output and every parameter's gradient equal those of the contiguous weights.
  auto check_module = [](auto make, const Tensor& x) {
    auto a = make(), b = make();
    a->to(DType::Float64), b->to(DType::Float64);
    for (size_t i = 0; i < a->parameters().size(); ++i) {
      const Tensor t = a->parameters()[i].data();
      Tensor alt = relayout(t, t.dim() >= 2 ? "transposed" : "strided");
      b->parameters()[i].set_data(alt);
    }
    Variable ya = a->forward(Variable(x)), yb = b->forward(Variable(x));
    expect_close(yb.data(), ya.data(), 1e-12, 1e-12);
    sum(ya * ya).backward();
    sum(yb * yb).backward();
    for (size_t i = 0; i < a->parameters().size(); ++i)
      expect_close(b->parameters()[i].grad(), a->parameters()[i].grad(), 1e-12, 1e-12);
  };
  Generator g(5);
  const Tensor x = randn({2, 3, 8}, g, DType::Float64);
  check_module(
      [] {
        Generator g(1);
        return std::make_unique<nn::Linear>(8, 5, nn::LinearOptions{}, g);
      },
      x);
  check_module([] { return std::make_unique<nn::LayerNorm>(Shape{8}); }, x);
  check_module(
      [] {
        Generator g(2);
        return std::make_unique<nn::GPTBlock>(8, 2, nn::GPTBlockOptions{}, g);
      },
      x);
  struct Attn : nn::MultiheadAttention {
    using nn::MultiheadAttention::MultiheadAttention;
    Variable forward(const Variable& v) const { return nn::MultiheadAttention::forward(v, {.is_causal = true}).output; }
  };
  check_module(
      [] {
        Generator g(3);
        return std::make_unique<Attn>(8, 2, nn::MultiheadAttentionOptions{}, g);
      },
      x);
  const Tensor img = randn({2, 4, 5, 6}, g, DType::Float64);
  check_module(
      [] {
        Generator g(4);
        return std::make_unique<nn::Conv2d>(4, 6, 3, nn::Conv2dOptions{.padding = 1, .groups = 2}, g);
      },
      img);
  check_module(
      [] {
        Generator g(5);
        return std::make_unique<nn::Conv1d>(3, 4, 3, nn::Conv1dOptions{.stride = 2}, g);
      },
      x);
  struct BN : nn::BatchNorm2d {  // with non-trivial weights: ones and zeros would hide a layout bug
    BN() : nn::BatchNorm2d(4) {
      weight.data().copy_(arange(1, 5, 1, DType::Float32)), bias.data().copy_(arange(0, 4, 1, DType::Float32));
    }
  };
  check_module([] { return std::make_unique<BN>(); }, img);
  check_module([] { return std::make_unique<nn::GroupNorm>(2, 4); }, img);
  struct Lstm : nn::LSTM {  // the output sequence of a 2-layer bidirectional LSTM
    Lstm(Generator& g) : nn::LSTM(8, 4, {.num_layers = 2, .batch_first = true, .bidirectional = true}, g) {}
    Variable forward(const Variable& v) const { return std::get<0>(nn::LSTM::forward(v)); }
  };
  check_module(
      [] {
        Generator g(6);
        return std::make_unique<Lstm>(g);
      },
      x);
  struct Gru : nn::GRU {
    Gru(Generator& g) : nn::GRU(8, 5, {}, g) {}
    Variable forward(const Variable& v) const { return std::get<1>(nn::GRU::forward(v)); }
  };
  check_module(
      [] {
        Generator g(7);
        return std::make_unique<Gru>(g);
      },
      x);
}
