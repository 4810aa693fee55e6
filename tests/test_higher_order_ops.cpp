// Second derivatives of every op: gradgradcheck over each op that is differentiable twice, the
// cases matching the last column of docs/03-writing-an-op.md's table, and the typed error naming
// each op that is not.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "higher_order_helpers.h"

using namespace mg;
using mgtest::rnd;
using testing::HasSubstr;
using V = std::vector<Variable>;
using mgtest::away_from_zero;
using mgtest::ints;

namespace {
Tensor f64(const std::vector<double>& v, const Shape& s) { return from_vector<double>(v, s); }
}  // namespace

// ---- gradgradcheck over every op that is differentiable twice (docs/03's table, last column) ----

namespace {
struct OpCase {
  std::string name;
  mgtest::Fn fn;
  std::vector<Tensor> inputs;
};

std::vector<OpCase> twice_differentiable_cases() {
  const Tensor a = rnd({2, 3}, 11), b = rnd({2, 3}, 12), pos = rnd({2, 3}, 13, 0.5, 2), row = rnd({3}, 14);
  const Tensor nz = away_from_zero({2, 3}, 15), mask = gt(rnd({2, 3}, 16), scalar_tensor(0, DType::Float64));
  const Tensor ids = ints({0, 2, 1, 2}, {4}), idx = ints({1, 0, 2, 1, 1, 0}, {2, 3});
  const Tensor targets = ints({0, 2, 1, 2}, {4});
  std::vector<OpCase> c = {
      {"add", [](const V& x) { return x[0] + x[1]; }, {a, row}},
      {"sub", [](const V& x) { return x[0] - x[1]; }, {a, b}},
      {"mul", [](const V& x) { return x[0] * x[1]; }, {a, row}},
      {"div", [](const V& x) { return x[0] / x[1]; }, {a, pos}},
      {"neg", [](const V& x) { return -x[0]; }, {a}},
      {"pow", [](const V& x) { return pow(x[0], 3.5); }, {pos}},
      {"exp", [](const V& x) { return exp(x[0]); }, {a}},
      {"log", [](const V& x) { return log(x[0]); }, {pos}},
      {"sqrt", [](const V& x) { return sqrt(x[0]); }, {pos}},
      {"abs", [](const V& x) { return abs(x[0]) * x[0]; }, {nz}},
      {"sign", [](const V& x) { return sign(x[0]) * x[0] * x[0]; }, {nz}},
      {"tanh", [](const V& x) { return tanh(x[0]); }, {a}},
      {"sigmoid", [](const V& x) { return sigmoid(x[0]); }, {a}},
      {"sin", [](const V& x) { return sin(x[0]); }, {a}},
      {"cos", [](const V& x) { return cos(x[0]); }, {a}},
      {"log1p", [](const V& x) { return log1p(x[0]); }, {pos}},
      {"expm1", [](const V& x) { return expm1(x[0]); }, {a}},
      {"clamp", [](const V& x) { return clamp(x[0] * x[0], 0.2, 0.7); }, {a}},
      {"maximum", [](const V& x) { return maximum(x[0], x[1]) * x[0]; }, {a, b}},
      {"minimum", [](const V& x) { return minimum(x[0], x[1]) * x[1]; }, {a, b}},
      {"masked_fill", [mask](const V& x) { return masked_fill(x[0] * x[0], mask, 2.0); }, {a}},
      {"where", [mask](const V& x) { return where(mask, x[0] * x[1], x[1] * x[1]); }, {a, b}},
      {"relu", [](const V& x) { return relu(x[0]) * x[0]; }, {nz}},
      {"gelu", [](const V& x) { return gelu(x[0]); }, {a}},
      {"gelu_tanh", [](const V& x) { return gelu(x[0], GeluApproximate::Tanh); }, {a}},
      {"silu", [](const V& x) { return silu(x[0]); }, {a}},
      {"swiglu", [](const V& x) { return swiglu(x[0]); }, {rnd({3, 4}, 17)}},
      {"softplus", [](const V& x) { return softplus(x[0], 2.0, 1.0); }, {a}},
      {"leaky_relu", [](const V& x) { return leaky_relu(x[0], 0.2) * x[0]; }, {nz}},
      {"elu", [](const V& x) { return elu(x[0], 0.7); }, {nz}},
      {"tanh_backward", [](const V& x) { return tanh_backward(x[0], x[1]); }, {a, b}},
      {"sigmoid_backward", [](const V& x) { return sigmoid_backward(x[0], x[1]); }, {a, b}},
      {"gelu_backward", [](const V& x) { return gelu_backward(x[0], x[1]); }, {a, b}},
      {"silu_backward", [](const V& x) { return silu_backward(x[0], x[1]); }, {a, b}},
      {"softplus_backward", [](const V& x) { return softplus_backward(x[0], x[1], 1.5, 1.0); }, {a, b}},
      {"elu_backward", [](const V& x) { return elu_backward(x[0], x[1], 0.7); }, {a, nz}},
      {"relu_backward", [](const V& x) { return relu_backward(x[0] * x[0], x[1]); }, {a, nz}},
      {"leaky_relu_backward", [](const V& x) { return leaky_relu_backward(x[0] * x[0], x[1], 0.3); }, {a, nz}},
      {"clamp_backward", [](const V& x) { return clamp_backward(x[0] * x[0], x[1], -0.5, 0.5); }, {a, b}},
      {"reshape",
       [](const V& x) {
         return reshape(x[0] * x[0], {3, 2});
       },
       {a}},
      {"view", [](const V& x) { return view(x[0] * x[0], {6}); }, {a}},
      {"transpose", [](const V& x) { return transpose(x[0], 0, 1) * transpose(x[0], 0, 1); }, {a}},
      {"permute",
       [](const V& x) {
         return permute(x[0] * x[0], {1, 0});
       },
       {a}},
      {"slice", [](const V& x) { return slice(x[0] * x[0], 1, 0, 3, 2); }, {a}},
      {"expand",
       [](const V& x) {
         return expand(x[0], {2, 3}) * expand(x[0], {2, 3});
       },
       {row}},
      {"concat",
       [](const V& x) {
         return concat({x[0] * x[0], x[1]}, 0);
       },
       {a, b}},
      {"sum", [](const V& x) { return sum(x[0] * x[0], {1}); }, {a}},
      {"mean", [](const V& x) { return mean(x[0] * x[0], {0}, true); }, {a}},
      {"max", [](const V& x) { return max(x[0] * x[0], 1).first; }, {a}},
      {"min", [](const V& x) { return min(x[0] * x[1], 0).first; }, {a, b}},
      {"var", [](const V& x) { return var(x[0], {1}); }, {a}},
      {"std", [](const V& x) { return mg::std(x[0], {1}); }, {a}},
      {"logsumexp", [](const V& x) { return logsumexp(x[0], {1}); }, {a}},
      {"matmul",
       [](const V& x) { return matmul(x[0], transpose(x[1], 0, 1)) * matmul(x[0], transpose(x[1], 0, 1)); },
       {a, b}},
      {"linear", [](const V& x) { return pow(linear(x[0], x[1], x[2]), 2); }, {rnd({4, 3}, 17), a, rnd({2}, 18)}},
      {"linear_gelu", [](const V& x) { return linear_gelu(x[0], x[1], x[2]); }, {rnd({4, 3}, 17), a, rnd({2}, 18)}},
      {"softmax", [](const V& x) { return softmax(x[0], 1); }, {a}},
      {"log_softmax", [](const V& x) { return log_softmax(x[0], 0); }, {a}},
      {"layer_norm", [](const V& x) { return layer_norm(x[0], {3}, x[1], x[2]); }, {a, row, rnd({3}, 19)}},
      {"batch_norm",
       [](const V& x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], Variable(), true); },
       {rnd({4, 2}, 20), rnd({2}, 21)}},
      {"group_norm", [](const V& x) { return group_norm(x[0], 2, x[1]); }, {rnd({2, 4, 2}, 22), rnd({4}, 23)}},
      {"gather", [idx](const V& x) { return gather(x[0] * x[0], 0, idx.narrow(0, 0, 2)); }, {rnd({3, 3}, 24)}},
      {"index_select", [ids](const V& x) { return index_select(x[0] * x[0], 1, ids.narrow(0, 0, 3)); }, {a}},
      {"embedding", [ids](const V& x) { return embedding(ids, x[0]) * embedding(ids, x[0]); }, {rnd({3, 2}, 25)}},
      {"cross_entropy", [targets](const V& x) { return cross_entropy(x[0], targets); }, {rnd({4, 3}, 26)}},
      {"cross_entropy_options",
       [targets](const V& x) {
         return cross_entropy(x[0], targets,
                              {.weight = f64({0.5, 2, 1}, {3}),
                               .ignore_index = 1,
                               .reduction = Reduction::Mean,
                               .label_smoothing = 0.2});
       },
       {rnd({4, 3}, 27)}},
      {"cross_entropy_none",
       [targets](const V& x) { return cross_entropy(x[0], targets, {.reduction = Reduction::None}); },
       {rnd({4, 3}, 28)}},
      {"nll_loss", [targets](const V& x) { return nll_loss(log_softmax(x[0], 1), targets); }, {rnd({4, 3}, 29)}},
      {"mse_loss", [](const V& x) { return mse_loss(x[0] * x[0], x[1]); }, {a, b}},
      {"scaled_dot_product_attention",
       [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true}); },
       {rnd({1, 2, 3, 2}, 30), rnd({1, 2, 3, 2}, 31), rnd({1, 2, 3, 2}, 32)}},
      {"scaled_dot_product_attention_gqa",
       [](const V& x) {
         return scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true, .scale = 0.6, .enable_gqa = true});
       },
       {rnd({1, 4, 3, 2}, 42), rnd({1, 2, 3, 2}, 43), rnd({1, 2, 3, 2}, 44)}},
      {"rms_norm", [](const V& x) { return rms_norm(x[0], {3}, x[1]); }, {a, row}},
      {"rotary_embedding",
       [](const V& x) {
         auto [c, s] = rotary_tables(2, 3, 10.0, DType::Float64);
         return rotary_embedding(x[0] * x[0], c, s);
       },
       {rnd({2, 3, 2}, 45)}},
      {"repeat", [](const V& x) { return repeat(x[0] * x[0], {2, 1, 2}); }, {a}},
      {"flip", [](const V& x) { return flip(x[0] * x[0], {0, 1}); }, {a}},
      {"repeat_interleave", [](const V& x) { return repeat_interleave(x[0] * x[0], 2, 1); }, {a}},
      {"lerp", [](const V& x) { return lerp(x[0], x[1] * x[1], x[0] * x[1]); }, {a, b}},
      {"addmm", [](const V& x) { return addmm(x[0] * x[0], x[1], x[2] * x[2], 0.5, 2.0); },
       {rnd({3}, 46), rnd({2, 4}, 47), rnd({4, 3}, 48)}},
      {"baddbmm", [](const V& x) { return baddbmm(x[0], x[1] * x[1], x[2], 2.0, 0.5); },
       {rnd({2, 1, 3}, 49), rnd({2, 2, 4}, 50), rnd({2, 4, 3}, 51)}},
      {"normalize", [](const V& x) { return normalize(x[0], 2.0, 1); }, {a}},
      {"interpolate",
       [](const V& x) { return interpolate(x[0].unsqueeze(0) * x[0].unsqueeze(0), {.size = {3, 5}, .mode = InterpolateMode::Bilinear}); },
       {rnd({1, 2, 3}, 52)}},
      {"pad", [](const V& x) { return pad(x[0] * x[0], {2, 1}, PadMode::Constant, 0.5) + pad(x[0], {1, 2}, PadMode::Reflect); }, {a}},
      {"cosine_similarity", [](const V& x) { return cosine_similarity(x[0], x[1], 1); }, {a, b}},
      {"einsum", [](const V& x) { return einsum("ij,kj,ii->ik", {x[0] * x[0], x[1], x[2]}); },
       {a, b, rnd({2, 2}, 53)}},
      {"diagonal", [](const V& x) { return diagonal(x[0] * x[0], 1); }, {a}},
      {"diagonal_backward", [](const V& x) { return diagonal_backward(x[0] * x[0], {3, 2}, -1, 0, 1); },
       {rnd({2}, 54)}},
      {"scatter", [idx](const V& x) { return scatter(x[0] * x[0], 0, idx, x[1] * x[1]) + scatter(x[0], 1, idx, 2.0); },
       {rnd({3, 3}, 55), rnd({2, 3}, 56)}},
      {"scatter_add", [idx](const V& x) { return scatter_add(x[0] * x[1], 0, idx, x[1] * x[1]); },
       {rnd({3, 3}, 57), rnd({3, 3}, 58)}},
      {"index_get", [ids](const V& x) { return index_get(x[0] * x[0], {ids}); }, {rnd({3, 2}, 59)}},
      {"index_put",
       [ids](const V& x) { return index_put(x[0] * x[0], {ids}, x[1] * x[1], true) + index_put(x[0], {ids}, x[1] * x[0].sum()); },
       {rnd({3, 2}, 60), rnd({2}, 61)}},
      {"masked_select", [](const V& x) { return masked_select(x[0] * x[0], gt(x[1].data(), zeros({}, DType::Float64))); },
       {a, b}},
      {"self_attention_qkv", [](const V& x) { return self_attention_qkv(x[0], 2, false); }, {rnd({1, 3, 12}, 33)}},
      {"self_attention_qkv_causal", [](const V& x) { return self_attention_qkv(x[0], 3, true); }, {rnd({2, 3, 9}, 41)}},
      {"linear_gelu_no_bias",
       [](const V& x) { return linear_gelu(x[0], x[1], Variable(), GeluApproximate::Tanh); },
       {rnd({4, 3}, 42), a}},
      {"layer_norm_no_weight",
       [](const V& x) {
         return layer_norm(x[0], {2, 3}, Variable(), x[1]);
       },
       {rnd({2, 2, 3}, 43), b}},
      {"nll_loss_options",
       [targets](const V& x) {
         return nll_loss(log_softmax(x[0], 1), targets,
                         {.weight = f64({0.3, 1.5, 2}, {3}), .ignore_index = 2, .reduction = Reduction::Mean});
       },
       {rnd({4, 3}, 44)}},
      {"cross_entropy_sum",
       [targets](const V& x) {
         return cross_entropy(x[0], targets, {.weight = f64({1, 0.5, 2}, {3}), .reduction = Reduction::Sum});
       },
       {rnd({4, 3}, 45)}},
      // composed of the ops above
      {"flatten", [](const V& x) { return flatten(x[0] * x[0]); }, {a}},
      {"narrow", [](const V& x) { return narrow(x[0] * x[0], 1, 1, 2); }, {a}},
      {"squeeze", [](const V& x) { return squeeze(unsqueeze(x[0] * x[0], 0), 0); }, {a}},
      {"unsqueeze", [](const V& x) { return unsqueeze(x[0] * x[0], 1); }, {a}},
      {"unflatten",
       [](const V& x) {
         return unflatten(x[0] * x[0], 1, {3, 1});
       },
       {a}},
      {"split",
       [](const V& x) {
         return split(x[0] * x[0], {1, 2}, 1)[1];
       },
       {a}},
      {"chunk", [](const V& x) { return chunk(x[0] * x[0], 3, 1)[2]; }, {a}},
      {"stack",
       [](const V& x) {
         return stack({x[0] * x[0], x[1]}, 1);
       },
       {a, b}},
      {"topk", [](const V& x) { return topk(x[0] * x[0], 2, 1).first; }, {a}},
      {"sort", [](const V& x) { return sort(x[0] * x[1], 0, true).first; }, {a, b}},
      {"cumsum", [](const V& x) { return cumsum(x[0] * x[0], 1); }, {a}},
      {"l1_loss", [](const V& x) { return l1_loss(x[0] * x[0], x[1]); }, {a, b}},
      {"smooth_l1_loss", [](const V& x) { return smooth_l1_loss(x[0] * x[0], x[1], {.beta = 0.5}); }, {a, b}},
      {"huber_loss", [](const V& x) { return huber_loss(x[0] * x[0], x[1], {.delta = 0.5}); }, {a, b}},
      {"dropout",
       [](const V& x) {
         Generator g(5);
         return dropout(x[0] * x[0], 0.4, true, g);
       },
       {a}},
      {"batch_norm_eval",
       [](const V& x) {
         return batch_norm(x[0] * x[0], f64({0.1, -0.2}, {2}), f64({0.5, 2}, {2}), x[1], x[2], false);
       },
       {rnd({3, 2}, 35), rnd({2}, 36), rnd({2}, 37)}},
      // the backward ops of the linear-in-dy rules
      {"slice_backward",
       [](const V& x) {
         return slice_backward(x[0] * x[0], {2, 5}, 1, 1, 5, 2);
       },
       {a.narrow(1, 0, 2)}},
      {"gather_backward", [idx](const V& x) { return gather_backward(x[0] * x[0], {3, 3}, 0, idx); }, {a}},
      {"index_select_backward",
       [ids](const V& x) { return index_select_backward(x[0] * x[0], {3, 3}, 0, ids.narrow(0, 0, 2)); },
       {a}},
      {"embedding_backward",
       [ids](const V& x) { return embedding_backward(x[0] * x[0], ids, 3, 1); },
       {rnd({4, 2}, 38)}},
      {"nll_loss_backward",
       [targets](const V& x) { return nll_loss_backward(x[0] * x[0], x[1], targets, {.reduction = Reduction::Sum}); },
       {rnd({}, 39), rnd({4, 3}, 40)}},
      {"cumsum_backward", [](const V& x) { return cumsum_backward(x[0] * x[0], 0); }, {a}},
  };
  return c;
}
}  // namespace

TEST(HigherOrder, GradgradcheckEveryTwiceDifferentiableOp) {
  for (const OpCase& c : twice_differentiable_cases()) {
    SCOPED_TRACE(c.name);
    const GradcheckResult r = gradgradcheck(c.fn, c.inputs);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
  }
}

namespace {
// docs/03-writing-an-op.md's table: op -> its last column ("yes", "composed" or "no").
std::map<std::string, std::string> twice_column() {
  std::ifstream in(std::filesystem::path(MG_GOLDEN_DIR) / ".." / ".." / "docs" / "03-writing-an-op.md");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static const std::regex row_re(R"(\n\| *`([a-z_0-9]+)` *\|.*\| *(yes|composed|no) *\|)");
  std::map<std::string, std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), row_re), end; it != end; ++it) out[(*it)[1]] = (*it)[2];
  return out;
}
}  // namespace

TEST(HigherOrder, TheOpTablesTwiceColumnIsWhatIsTested) {
  // every "yes" or "composed" row has a gradgradcheck case above, and no other row does
  const std::map<std::string, std::string> column = twice_column();
  EXPECT_GT(column.size(), 90u);
  std::set<std::string> cases;
  for (const OpCase& c : twice_differentiable_cases()) cases.insert(c.name);
  for (const auto& [op, twice] : column) {
    if (twice == "no")
      EXPECT_FALSE(cases.count(op)) << op << " is marked no in docs/03 but has a gradgradcheck case";
    else
      EXPECT_TRUE(cases.count(op)) << op << " is marked " << twice << " in docs/03 but has no gradgradcheck case";
  }
}

TEST(HigherOrder, OpsThatAreNotTwiceDifferentiableNameThemselves) {
  // docs/03's table, "no" in the last column: the first derivative works, the second is the
  // NotImplementedError naming the node (conv1d records a conv2d node).
  const Tensor img = rnd({1, 1, 4, 4}, 60), p = rnd({2, 3}, 61, 0.1, 0.9), t = rnd({2, 3}, 62, 0.1, 0.9);
  struct NoCase {
    OpCase c;
    std::string node;
  };
  const std::vector<NoCase> cases = {
      {{"prod", [](const V& x) { return prod(x[0], 1); }, {rnd({2, 3}, 63)}}, "prod"},
      {{"scatter_reduce",
        [](const V& x) {
          return scatter_reduce(x[0] * x[0], 0, ints({0, 1, 0}, {1, 3}), x[1], "amax");
        },
        {rnd({2, 3}, 67), rnd({1, 3}, 68)}},
       "scatter_reduce"},
      {{"conv2d", [](const V& x) { return conv2d(x[0], x[1]); }, {img, rnd({1, 1, 2, 2}, 64)}}, "conv2d"},
      {{"conv1d", [](const V& x) { return conv1d(x[0], x[1]); }, {rnd({1, 1, 5}, 65), rnd({1, 1, 2}, 66)}},
       "conv1d"},  // (it named the conv2d it runs on)
      {{"max_pool2d",
        [](const V& x) {
          return max_pool2d(x[0] * x[0], {2, 2});
        },
        {img}},
       "max_pool2d"},
      {{"max_pool2d_with_indices",
        [](const V& x) {
          return max_pool2d_with_indices(x[0] * x[0], {2, 2}).first;
        },
        {img}},
       "max_pool2d"},
      {{"avg_pool2d",
        [](const V& x) {
          return avg_pool2d(x[0] * x[0], {2, 2});
        },
        {img}},
       "avg_pool2d"},
      {{"adaptive_avg_pool2d",
        [](const V& x) {
          return adaptive_avg_pool2d(x[0] * x[0], {2, 2});
        },
        {img}},
       "adaptive_avg_pool2d"},
      {{"binary_cross_entropy", [](const V& x) { return binary_cross_entropy(x[0], x[1]); }, {p, t}},
       "binary_cross_entropy"},
      {{"binary_cross_entropy_with_logits",
        [](const V& x) { return binary_cross_entropy_with_logits(x[0], x[1]); },
        {p, t}},
       "binary_cross_entropy_with_logits"},
      {{"kl_div", [](const V& x) { return kl_div(x[0], x[1]); }, {p, t}}, "kl_div"},
      {{"conv_transpose2d",
        [](const V& x) { return conv_transpose2d(x[0] * x[0], x[1], Variable(), {.stride = 2}); },
        {rnd({1, 2, 2, 2}, 70), rnd({2, 1, 2, 2}, 71)}},
       "conv_transpose2d"},
      {{"conv_transpose1d",
        [](const V& x) { return conv_transpose1d(x[0] * x[0], x[1], Variable(), {.stride = 2}); },
        {rnd({1, 2, 3}, 72), rnd({2, 1, 2}, 73)}},
       "conv_transpose1d"},  // (it named the conv_transpose2d it runs on)
      {{"recurrence",
        [](const V& x) { return recurrence(RNNKind::Tanh, x[0], x[1], Variable(), x[2]); },
        {rnd({3, 2, 2}, 67), rnd({2, 2}, 68), rnd({2, 2}, 69)}},
       "recurrence"},
  };
  std::set<std::string> tested;
  for (const NoCase& n : cases) {
    SCOPED_TRACE(n.c.name);
    tested.insert(n.c.name);
    EXPECT_TRUE(gradcheck(n.c.fn, n.c.inputs).ok);
    try {
      gradgradcheck(n.c.fn, n.c.inputs);
      ADD_FAILURE() << n.c.name << " was differentiated twice";
    } catch (const NotImplementedError& e) {
      EXPECT_THAT(e.what(), HasSubstr("'" + n.node));
      EXPECT_THAT(e.what(), HasSubstr("not differentiable twice"));
    }
  }
  for (const auto& [op, twice] : twice_column()) {
    if (twice == "no") {
      EXPECT_TRUE(tested.count(op)) << op << " is marked no in docs/03 but not tested here";
    }
  }
}
