// Moving modules: a model returned from a function or kept in a std::vector is the same model in
// its new place. Its registry reads the new object's members (not the old one's), its hooks, hook
// handles and children's parent links follow it, and a move that could not keep those promises
// (a part of a model moved out alone, a module whose size is unknown, slicing) is refused.
#include <optional>
#include <type_traits>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::rnd;
using testing::HasSubstr;

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

Net make_net(uint64_t seed) {
  Generator g(seed);
  Net n(g);
  n.fc1.weight.set_data(n.fc1.weight.data() * 2.0);  // a named local: returning it may move it
  return n;
}

// Whether two tensors hold the same numbers.
bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && max(abs(a.to(DType::Float64) - b.to(DType::Float64))).item() == 0;
}

// The names and the objects (not copies) of a module's parameters and buffers.
std::vector<std::pair<std::string, const void*>> registry_of(const nn::Module& m) {
  std::vector<std::pair<std::string, const void*>> out;
  for (auto& [n, p] : m.named_parameters(true, false)) out.emplace_back(n, p.impl().get());
  for (auto& [n, b] : m.named_buffers()) out.emplace_back(n, b.storage().get());
  return out;
}
}  // namespace

// Library modules are move-constructible, never copyable, and not assignable (nn/module.h).
static_assert(std::is_move_constructible_v<nn::Linear> && std::is_move_constructible_v<models::GPT> &&
              std::is_move_constructible_v<nn::MultiheadAttention> && std::is_move_constructible_v<nn::LSTM> &&
              std::is_move_constructible_v<nn::Sequential> && std::is_move_constructible_v<nn::ModuleList> &&
              std::is_move_constructible_v<nn::BatchNorm1d> && std::is_move_constructible_v<models::BertModel> &&
              std::is_move_constructible_v<Net>);
static_assert(!std::is_copy_constructible_v<nn::Linear> && !std::is_move_assignable_v<nn::Linear> &&
              !std::is_move_assignable_v<Net>);

TEST(ModuleMove, AMovedModelReadsItsOwnMembersComputesTheSameAndTrains) {
  Net a = make_net(1);
  const Variable x(rnd({5, 3}, 2).to(DType::Float32));
  const Tensor before = a(x).data();
  const auto registry = registry_of(a);
  const Variable w1 = a.fc1.weight;
  optim::SGD opt(a.parameters(), optim::SGDOptions{.lr = 0.1});  // made before the move: it holds the same parameters

  Net b(std::move(a));
  EXPECT_EQ(registry_of(b), registry);  // the same names and the same objects
  EXPECT_TRUE(registry_of(a).empty());  // the moved-from module is empty
  EXPECT_EQ(b.parameter("fc1.weight").impl(), b.fc1.weight.impl());
  expect_close(b(x).data(), before, 0, 0);
  // The registry now points at b's members: assigning a member, converting, stepping all reach them.
  b.scale = Variable(full({2}, 3.0), true);
  EXPECT_EQ(b.parameter("scale").impl(), b.scale.impl());
  b.to(DType::Float64);
  EXPECT_EQ(b.fc2.bias.dtype(), DType::Float64);
  EXPECT_EQ(b.mask.dtype(), DType::Float64);  // a buffer member: converted through the moved entry
  b.to(DType::Float32);
  const Tensor w_before = b.fc1.weight.data().clone();
  sum(b(x)).backward();
  opt.step();
  EXPECT_FALSE(same(b.fc1.weight.data(), w_before));  // the optimizer stepped b's member
  EXPECT_EQ(w1.impl(), b.fc1.weight.impl());
  // The children's parent is the new object: paths and errors inside say where.
  EXPECT_EQ(b.fc2.parent(), &b);
  EXPECT_EQ(b.fc2.path(), "fc2");
  b.fc2.weight.set_data(ones({2, 5}));
  try {
    b(x);
    ADD_FAILURE();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), testing::StartsWith("in fc2 (Linear): "));
  }
}

TEST(ModuleMove, AVectorOfModulesGrowsAndEachKeepsItsOwnRegistry) {
  std::vector<nn::Linear> layers;  // no reserve: every growth moves the layers made so far
  Generator g(3);
  for (int i = 0; i < 9; ++i) layers.emplace_back(4, 4, nn::LinearOptions{}, g);
  std::vector<Net> nets;
  for (uint64_t s = 0; s < 5; ++s) nets.push_back(make_net(s));
  for (nn::Linear& l : layers) {
    EXPECT_EQ(l.parameter("weight").impl(), l.weight.impl());
    EXPECT_EQ(l.parameter("bias").impl(), l.bias.impl());
  }
  for (uint64_t s = 0; s < 5; ++s) {
    Net fresh = make_net(s);  // the same seed: the same numbers as the one that moved around
    const Variable x(rnd({2, 3}, 7).to(DType::Float32));
    expect_close(nets[s](x).data(), fresh(x).data(), 0, 0);
    EXPECT_EQ(nets[s].parameter("fc1.weight").impl(), nets[s].fc1.weight.impl());
    EXPECT_EQ(nets[s].fc1.parent(), &nets[s]);
  }
  // to() converts the members of each layer where it lives now.
  layers[0].to(DType::Float64);
  EXPECT_EQ(layers[0].weight.dtype(), DType::Float64);
  EXPECT_EQ(layers[1].weight.dtype(), DType::Float32);
}

TEST(ModuleMove, HooksAndTheirHandlesFollowTheModule) {
  Net a = make_net(4);
  std::vector<const nn::Module*> seen;
  nn::HookHandle h =
      a.register_forward_hook([&](const nn::Module& m, const std::vector<Variable>&, std::vector<Variable>& out) {
        seen.push_back(&m);
        out[0] = out[0] * 0.0;
      });
  nn::HookHandle child =
      a.fc1.register_forward_pre_hook([&](const nn::Module& m, std::vector<Variable>&) { seen.push_back(&m); });
  std::optional<Net> b;
  b.emplace(std::move(a));
  const Variable x(rnd({2, 3}, 5).to(DType::Float32));
  EXPECT_THROW(a(x), Error);  // the moved-from module: empty members, a typed error, and no hooks left
  EXPECT_TRUE(seen.empty());
  expect_close((*b)(x).data(), zeros({2, 2}), 0, 0);
  EXPECT_EQ(seen, (std::vector<const nn::Module*>{&b->fc1, &*b}));
  h.remove();  // the handle reaches the hook in its new place
  child.remove();
  seen.clear();
  EXPECT_FALSE(same((*b)(x).data(), zeros({2, 2})));
  EXPECT_TRUE(seen.empty());
}

TEST(ModuleMove, LibraryModelsAndContainersMoveWhole) {
  Generator g(6);
  models::GPT gpt(11, 8, {.d_model = 16, .nhead = 2, .num_layers = 2, .tie_weights = true}, g);
  const Tensor ids = randint(0, 11, {2, 8}, g);
  const Tensor logits = gpt(ids).data();
  const auto gpt_registry = registry_of(gpt);
  models::GPT moved(std::move(gpt));
  EXPECT_EQ(registry_of(moved), gpt_registry);
  expect_close(moved(ids).data(), logits, 0, 0);
  EXPECT_EQ(moved.head.weight.impl(), moved.tok.weight.impl());  // still tied
  EXPECT_EQ(moved.parameter("head.weight").impl(), moved.tok.weight.impl());
  EXPECT_EQ(moved.blocks.at<models::GPTBlock>(1).path(), "blocks.1");  // a container's child: parent followed

  nn::Sequential seq;
  seq.emplace_back<nn::Linear>(3, 5);
  seq.emplace_back<nn::ReLU>();
  seq.emplace_back<nn::BatchNorm1d>(5);
  const Variable x(rnd({4, 3}, 8).to(DType::Float32));
  seq.eval();
  const Tensor y = seq(x).data();
  nn::Sequential seq2(std::move(seq));
  expect_close(seq2(x).data(), y, 0, 0);
  EXPECT_EQ(seq2.at<nn::Linear>(0).parent(), &seq2);
  EXPECT_EQ(seq2.size(), 3u);

  // Modules whose slots live outside the object (an LSTM's per-layer weights in vectors) and
  // inside it (MultiheadAttention's optional rotary, BatchNorm's running statistics).
  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true}, g);
  const Variable seqx(rnd({5, 2, 3}, 9).to(DType::Float32));
  const Tensor out = std::get<0>(lstm(seqx)).data();
  const auto lstm_registry = registry_of(lstm);
  nn::LSTM lstm2(std::move(lstm));
  EXPECT_EQ(registry_of(lstm2), lstm_registry);
  expect_close(std::get<0>(lstm2(seqx)).data(), out, 0, 0);

  nn::BatchNorm1d bn(4);
  nn::BatchNorm1d bn2(std::move(bn));
  bn2(Variable(rnd({6, 4}, 10).to(DType::Float32)));  // training: updates the running mean it owns
  EXPECT_FALSE(same(bn2.running_mean(), zeros({4})));
  EXPECT_EQ(bn2.parameter("weight").impl(), bn2.weight.impl());

  nn::MultiheadAttention mha(8, 2, {.rotary = nn::RotaryEmbeddingOptions{}}, g);
  const auto mha_registry = registry_of(mha);
  const Variable q(rnd({1, 4, 8}, 11).to(DType::Float32));
  const Tensor att = mha(q, q, q).output.data();
  nn::MultiheadAttention mha2(std::move(mha));
  EXPECT_EQ(registry_of(mha2), mha_registry);
  expect_close(mha2(q, q, q).output.data(), att, 0, 0);
  EXPECT_EQ(mha2.rotary->parent(), &mha2);
}

namespace {
// Registers a module it does not own.
struct Borrower : nn::Callable<Borrower> {
  explicit Borrower(nn::Linear& shared) { register_module("shared", shared); }
  void forward() const {}
  std::string type_name() const override { return "Borrower"; }
};
// One layer registered in the model and in two of its parts (siblings of the layer).
struct SharedLayer : nn::Callable<SharedLayer> {
  nn::Linear common{2, 2};
  Borrower b1{common}, b2{common};
  SharedLayer() {
    register_module("b1", b1);
    register_module("b2", b2);
    register_module("common", common);
  }
  Variable forward(const Variable& x) const { return common(x); }
  std::string type_name() const override { return "SharedLayer"; }
};
// Derived from a library module without naming itself: its size is not known.
struct Wider : nn::Linear {
  Variable extra;
  Wider() : nn::Linear(2, 2) { register_parameter("extra", extra, zeros({2})); }
  std::string type_name() const override { return "Wider"; }
};
struct Doubled : nn::Callable<Doubled, nn::Linear> {
  Variable scale;
  Doubled() : Callable(3, 2) { register_parameter("scale", scale, ones({2})); }
  Variable forward(const Variable& x) const { return nn::Linear::forward(x) * 2.0; }
  std::string type_name() const override { return "Doubled"; }
};
// Derived from Module alone, with a member slot.
struct Plain : nn::Module {
  Variable w;
  Plain() { register_parameter("w", w, ones({2})); }
  std::string type_name() const override { return "Plain"; }
};
}  // namespace

TEST(ModuleMove, AModuleRegisteredInSiblingsMovesWithTheModel) {
  SharedLayer a;
  SharedLayer b(std::move(a));
  // The parts' entries point at b's layer, not at a's (a member of b, outside the parts themselves).
  EXPECT_EQ(b.b1.named_children().at(0).second, &b.common);
  EXPECT_EQ(b.b2.named_children().at(0).second, &b.common);
  EXPECT_EQ(b.parameter("b2.shared.weight").impl(), b.common.weight.impl());
  EXPECT_EQ(b.parameters().size(), 2u);  // listed once
  EXPECT_EQ(b.common.parent(), &b.b1);   // first registered in b1, as before the move
}

TEST(ModuleMove, MovesThatCouldNotKeepTheRegistryRightAreRefused) {
  // A part of a model moved out alone: the model would go on pointing at the old object.
  Net net = make_net(7);
  const Variable x(rnd({2, 3}, 12).to(DType::Float32));
  const Tensor y = net(x).data();
  try {
    nn::Linear taken(std::move(net.fc1));
    ADD_FAILURE();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Linear is registered in Net as \"fc1\""));
  }
  expect_close(net(x).data(), y, 0, 0);  // unchanged
  // The same for a module another one borrowed: it would go on pointing at the old object.
  nn::Linear lent(2, 2);
  Borrower borrower(lent);
  EXPECT_THROW(nn::Linear moved(std::move(lent)), ValueError);
  EXPECT_EQ(lent.parameters().size(), 2u);  // unchanged
  EXPECT_EQ(borrower.named_children().at(0).second, &lent);
  // Once the borrower is gone, it moves.
  {
    nn::Linear alone(2, 2);
    { Borrower b(alone); }
    nn::Linear moved(std::move(alone));
    EXPECT_EQ(moved.parameters().size(), 2u);
  }
  // Sizes that are not known: derived without naming itself, or from Module alone.
  Wider wider;
  try {
    Wider w2(std::move(wider));
    ADD_FAILURE();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the size of this Wider is not known"));
  }
  EXPECT_EQ(wider.parameters().size(), 3u);
  Plain plain;
  EXPECT_THROW(Plain p2(std::move(plain)), ValueError);
  // Slicing: a Doubled moved into a Linear would lose what Doubled adds.
  Doubled d;
  try {
    nn::Linear sliced(std::move(d));
    ADD_FAILURE();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("this Doubled would be moved into a variable of a class it derives from (slicing)"));
  }
  EXPECT_EQ(d.parameters().size(), 3u);  // unchanged: weight, bias and its own scale
  EXPECT_EQ(d.parameter("scale").impl(), d.scale.impl());
}

namespace {
// A member registered only outside the model, and a member borrowed by a module the model keeps
// in a ModuleList (on the heap: it does not move, its entry must follow).
struct Lender : nn::Callable<Lender> {
  nn::Linear own{2, 2}, lent{2, 2};
  Plain plain;  // its size is not known, but it moves as a part of a model whose size is
  nn::ModuleList list;
  Lender() {
    register_module("own", own);
    register_module("plain", plain);
    list.emplace_back<Borrower>(own);
    register_module("list", list);
  }
  void forward() const {}
  std::string type_name() const override { return "Lender"; }
};
}  // namespace

TEST(ModuleMove, EntriesPointingIntoTheModelFollowItFromAnywhere) {
  Lender a;
  Borrower outside(a.lent);  // registered nowhere in the model: an outside module borrowed it
  const auto life = a.lifetime();
  Lender b(std::move(a));
  EXPECT_TRUE(life.expired());  // a capture holding the old object's address learns it moved
  EXPECT_EQ(outside.named_children().at(0).second, &b.lent);
  EXPECT_EQ(b.list.at<Borrower>(0).named_children().at(0).second, &b.own);
  EXPECT_EQ(b.parameter("list.0.shared.weight").impl(), b.own.weight.impl());
  EXPECT_EQ(b.parameter("plain.w").impl(), b.plain.w.impl());
  EXPECT_EQ(b.parameters().size(), 3u);  // own's 2 (listed once), plain's w
  EXPECT_EQ(b.plain.parent(), &b);
  EXPECT_EQ(a.own.parent(), nullptr);  // the moved-from parts belong to nothing
  EXPECT_TRUE(a.parameters().empty());
}
