// Any layout gives the same numbers: the tensor kernels with no differentiable twin (or extra
// arguments the autograd ops do not reach), and zero-size and 0-dim inputs. tests/layouts.h says how.
#include "layouts.h"

using namespace mg;
using namespace layouts;

namespace {

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
      {"sdpa_no_keys",  // every query fully masked: output 0 (PyTorch 2.x)
       {{{1, 2, 3, 4}}, {{1, 2, 0, 4}}, {{1, 2, 0, 4}}},
       [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2]); }},
      {"rms_norm_zero_rows", {{{0, 4}}, {{4}}}, [](const V& v) { return rms_norm(v[0], {4}, v[1]); }},
      {"repeat_zero_size",
       {{{0, 3}}},
       [](const V& v) {
         return repeat(v[0], {2, 2});
       }},
      {"repeat_zero_times",
       {R23},
       [](const V& v) {
         return repeat(v[0], {0, 2});
       }},
      {"flip_scalar", {{{}}}, [](const V& v) { return flip(v[0], {0}); }},
      {"repeat_interleave_scalar", {{{}}}, [](const V& v) { return repeat_interleave(v[0], 3); }},
      {"pad_zero_rows",
       {{{0, 3}}},
       [](const V& v) {
         return pad(v[0], {1, 1}, PadMode::Reflect);
       }},
      {"pad_to_nothing",
       {R23},
       [](const V& v) {
         return pad(v[0], {-2, -1});
       }},
      {"einsum_zero_size",
       {{{0, 3}}, R34},
       [](const V& v) {
         return einsum("ij,jk->ik", {v[0], v[1]});
       }},
      {"einsum_zero_contraction",
       {{{2, 0}}, {{0, 3}}},
       [](const V& v) {
         return einsum("ij,jk->ik", {v[0], v[1]});
       }},
      {"einsum_scalars",
       {{{}}, {{}}},
       [](const V& v) {
         return einsum(",->", {v[0], v[1]});
       }},
      {"diagonal_zero_size", {{{0, 3}}}, [](const V& v) { return diagonal(v[0]); }},
      {"diagonal_past_the_edge", {R23}, [](const V& v) { return diagonal(v[0], 5); }},
      {"scatter_empty_index",
       {R23, {{0, 3}, In::Index, 2}, {{0, 3}}},
       [](const V& v) { return scatter(v[0], 0, v[1].data(), v[2]); }},
      {"index_get_empty", {R23, {{0}, In::Index, 2}}, [](const V& v) { return index_get(v[0], {v[1].data()}); }},
      {"index_put_scalar_values",
       {R23, {{2}, In::Index, 2}, {{}}},
       [](const V& v) { return index_put(v[0], {v[1].data()}, v[2]); }},
      {"masked_select_none",
       {R23, {{3}, In::Mask}},
       [](const V& v) { return masked_select(v[0], zeros({3}, DType::Bool)); }},
      {"rotary_zero_tokens",
       {{{2, 0, 4}}, {{0, 2}}, {{0, 2}}},
       [](const V& v) { return rotary_embedding(v[0], v[1].data(), v[2].data()); }},
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

TEST(Layouts, EveryKernelGivesTheSameNumbersForAnyLayout) {
  for (const OpCase& c : kernel_cases()) check_case(c);
}

TEST(Layouts, ZeroSizeAndZeroDimInputs) {
  for (const OpCase& c : edge_cases()) check_case(c);
}
