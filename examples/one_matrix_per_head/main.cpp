// one_matrix_per_head: "In multi-head notation, is a per-head matrix multiplied onto W_Q?"
//
// Some write head h's query as W1_q^h (W_q x): a shared W_Q, then a per-head matrix on top. This
// example builds that over-parameterised attention beside the standard one (one W_Q whose row
// block h *is* head h's projection), then folds each product W1_q^h W_q[h] into one matrix and
// shows the standard module gives the same outputs. A product of two linear maps is one linear
// map: the extra matrices add parameters, not expressive power -- the two can represent exactly the
// same functions. But they do not *train* the same: on the same task and data the product form's
// loss curve stays above the standard one, because gradient descent on a product of two matrices
// moves differently (each factor's gradient is scaled by the other factor) from gradient descent
// on one matrix. Same set of functions, different training dynamics.
#include <cmath>

#include <CLI/CLI.hpp>

#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace one_matrix {
using namespace mg;

struct Config {
  int64_t dim = 16;   // model width
  int64_t heads = 4;  // heads of dim/heads = 4 features
  int64_t vocab = 8;  // task: name the first token (as in where_weights_come_from)
  int64_t seq_len = 8;
  int64_t batch = 64;
  int steps = 400;  // AdamW steps for each model
  double lr = 1e-2;
  uint64_t seed = 0;
  std::string out = "runs/one_matrix_per_head";
};

// Attention with an extra per-head matrix after each shared projection:
//   q_h = A_q^h (W_q x)_h,  k_h = A_k^h (W_k x)_h,  v_h = A_v^h (W_v x)_h
struct OverParamAttention : nn::Callable<OverParamAttention> {
  const int64_t heads, head_dim;
  nn::Linear w_q, w_k, w_v, w_o;
  nn::ModuleList a_q, a_k, a_v;  // heads x Linear(head_dim, head_dim, no bias)
  OverParamAttention(int64_t dim, int64_t h, Generator& g)
      : heads(h),
        head_dim(dim / h),
        w_q(dim, dim, {}, g),
        w_k(dim, dim, {}, g),
        w_v(dim, dim, {}, g),
        w_o(dim, dim, {}, g) {
    for (auto [name, l] : {std::pair{"w_q", &w_q}, {"w_k", &w_k}, {"w_v", &w_v}, {"w_o", &w_o}})
      register_module(name, *l);
    for (auto [name, list] : {std::pair{"a_q", &a_q}, {"a_k", &a_k}, {"a_v", &a_v}}) {
      register_module(name, *list);
      for (int64_t i = 0; i < h; ++i)
        list->emplace_back<nn::Linear>(head_dim, head_dim, nn::LinearOptions{.bias = false}, g);
    }
  }
  // (B, T, dim) -> (B, H, T, d): split heads, then each head through its own extra matrix.
  Variable project(const nn::Linear& w, const nn::ModuleList& a, const Variable& x) const {
    Variable p = nn::split_heads(w(x), heads);
    std::vector<Variable> per_head;
    for (int64_t h = 0; h < heads; ++h) per_head.push_back(a.at<nn::Linear>(h)(narrow(p, 1, h, 1)));
    return concat(per_head, 1);
  }
  Variable forward(const Variable& x) const {
    Variable q = project(w_q, a_q, x), k = project(w_k, a_k, x), v = project(w_v, a_v, x);
    Variable att = softmax(nn::attention_scores(q, k), -1);  // softmax(q k^T / sqrt(d_k)), as in MultiheadAttention
    return w_o(nn::merge_heads(matmul(att, v)));
  }
  std::string type_name() const override { return "OverParamAttention"; }
};

// Write the folded products into a standard MultiheadAttention:
//   rows of head h:  W[h] = A^h W[h],  b[h] = A^h b[h]
void fold_into(const OverParamAttention& over, nn::MultiheadAttention& mha) {
  NoGradGuard no_grad;
  const int64_t d = over.head_dim;
  auto fold = [&](const nn::Linear& w, const nn::ModuleList& a, nn::Linear& dst) {
    for (int64_t h = 0; h < over.heads; ++h) {
      const Tensor A = a.at<nn::Linear>(h).weight.data();  // (d, d), applied as x A^T
      dst.weight.data().narrow(0, h * d, d).copy_(matmul(A, w.weight.data().narrow(0, h * d, d)));
      dst.bias.data().narrow(0, h * d, d).copy_(matmul(A, w.bias.data().narrow(0, h * d, d)));
    }
  };
  fold(over.w_q, over.a_q, mha.w_q);
  fold(over.w_k, over.a_k, mha.w_k);
  fold(over.w_v, over.a_v, mha.w_v);
  mha.w_o.weight.data().copy_(over.w_o.weight.data());
  mha.w_o.bias.data().copy_(over.w_o.bias.data());
}

// The task model around either attention: embeddings -> attention (+ residual) -> read-out.
template <class Attention>
struct TaskModel : nn::Callable<TaskModel<Attention>> {
  nn::Embedding tok, pos;
  Attention attn;
  nn::Linear readout;
  TaskModel(const Config& c, Generator& g, Attention* /*tag*/ = nullptr)
      : tok(c.vocab, c.dim, {}, g), pos(c.seq_len, c.dim, {}, g), attn(make(c, g)), readout(c.dim, c.vocab, {}, g) {
    this->register_module("tok", tok), this->register_module("pos", pos), this->register_module("attn", attn);
    this->register_module("readout", readout);
  }
  static Attention make(const Config& c, Generator& g) {
    if constexpr (std::is_same_v<Attention, nn::MultiheadAttention>)
      return Attention(c.dim, c.heads, {}, g);
    else
      return Attention(c.dim, c.heads, g);
  }
  Variable forward(const Tensor& ids) const {
    Variable x = tok(ids) + pos(arange(ids.size(1)));
    Variable a = [&] {
      if constexpr (std::is_same_v<Attention, nn::MultiheadAttention>)
        return attn(x).output;
      else
        return attn(x);
    }();
    return readout(x + a);
  }
  std::string type_name() const override { return "TaskModel"; }
};

template <class M>
std::vector<double> train(M& m, const Config& c, uint64_t data_seed, const std::string& label) {
  Generator g(data_seed);  // both models see the same batches
  optim::AdamW opt(m.parameters(), {.lr = c.lr, .weight_decay = 0});
  viz::ProgressBar bar(c.steps, label);
  std::vector<double> losses;
  for (int step = 1; step <= c.steps; ++step) {
    Tensor ids = randint(0, c.vocab, {c.batch, c.seq_len}, g);
    Tensor targets = ids.narrow(1, 0, 1).expand({c.batch, c.seq_len}).contiguous().reshape({-1});
    Variable loss = cross_entropy(reshape(m(ids), {-1, c.vocab}), targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
    bar.update(step, loss.item(), -1, c.batch * c.seq_len);
  }
  bar.finish();
  return losses;
}

// Largest |standard(x) - over(x)| after folding, on random input.
double fold_difference(const Config& c, Generator& g) {
  OverParamAttention over(c.dim, c.heads, g);
  nn::MultiheadAttention mha(c.dim, c.heads, {}, g);
  fold_into(over, mha);
  NoGradGuard no_grad;
  Variable x(randn({3, c.seq_len, c.dim}, g));
  return max(abs(over(x).data() - mha(x).output.data())).item();
}

// Mean of losses over steps [from, to] (1-based, inclusive).
double window_mean(const std::vector<double>& v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i <= to; ++i) s += v[i - 1];
  return s / static_cast<double>(to - from + 1);
}

double tail_mean(const std::vector<double>& v, size_t n = 50) {
  double s = 0;
  for (size_t i = v.size() - std::min(n, v.size()); i < v.size(); ++i) s += v[i];
  return s / static_cast<double>(std::min(n, v.size()));
}

}  // namespace one_matrix

#ifndef MG_EXAMPLE_NO_MAIN
int main(int argc, char** argv) {
  using namespace one_matrix;
  Config c;
  CLI::App app{"one_matrix_per_head: a per-head matrix on top of W_Q folds into W_Q"};
  app.add_option("--steps", c.steps, "training steps per model");
  app.add_option("--seed", c.seed, "random seed");
  app.add_option("--out", c.out, "output folder");
  CLI11_PARSE(app, argc, argv);

  Generator g(c.seed);
  viz::Report rep(c.out, "one_matrix_per_head: one W_Q covers all heads",
                  "A per-head matrix applied after a shared W_Q folds into a single W_Q.");
  const double diff = fold_difference(c, g);
  OverParamAttention over_counts(c.dim, c.heads, g);
  nn::MultiheadAttention std_counts(c.dim, c.heads, {}, g);
  const std::string counts = fmt::format(
      "parameters, standard MultiheadAttention({0}, {1}):         {2}\n"
      "parameters, with a per-head matrix after W_Q, W_K and W_V: {3}  (+3 x {1} heads x {4}x{4})\n"
      "after folding A^h W[h] into one matrix per projection, max |output difference| = {5:.2e}\n",
      c.dim, c.heads, std_counts.num_parameters(), over_counts.num_parameters(), c.dim / c.heads, diff);
  std::printf("%s", counts.c_str());
  rep.add_note(counts, true);

  Generator g1(c.seed + 1), g2(c.seed + 1);
  TaskModel<nn::MultiheadAttention> standard(c, g1);
  TaskModel<OverParamAttention> over(c, g2);
  const auto l1 = train(standard, c, c.seed + 2, "standard     ");
  const auto l2 = train(over, c, c.seed + 2, "per-head A^h ");
  std::string result = fmt::format("mean training loss, same data in the same order:\n  {:<12} {:>12} {:>14} {:>8}\n",
                                   "steps", "standard", "per-head A^h", "ratio");
  const size_t n = l1.size();
  for (size_t k = 0; k < 4; ++k) {
    const size_t from = k * n / 4 + 1, to = (k + 1) * n / 4;
    const double a = window_mean(l1, from, to), b = window_mean(l2, from, to);
    result += fmt::format("  {:<12} {:>12.5f} {:>14.5f} {:>7.1f}x\n", fmt::format("{}-{}", from, to), a, b, b / a);
  }
  result += "Same set of functions, different training: the product form's loss stays above the standard one's.\n";
  std::printf("%s", result.c_str());
  rep.add_note(
      "The two parameterisations can represent exactly the same functions, but gradient descent moves a product "
      "of two matrices differently from one matrix (each factor's gradient is scaled by the other), so the "
      "curves differ:",
      false);
  rep.add_note(result, true);
  rep.add_svg(
      "loss.svg",
      viz::line_chart_svg({viz::Series::over_steps("standard (one W_Q)", l1),
                           viz::Series::over_steps("W1_q^h W_q (per-head extra)", l2)},
                          "Same task, same data: same functions, different training curves", "step", "cross-entropy",
                          true),
      "Training loss of both parameterisations on 'name the first token': the product form trains more slowly.");
  std::printf("\npictures: %s\n", rep.write_index().c_str());
  return diff < 1e-4 ? 0 : 1;
}
#endif
