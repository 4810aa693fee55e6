// Who owns a module: a module stays where it is made (its registry points at its members), so it
// is neither copied nor moved; ownership is a member, a container (Sequential, ModuleList,
// ModuleDict) or a std::unique_ptr, and C++17's guaranteed elision keeps `auto m = nn::Linear(...)`
// and factories that return a module working. What the refusals used to check at run time
// (a part of a model moved out alone, slicing, a module of unknown size) no longer compiles.
#include <memory>
#include <optional>
#include <type_traits>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::rnd;

namespace {
struct Net : nn::Callable<Net> {
  nn::Linear fc1, fc2;
  Variable scale;
  Tensor mask;
  explicit Net(Generator& g = default_generator()) : fc1(3, 4, {}, g), fc2(4, 2, {}, g) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_parameter("scale", scale, ones({2}));
    register_buffer("mask", mask, tensor({1, 0}, {2}));
  }
  Variable forward(const Variable& x) const { return fc2(relu(fc1(x))) * scale * Variable(mask); }
  std::string type_name() const override { return "Net"; }
};

// A factory: the Net is constructed in the caller's variable (guaranteed elision), not moved there.
Net make_net(uint64_t seed) {
  Generator g(seed);
  return Net(g);
}

// A model that is set up after construction comes back owned by a unique_ptr.
std::unique_ptr<Net> make_trained_net(uint64_t seed) {
  Generator g(seed);
  auto net = std::make_unique<Net>(g);
  net->fc1.weight.set_data(net->fc1.weight.data() * 2.0);
  return net;
}

// Whether every registry entry of `m` is the very object `members` holds, in order.
void expect_registry_is(const nn::Module& m, const std::vector<const Variable*>& members) {
  const auto params = m.named_parameters();
  ASSERT_EQ(params.size(), members.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i].second.impl().get(), members[i]->impl().get()) << params[i].first;
}
}  // namespace

// Library modules and user modules alike: not copyable, not movable, not assignable.
static_assert(!std::is_move_constructible_v<nn::Linear> && !std::is_move_constructible_v<models::GPT> &&
              !std::is_move_constructible_v<nn::MultiheadAttention> && !std::is_move_constructible_v<nn::LSTM> &&
              !std::is_move_constructible_v<nn::Sequential> && !std::is_move_constructible_v<nn::ModuleList> &&
              !std::is_move_constructible_v<nn::BatchNorm1d> && !std::is_move_constructible_v<models::BertModel> &&
              !std::is_move_constructible_v<Net>);
static_assert(!std::is_copy_constructible_v<nn::Linear> && !std::is_move_assignable_v<nn::Linear> &&
              !std::is_copy_assignable_v<Net> && !std::is_move_assignable_v<Net>);
// So what the registry needed refusing at run time cannot be written: moving a part out of a
// model, or a Net into a variable of its base class (slicing).
static_assert(!std::is_constructible_v<nn::Linear, nn::Linear&&> && !std::is_constructible_v<nn::Module, Net&&>);

TEST(ModuleOwnership, AFactoryMakesTheModelWhereItGoes) {
  Net a = make_net(3);
  auto l = nn::Linear(3, 4);  // the same: constructed in place
  expect_registry_is(a, {&a.scale, &a.fc1.weight, &a.fc1.bias, &a.fc2.weight, &a.fc2.bias});
  expect_registry_is(l, {&l.weight, &l.bias});
  EXPECT_EQ(a.fc1.parent(), &a);
  EXPECT_EQ(a.fc2.path(), "fc2");
  // an optimizer built from parameters() steps the members themselves
  const Tensor before = a.fc1.weight.data().clone();
  optim::SGD opt(a.parameters(), {.lr = 0.1});
  const Variable x(rnd({5, 3}, 4).to(DType::Float32));
  sum(a(x)).backward();
  opt.step();
  EXPECT_GT(max(abs(a.fc1.weight.data() - before)).item(), 0.0);
  // and the same seed gives the same model
  Net b = make_net(3);
  Generator g(3);
  const Net c(g);
  expect_close(b(x).data(), c(x).data(), 0, 0);
}

TEST(ModuleOwnership, AModelSetUpInAFunctionComesBackInAUniquePtr) {
  std::unique_ptr<Net> net = make_trained_net(5);
  Generator g(5);
  Net plain(g);
  expect_close(net->fc1.weight.data(), plain.fc1.weight.data() * 2.0, 0, 0);
  expect_registry_is(*net, {&net->scale, &net->fc1.weight, &net->fc1.bias, &net->fc2.weight, &net->fc2.bias});
  // hooks and their handles: the object never moves, so they simply stay right
  std::vector<const nn::Module*> seen;
  nn::HookHandle h =
      net->register_forward_hook([&](const nn::Module& m, const std::vector<Variable>&, std::vector<Variable>& out) {
        seen.push_back(&m);
        out[0] = out[0] * 0.0;
      });
  const Variable x(rnd({2, 3}, 6).to(DType::Float32));
  expect_close((*net)(x).data(), zeros({2, 2}), 0, 0);
  EXPECT_EQ(seen, std::vector<const nn::Module*>{net.get()});
  h.remove();
  EXPECT_GT(max(abs((*net)(x).data())).item(), 0.0);
  // a handle, a capture's lifetime and a child's parent link outlive the module safely
  nn::HookHandle late = net->fc1.register_forward_pre_hook([](const nn::Module&, std::vector<Variable>&) {});
  const std::weak_ptr<void> life = net->fc1.lifetime();
  nn::Linear outside(2, 2);
  net.reset();
  EXPECT_TRUE(life.expired());
  late.remove();  // does nothing: the module is gone
  EXPECT_EQ(outside.parent(), nullptr);
}

TEST(ModuleOwnership, ModulesMadeAtRunTimeLiveInContainers) {
  // A ModuleList (or a vector of unique_ptr) grows without moving what it holds.
  nn::ModuleList layers;
  std::vector<std::unique_ptr<nn::Linear>> loose;
  std::vector<const void*> first_weights;
  for (int i = 0; i < 40; ++i) {
    nn::Linear& l = layers.emplace_back<nn::Linear>(4, 4);
    loose.push_back(std::make_unique<nn::Linear>(4, 4));
    first_weights.push_back(&l.weight);
  }
  for (size_t i = 0; i < 40; ++i) {
    nn::Linear& l = layers.at<nn::Linear>(i);
    EXPECT_EQ(&l.weight, first_weights[i]);
    EXPECT_EQ(layers.parameter(std::to_string(i) + ".weight").impl().get(), l.weight.impl().get());
  }
  EXPECT_EQ(layers.at<nn::Linear>(39).path(), "39");
  EXPECT_EQ(layers.num_parameters(), 40 * (16 + 4));
  // std::optional constructs in place too: an optional part of a model (BertModel's pooler)
  std::optional<Net> maybe;
  maybe.emplace();
  expect_registry_is(*maybe,
                     {&maybe->scale, &maybe->fc1.weight, &maybe->fc1.bias, &maybe->fc2.weight, &maybe->fc2.bias});
}

TEST(ModuleOwnership, ALibraryModelKeepsItsTiedWeightsAndCache) {
  Generator g(7);
  auto m = models::GPT(11, 8, {.d_model = 16, .nhead = 2, .num_layers = 1, .tie_weights = true}, g);
  EXPECT_EQ(m.head.weight.impl().get(), m.tok.weight.impl().get());
  EXPECT_EQ(m.parameter("head.weight").impl().get(), m.tok.weight.impl().get());
  const Tensor ids = tensor({1, 2, 3, 4}, {1, 4}).to(DType::Int64);
  NoGradGuard no_grad;
  models::GPTCache cache;
  const Tensor whole = m(ids).data();
  const Tensor stepwise = m.forward(ids.narrow(1, 0, 3), &cache).data();
  expect_close(stepwise, whole.narrow(1, 0, 3), 1e-6, 1e-6);
}
