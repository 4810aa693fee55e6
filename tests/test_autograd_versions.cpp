// In-place writes after the forward (Storage::version, Node::saved_versions): every write counts,
// views share the count, and a backward that would read numbers written since its forward (an
// output, an input, a captured index or mask, a custom Function's saves) is a StateError naming them.
#include <functional>

#include "helpers.h"

using namespace mg;
using mgtest::expect_values;
using testing::HasSubstr;

namespace {
// backward() must fail with a StateError whose text holds every piece in `parts`.
void expect_inplace_error(const std::function<void()>& backward, const std::vector<std::string>& parts) {
  try {
    backward();
    ADD_FAILURE() << "no error: the gradient was computed from numbers written after the forward";
  } catch (const StateError& e) {
    EXPECT_THAT(e.what(), HasSubstr("modified by an in-place operation"));
    for (const std::string& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}
}  // namespace

TEST(Versions, EveryInPlaceWriteCountsAndViewsShareTheCount) {
  Tensor t = zeros({2, 3});
  EXPECT_EQ(t.version(), 0u);
  t.fill_(1);
  EXPECT_EQ(t.version(), 1u);
  t.copy_(ones({3}));  // broadcast
  EXPECT_EQ(t.version(), 2u);
  add_(t, ones({2, 3}));
  EXPECT_EQ(t.version(), 3u);
  const Tensor view = t.transpose(0, 1).narrow(0, 1, 2);  // shares t's storage, so its count
  EXPECT_EQ(view.version(), 3u);
  view.fill_(0);
  EXPECT_EQ(t.version(), 4u);
  const Tensor out = t * 2.0;  // an op's new output starts its own count
  EXPECT_EQ(out.version(), 0u);
  EXPECT_EQ(t.version(), 4u);  // reading does not count
}

TEST(Versions, WritingASavedOutputBeforeBackwardIsAnError) {
  // y = e^x keeps y for dx = dy * y: after y.data() *= 2 the gradient would be 2 e^x, silently.
  Variable x(tensor({0.5f, 1}, {2}), true);
  Variable y = exp(x);
  Variable l = sum(y);
  y.data().copy_(y.data() * 2.0);
  expect_inplace_error([&] { l.backward(); },
                       {"'exp'", "its output (shape (2,))", "now at version 1", "ran at version 0", "clone()"});
  EXPECT_FALSE(x.grad().defined());  // nothing was accumulated
  // the same for the other ops whose rule reads their output
  for (auto op : {+[](const Variable& v) { return sigmoid(v); }, +[](const Variable& v) { return tanh(v); },
                  +[](const Variable& v) { return sqrt(v); }, +[](const Variable& v) { return softmax(v, 0); }}) {
    Variable z(tensor({0.5f, 1}, {2}), true);
    Variable out = op(z);
    Variable loss = sum(out);
    out.data().fill_(0);
    expect_inplace_error([&] { loss.backward(); }, {"its output"});
  }
}

TEST(Versions, WritingASavedInputBeforeBackwardIsAnError) {
  // b = a * a keeps a: with a += 10 before backward, db/da would come out 22, 24 instead of 2, 4.
  Variable a(tensor({1, 2}, {2}), true);
  Variable b = a * a;
  a.data().copy_(a.data() + 10.0);
  expect_inplace_error([&] { sum(b).backward(); }, {"'mul'", "its input 0 (shape (2,))"});
  // through a view of the input: the view shares the storage's count
  Variable c(tensor({1, 2, 3, 4}, {2, 2}), true);
  Variable d = matmul(c, c);
  c.data().transpose(0, 1).narrow(0, 1, 1).fill_(7);
  expect_inplace_error([&] { sum(d).backward(); }, {"'matmul'", "its input"});
}

TEST(Versions, LegalWritesStayLegal) {
  // after the backward: the graph is done with the numbers
  Variable a(tensor({1, 2}, {2}), true);
  sum(a * a).backward();
  a.data().fill_(3);
  expect_values(a.grad(), {2}, {2, 4});
  // under no_grad, before a new forward: the new graph saves the new numbers
  {
    NoGradGuard no_grad;
    a.data().copy_(tensor({5, 6}, {2}));
  }
  a.zero_grad();
  sum(a * a).backward();
  expect_values(a.grad(), {2}, {10, 12});
  // to a tensor nothing saved: add keeps nothing, linear keeps x and W but not the bias
  Variable p(tensor({1, 2}, {2}), true), q(tensor({3, 4}, {2}), true);
  Variable s = p + q;
  p.data().fill_(0);
  sum(s).backward();
  expect_values(q.grad(), {2}, {1, 1});
  Variable x(tensor({1, 2}, {1, 2}), true), w(tensor({1, 1, 1, 1}, {2, 2}), true), bias(tensor({0, 0}, {2}), true);
  Variable y = linear(x, w, bias);
  bias.data().fill_(5);
  sum(y).backward();
  expect_values(w.grad(), {2, 2}, {1, 2, 1, 2});
  // with retain_graph, a write between two backwards is caught at the second
  Variable r(tensor({2}, {1}), true);
  Variable e = exp(r);
  sum(e).backward({.retain_graph = true});
  e.data().fill_(0);
  expect_inplace_error([&] { sum(e).backward(); }, {"'exp'"});
}

TEST(Versions, AnOptimizerStepBetweenForwardAndBackwardIsCaught) {
  // The GAN-style mistake: the weights updated in place while a graph that read them waits.
  Generator g(3);
  Variable w(randn({3, 4}, g), true), x(randn({2, 4}, g));
  optim::SGD opt({w}, {.lr = 0.1});
  Variable first = sum(linear(x, w));
  first.backward();
  Variable second = sum(linear(x, w) * linear(x, w));
  opt.step();  // p -= lr * grad, in place
  expect_inplace_error([&] { second.backward(); }, {"'linear'", "its input 1 (shape (3, 4))"});
}

TEST(Versions, CapturedIndicesMasksAndFunctionSavesAreChecked) {
  Variable x(tensor({1, 2, 3, 4}, {4}), true);
  const Tensor index = from_vector<int64_t>({3, 0}, {2});
  Variable y = gather(x, 0, index);
  index.fill_(1);
  expect_inplace_error([&] { sum(y).backward(); }, {"'gather'", "a tensor it captured besides its inputs (shape (2,)"});
  const Tensor mask = from_vector<bool>({true, false, false, true}, {4});
  Variable z = masked_fill(x * 1.0, mask, 0.0);
  mask.fill_(false);
  expect_inplace_error([&] { sum(z).backward(); }, {"'masked_fill'"});
  const Tensor targets = from_vector<int64_t>({1}, {1});
  Variable logits(tensor({0.1f, 0.2f, 0.3f}, {1, 3}), true);
  Variable loss = cross_entropy(logits, targets);
  targets.fill_(2);
  expect_inplace_error([&] { loss.backward(); }, {"'cross_entropy'"});
}

namespace {
struct SavesItsInput : Function {
  std::string name() const override { return "saves_its_input"; }
  Tensor forward(FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    ctx.save_for_backward({in[0]});
    return in[0] * in[0];
  }
  std::vector<Tensor> backward(FunctionCtx& ctx, const Tensor& dy) override { return {dy * ctx.saved()[0] * 2.0}; }
};
}  // namespace

TEST(Versions, ACustomFunctionsSavedTensorsAreChecked) {
  Variable x(tensor({1, 2}, {2}), true);
  Variable y = apply_function<SavesItsInput>({x});
  x.data().fill_(9);
  expect_inplace_error([&] { sum(y).backward(); }, {"'saves_its_input'", "what a custom Function saved"});
}

TEST(Versions, FusedOpsAndHigherOrderGraphsAreChecked) {
  Generator g(5);
  // fused attention: its backward reads q, k, v and its own output
  Variable q(randn({1, 2, 3, 4}, g), true), k(randn({1, 2, 3, 4}, g), true), v(randn({1, 2, 3, 4}, g), true);
  Variable o = scaled_dot_product_attention(q, k, v, {.is_causal = true});
  o.data().narrow(2, 0, 1).fill_(0);
  expect_inplace_error([&] { sum(o * o).backward(); }, {"'scaled_dot_product_attention'", "its output"});
  Variable o2 = scaled_dot_product_attention(q, k, v, {.is_causal = true});
  v.data().fill_(1);
  expect_inplace_error([&] { sum(o2).backward(); }, {"'scaled_dot_product_attention'", "its input 2"});
  // fused layer norm: x and the weight
  Variable x(randn({2, 5}, g), true), w(randn({5}, g), true), b(randn({5}, g), true);
  Variable y = layer_norm(x, {5}, w, b);
  w.data().fill_(2);
  expect_inplace_error([&] { sum(y * y).backward(); }, {"'layer_norm'", "its input 1"});
  // a second derivative: grad's graph saved x; writing x before differentiating it again is caught
  Variable t(tensor({2}, {1}), true);
  Variable dy = grad({t * t * t}, {t}, {.create_graph = true})[0];  // 3 t^2, recorded
  t.data().fill_(1);
  expect_inplace_error([&] { dy.backward(); }, {"its input"});
}
