// backward_walk: "Where does W_Q's gradient come from?", answered by watching the engine.
//
// Four backward passes are recorded node by node (inspect::BackwardRecorder) and written as pages
// that step through them in a browser (viz::backward_html): micrograd's neuron, hand_attention's
// head, one GPT block and a second derivative. For each it prints how many nodes the engine ran,
// how many contributions were added where paths met, the finite-difference check of every node,
// and the leaves' gradients.
#include <CLI/CLI.hpp>
#include <fmt/ranges.h>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "minigrad/viz/backward_page.h"
#include "minigrad/viz/report.h"
#include "recordings.h"

namespace {
using namespace backward_walk;

// The walk's numbers, computed from the recording: nodes run, nodes where two or more
// contributions met, and the finite-difference checks (worst relative difference).
void summarise(const Recording& r) {
  for (size_t w = 0; w < r.walks.size(); ++w) {
    const inspect::WalkRecord& walk = r.walks[w];
    std::map<int64_t, int> contributions;
    for (const inspect::StepRecord& s : walk.steps)
      for (const inspect::SendRecord& send : s.sends) ++contributions[send.to];
    int met = 0, checked = 0, agree = 0;
    double worst = 0;
    for (const inspect::StepRecord& s : walk.steps) {
      met += contributions[s.node] >= 2;
      if (!s.fd) continue;
      ++checked;
      const double diff = std::abs(s.fd->engine - s.fd->numeric);
      const double rel = diff / std::max({1.0, std::abs(s.fd->engine), std::abs(s.fd->numeric)});
      agree += rel <= 1e-6;
      worst = std::max(worst, rel);
    }
    fmt::print("  walk {}{}: {} nodes run, {} where two or more contributions were added", w + 1,
               walk.create_graph ? " (create_graph)" : "", walk.steps.size(), met);
    if (checked)
      fmt::print("; finite differences at {} nodes: {} agree to 1e-6 (worst relative difference {:.1e})", checked,
                 agree, worst);
    fmt::print("\n");
  }
  std::vector<std::string> large;
  for (const auto& [name, g] : r.grads) {
    const Tensor c = g.contiguous();
    if (c.numel() > 4) {  // a matrix: its norm, the page has the numbers
      large.push_back(fmt::format("{} {:.4f}", name, std::sqrt(sum(c * c).item())));
      continue;
    }
    fmt::print("  {}.grad = [", name);
    for (int64_t i = 0; i < c.numel(); ++i) fmt::print("{}{:.8f}", i ? ", " : "", c.data<double>()[i]);
    fmt::print("]{}\n", c.dim() >= 2 ? fmt::format(" {}", shape_str(c.shape())) : "");
  }
  if (!large.empty()) fmt::print("  |grad| of the larger leaves: {}\n", fmt::join(large, ", "));
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 0;
  std::string out = "runs/backward_walk";
  CLI::App app{"backward_walk: the backward pass recorded node by node, as pages to step through"};
  example::add_run_options(
      app, seed, &out, {.seed_help = "initial weights of the attention head and the GPT block (0: hand_attention's)"});
  CLI11_PARSE(app, argc, argv);

  mg::viz::Report rep(out, "backward_walk: the backward pass, node by node",
                      "Open a page and press Next: each step is one node the engine ran, with what arrived, its rule "
                      "and what it sent.");
  const Recording recordings[] = {neuron(), attention_head(seed), gpt_block(seed), second_derivative()};
  for (const Recording& r : recordings) {
    fmt::print("== {} ==\n", r.title);
    summarise(r);
    const std::string page = mg::viz::write_backward_page(rep.path(r.file), r.title, r.json);
    rep.add_text(r.file + ".json", r.json, "the recording behind " + r.file + " (format minigrad-backward-1)");
    fmt::print("  page: {}\n\n", page);
  }
  // hand_attention's head: docs/05's dL/dW_Q is the transpose of w_q.weight's gradient
  const Recording& head = recordings[1];
  for (const auto& [name, g] : head.grads)
    if (name == "w_q.weight") {
      const Tensor dWQ = g.transpose(0, 1).contiguous();
      fmt::print("hand_attention's dL/dW_Q (w_q.weight.grad transposed){}:\n",
                 seed == 0 ? ", as docs/05-attention.md derives it" : fmt::format(" at seed {}", seed));
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 2; ++j) fmt::print("  W_Q[{},{}]  {:+.8f}\n", i, j, dWQ.at({i, j}));
    }
  fmt::print("\npages: {}\n", rep.write_index());
  return 0;
}
