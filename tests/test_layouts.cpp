// Any layout gives the same numbers: every op of the autograd headers, and modules whose weights
// are views in other layouts. tests/layouts.h says how; test_layouts_kernels.cpp has the tensor
// kernels and the zero-size and 0-dim cases.
#include "layouts.h"

using namespace mg;
using namespace layouts;

namespace {

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
      {"gelu_tanh", {R23}, [](const V& v) { return gelu(v[0], GeluApproximate::Tanh); }},
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
       [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], {.is_causal = true}); }},
      {"self_attention_qkv", {{{2, 4, 12}}}, [](const V& v) { return self_attention_qkv(v[0], 2, true); }},
      {"sdpa_gqa_scale",
       {{{1, 4, 5, 3}}, {{1, 2, 5, 3}}, {{1, 2, 5, 3}}},
       [](const V& v) {
         return scaled_dot_product_attention(v[0], v[1], v[2], {.is_causal = true, .scale = 0.4, .enable_gqa = true});
       }},
      {"sdpa_bool_mask",  // the composed path; a row with no allowed key gives 0
       {{{2, 2, 5, 3}}, {{2, 2, 4, 3}}, {{2, 2, 4, 3}}, {{5, 4}, In::Mask}},
       [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], {.attn_mask = v[3].data()}); }},
      {"rms_norm", {R234, {{4}}}, [](const V& v) { return rms_norm(v[0], {4}, v[1]); }},
      {"repeat",
       {R23},
       [](const V& v) {
         return repeat(v[0], {2, 1, 2});
       }},
      {"flip",
       {R234},
       [](const V& v) {
         return flip(v[0], {0, 2});
       }},
      {"repeat_interleave", {R234}, [](const V& v) { return repeat_interleave(v[0], 2, 1); }},
      {"repeat_interleave_counts",
       {R34, {{3}, In::Index, 3}},
       [](const V& v) { return repeat_interleave(v[0], v[1].data(), 0); }},
      {"lerp", {R23, R23, {{3}, In::Probability}}, [](const V& v) { return lerp(v[0], v[1], v[2]); }},
      {"addmm", {{{4}}, R23, R34}, [](const V& v) { return addmm(v[0], v[1], v[2], 0.5, 2.0); }},
      {"baddbmm", {{{2, 1, 4}}, R234, {{2, 4, 4}}}, [](const V& v) { return baddbmm(v[0], v[1], v[2], 2.0, 0.5); }},
      {"normalize", {R234}, [](const V& v) { return normalize(v[0], 2.0, 1); }},
      {"cosine_similarity", {R234, {{1, 3, 4}}}, [](const V& v) { return cosine_similarity(v[0], v[1], 2); }},
      {"masked_select", {R234, {{3, 4}, In::Mask}}, [](const V& v) { return masked_select(v[0], v[1].data()); }},
      {"einsum_bmm",
       {R234, {{2, 4, 3}}},
       [](const V& v) {
         return einsum("bij,bjk->bik", {v[0], v[1]});
       }},
      {"einsum_diagonal_outer",
       {{{3, 3}}, R23},
       [](const V& v) {
         return einsum("ii,ji->ij", {v[0], v[1]});
       }},
      {"einsum_ellipsis",
       {R234, {{4, 2}}},
       [](const V& v) {
         return einsum("...ij,jk->k...i", {v[0], v[1]});
       }},
      {"diagonal", {R234}, [](const V& v) { return diagonal(v[0], 1, 0, 2); }},
      {"scatter",
       {R34, {{2, 4}, In::Index, 3}, {{2, 4}}},
       [](const V& v) { return scatter(v[0], 0, v[1].data(), v[2]); }},
      {"scatter_add",
       {R34, {{3, 2}, In::Index, 4}, {{3, 3}}},
       [](const V& v) { return scatter_add(v[0], 1, v[1].data(), v[2]); }},
      {"scatter_reduce_amax",
       {R34, {{2, 4}, In::Index, 3}, {{2, 4}}},
       [](const V& v) { return scatter_reduce(v[0], 0, v[1].data(), v[2], "amax", false); }},
      {"scatter_reduce_mean",
       {R34, {{2, 4}, In::Index, 3}, {{2, 4}}},
       [](const V& v) { return scatter_reduce(v[0], 0, v[1].data(), v[2], "mean"); }},
      {"index_get",
       {R234, {{2, 2}, In::Index, 2}, {{2}, In::Index, 3}},
       [](const V& v) {
         return index_get(v[0], {v[1].data(), v[2].data()});
       }},
      {"index_put_accumulate",
       {R234, {{3}, In::Index, 2}, {{3, 1, 4}}},
       [](const V& v) { return index_put(v[0], {v[1].data()}, v[2], true); }},
      {"pad_constant",
       {R234},
       [](const V& v) {
         return pad(v[0], {1, -1, 2, 0}, PadMode::Constant, 0.5);
       }},
      {"pad_reflect",
       {R234},
       [](const V& v) {
         return pad(v[0], {2, 1, 1, 1}, PadMode::Reflect);
       }},
      {"pad_replicate",
       {R234},
       [](const V& v) {
         return pad(v[0], {1, 2}, PadMode::Replicate);
       }},
      {"pad_circular",
       {R234},
       [](const V& v) {
         return pad(v[0], {4, 1, 0, 3}, PadMode::Circular);
       }},
      {"interpolate_bilinear",
       {{{1, 2, 3, 4}}},
       [](const V& v) {
         return interpolate(v[0], {.size = {5, 3}, .mode = InterpolateMode::Bilinear});
       }},
      {"interpolate_nearest", {R234}, [](const V& v) { return interpolate(v[0], {.scale_factor = {1.5}}); }},
      {"conv_transpose2d",
       {{{2, 2, 3, 3}}, {{2, 3, 2, 2}}, {{3}}},
       [](const V& v) { return conv_transpose2d(v[0], v[1], v[2], {.stride = 2, .output_padding = 1}); }},
      {"rotary_half_split",
       {{{2, 3, 4, 6}}, {{4, 3}}, {{4, 3}}},
       [](const V& v) { return rotary_embedding(v[0], v[1].data(), v[2].data()); }},
      {"rotary_interleaved",
       {{{2, 3, 4, 6}}, {{2, 1, 4, 3}}, {{2, 1, 4, 3}}},
       [](const V& v) { return rotary_embedding(v[0], v[1].data(), v[2].data(), true); }},
      {"sin_cos", {R234}, [](const V& v) { return sin(v[0]) + cos(v[0]); }},
      {"log1p", {P23}, [](const V& v) { return log1p(v[0]); }},
      {"expm1", {R23}, [](const V& v) { return expm1(v[0]); }},
      {"clamp", {R234}, [](const V& v) { return clamp(v[0], -0.5, 0.7); }},
      {"maximum_minimum", {R23, {{3}}}, [](const V& v) { return maximum(v[0], v[1]) * minimum(v[0], v[1]); }},
      {"silu", {R234}, [](const V& v) { return silu(v[0]); }},
      {"swiglu", {R234}, [](const V& v) { return swiglu(v[0]); }},
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
       [](const V& v) {
         return conv2d(v[0], v[1], Variable(), {.padding = PaddingMode::Same, .dilation = 2, .groups = 2});
       }},
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
}  // namespace

TEST(Layouts, EveryAutogradOpGivesTheSameNumbersForAnyLayout) {
  for (const OpCase& c : autograd_cases()) check_case(c);
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
        return std::make_unique<models::GPTBlock>(8, 2, models::GPTBlockOptions{}, g);
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
