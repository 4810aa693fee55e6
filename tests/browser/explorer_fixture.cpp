// Writes an explorer page for the browser test: a tiny causal model (one attention layer of two
// heads, one of two layers) trained for 9 SGD steps with telemetry at steps 1, 3, 6, 9, so the
// maps differ from one recorded step to the next. Usage: explorer_fixture OUT.html
#include <cstdio>

#include "minigrad/minigrad.h"
#include "minigrad/viz/explorer.h"

using namespace mg;

namespace {
struct Tiny : nn::Callable<Tiny> {
  nn::Embedding tok, pos;
  nn::MultiheadAttention a0, a1;
  nn::Linear out;
  explicit Tiny(Generator& g)
      : tok(12, 8, {}, g), pos(10, 8, {}, g), a0(8, 2, {}, g), a1(8, 1, {}, g), out(8, 12, {}, g) {
    register_module("tok", tok), register_module("pos", pos), register_module("layer0", a0),
        register_module("layer1", a1);
    register_module("out", out);
  }
  Variable forward(const Tensor& ids) const {
    Variable x = tok(ids) + pos(arange(ids.size(1)));
    x = x + a0(x, {.is_causal = true}).output;
    return out(x + a1(x, {.is_causal = true}).output);
  }
  std::string type_name() const override { return "Tiny"; }
};
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: explorer_fixture OUT.html\n");
    return 2;
  }
  Generator g(1);
  Tiny m(g);
  const Tensor probe = from_vector<int64_t>({3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, {1, 10});
  inspect::Telemetry tel(
      m, [&](const Tensor& ids) { m(ids); },
      {.vocab = 12,
       .probe = probe,
       .tokens = {"t", "h", "e", "<a>", "q", "u", "i", "c", "k", "&"},
       .every = 3,
       .scores = {.induction_length = 5, .induction_batch = 4, .logits = [&](const Tensor& ids) { return m(ids); }}});
  optim::SGD opt(m.parameters(), {.lr = 0.5});
  for (int step = 1; step <= 9; ++step) {
    const Tensor ids = randint(0, 12, {8, 10}, g);
    Variable loss =
        cross_entropy(reshape(narrow(m(ids), 1, 0, 9), {-1, 12}), ids.narrow(1, 1, 9).contiguous().reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (tel.due(step)) tel.record(step, loss.item());
  }
  viz::write_explorer(argv[1], "explorer fixture", tel.json({{"example", "fixture"}}));
  return 0;
}
