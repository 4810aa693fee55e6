// Living with nn::Module: the member and the registry are one object (weight tying, to(), apply,
// load), hooks, and errors that say where in the model they happened.
#include <filesystem>
#include <map>
#include <set>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::rnd;
using testing::HasSubstr;

namespace {
// A module of a user's own with a buffer member, as a learner writes one.
struct Masked : nn::Callable<Masked> {
  Tensor mask;
  Variable scale;
  Masked() {
    register_buffer("mask", mask, tensor({1, 0, 1}, {3}));
    register_parameter("scale", scale, ones({3}));
  }
  Variable forward(const Variable& x) const { return x * scale * Variable(mask); }
  std::string type_name() const override { return "Masked"; }
};

std::filesystem::path temp_dir(const std::string& test) {
  auto d = std::filesystem::temp_directory_path() / ("mg_module_" + test + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

models::GPTOptions small(bool tie) { return {.d_model = 16, .nhead = 2, .num_layers = 2, .tie_weights = tie}; }
}  // namespace

// The trap: `head.weight = tok.weight` used to leave the head's old matrix in the registry, so the
// model counted (and an optimizer stepped) a parameter nothing used any more.
TEST(WeightTying, TheSharedMatrixIsListedCountedAndOptimizedOnce) {
  Generator g1(1), g2(1);
  models::GPT untied(11, 8, small(false), g1), tied(11, 8, small(true), g2);
  EXPECT_EQ(tied.parameters().size() + 1, untied.parameters().size());
  EXPECT_EQ(tied.num_parameters() + 11 * 16, untied.num_parameters());
  EXPECT_EQ(tied.head.weight.impl(), tied.tok.weight.impl());
  // Listed once, under the first name; every name still finds it.
  int shared = 0;
  for (auto& [n, p] : tied.named_parameters()) shared += p.impl() == tied.tok.weight.impl();
  EXPECT_EQ(shared, 1);
  EXPECT_EQ(tied.parameter("head.weight").impl(), tied.tok.weight.impl());
  EXPECT_EQ(tied.named_parameters(true, false).size(), untied.named_parameters().size());
  optim::AdamW opt(tied.parameters());  // would refuse a parameter listed twice
  EXPECT_EQ(opt.groups()[0].params.size(), tied.parameters().size());
}

TEST(WeightTying, TheSharedMatrixGetsTheSumOfBothUsesGradients) {
  Generator g1(2), g2(2);
  models::GPT untied(11, 8, small(false), g1), tied(11, 8, small(true), g2);
  untied.to(DType::Float64), tied.to(DType::Float64);
  // The untied model with the head set to the embedding's values computes the same function;
  // its two gradients must add up to the tied model's one.
  untied.head.weight.data().copy_(untied.tok.weight.data());
  for (auto& [n, p] : tied.named_parameters()) EXPECT_EQ(p.shape(), untied.parameter(n).shape()) << n;
  Generator gi(3);
  const Tensor ids = randint(0, 11, {3, 8}, gi), targets = randint(0, 11, {3 * 8}, gi);
  auto loss = [&](models::GPT& m) { return cross_entropy(m(ids).reshape({3 * 8, 11}), targets); };
  const Variable lu = loss(untied), lt = loss(tied);
  expect_close(lt.data(), lu.data(), 1e-12, 1e-12);
  lu.backward();
  lt.backward();
  expect_close(tied.tok.weight.grad(), untied.tok.weight.grad() + untied.head.weight.grad(), 1e-12, 1e-12);
  // Both uses really contribute: neither part alone is the sum.
  EXPECT_GT(max(abs(untied.head.weight.grad())).item(), 1e-3);
  EXPECT_GT(max(abs(untied.tok.weight.grad())).item(), 1e-3);
}

// safetensors has no two names for one buffer: the tensor is written once and the other name is
// an alias in the metadata, as safetensors.torch.save_model writes it.
TEST(WeightTying, SaveAndLoadKeepTheTie) {
  const auto dir = temp_dir("tie");
  const std::string file = (dir / "tied.safetensors").string();
  Generator g1(4), g2(5), g3(6);
  models::GPT saved(11, 8, small(true), g1), fresh(11, 8, small(true), g2), untied(11, 8, small(false), g3);
  nn::save(saved, file);
  const SafeTensors st = load_safetensors(file);
  EXPECT_TRUE(st.find("tok.weight").defined());
  EXPECT_FALSE(st.find("head.weight").defined());
  EXPECT_EQ(st.metadata.at("head.weight"), "tok.weight");

  nn::load(fresh, file);  // into a tied model: one copy, still one parameter
  EXPECT_EQ(fresh.head.weight.impl(), fresh.tok.weight.impl());
  expect_close(fresh.tok.weight.data(), saved.tok.weight.data(), 0, 0);
  nn::load(untied, file);  // into an untied one: the same values at both ends
  expect_close(untied.head.weight.data(), saved.tok.weight.data(), 0, 0);
  expect_close(untied.tok.weight.data(), saved.tok.weight.data(), 0, 0);

  // An untied file whose two matrices differ cannot fill one tied matrix: an error, nothing changed.
  const std::string other = (dir / "untied.safetensors").string();
  nn::save(untied, other);
  untied.head.weight.data().fill_(0.5);
  nn::save(untied, other);
  const Tensor before = fresh.tok.weight.data().clone();
  try {
    nn::load(fresh, other);
    ADD_FAILURE() << "loaded two different matrices into one";
  } catch (const FileError& e) {
    EXPECT_THAT(
        e.what(),
        HasSubstr("tok.weight and head.weight: one tied tensor in the model, but different values in the file"));
  }
  expect_close(fresh.tok.weight.data(), before, 0, 0);
  std::filesystem::remove_all(dir);
}

// The trap: to() replaced the registry's copy of a buffer and left the member as it was.
TEST(ModuleSlots, ToConvertsTheMembersThemselves) {
  Masked m;
  m.to(DType::Float64);
  EXPECT_EQ(m.mask.dtype(), DType::Float64);
  EXPECT_EQ(m.scale.dtype(), DType::Float64);
  EXPECT_EQ(m.buffer("mask").storage(), m.mask.storage());
  const Variable y = m(Variable(ones({3}, DType::Float64)));  // float32 mask * float64 x would be a DTypeError
  expect_close(y.data(), tensor({1, 0, 1}, {3}).to(DType::Float64), 0, 0);
}

// As PyTorch: a module converts to floating dtypes only (to(Int64) converted frozen parameters and
// buffers, then failed half way with set_data's error at the first trainable one).
TEST(ModuleSlots, ToAnIntegerDtypeIsRefusedBeforeAnythingChanges) {
  Masked m;
  try {
    m.to(DType::Int64);
    ADD_FAILURE() << "no error";
  } catch (const DTypeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Module::to: int64 is not a floating dtype"));
  }
  EXPECT_EQ(m.mask.dtype(), DType::Float32);
  EXPECT_EQ(m.scale.dtype(), DType::Float32);
}

TEST(ModuleSlots, AssignmentsThroughApplyAndLoadsReachTheRegistry) {
  nn::Sequential net;
  net.emplace_back<nn::Linear>(3, 2);
  net.emplace_back<nn::ReLU>();
  net.emplace_back<nn::Linear>(2, 1);
  // apply() that replaces members (a custom init): the registry sees the new Variables.
  net.apply([](nn::Module& m) {
    if (auto* lin = dynamic_cast<nn::Linear*>(&m)) {
      lin->weight = Variable(full(lin->weight.shape(), 0.25), true);
      lin->bias = Variable();  // PyTorch's `module.bias = None`
    }
  });
  auto named = net.named_parameters();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].first, "0.weight");
  expect_close(named[0].second.data(), full({2, 3}, 0.25), 0, 0);
  EXPECT_EQ(net.num_parameters(), 2 * 3 + 1 * 2);
  expect_close(net(Variable(ones({1, 3}))).data(), full({1, 1}, 2 * 0.75 * 0.25), 1e-7, 0);
  // A load writes into the member the forward uses.
  nn::load_state_dict(net, {{"0.weight", full({2, 3}, 1.0)}, {"2.weight", full({1, 2}, 2.0)}});
  expect_close(net.at<nn::Linear>(0).weight.data(), full({2, 3}, 1.0), 0, 0);
  expect_close(net(Variable(ones({1, 3}))).data(), full({1, 1}, 12.0), 0, 0);
}

// ---------------------------------------------------------------- hooks

TEST(ModuleHooks, PreHooksReplaceInputsAndForwardHooksReplaceOutputs) {
  nn::Linear lin(3, 2);
  const Variable x(rnd({4, 3}, 1).to(DType::Float32));
  const Tensor plain = lin(x).data().clone();
  std::vector<std::string> order;
  nn::HookHandle pre = lin.register_forward_pre_hook([&](const nn::Module& m, std::vector<Variable>& in) {
    order.push_back("pre " + m.type_name());
    in[0] = in[0] * 2.0;
  });
  nn::HookHandle post =
      lin.register_forward_hook([&](const nn::Module&, const std::vector<Variable>& in, std::vector<Variable>& out) {
        order.push_back("forward");
        expect_close(in[0].data(), x.data() * 2.0, 0, 0);  // the hook sees the inputs the forward used
        out[0] = out[0] + 1.0;
      });
  const Tensor hooked = lin(x).data();
  EXPECT_EQ(order, (std::vector<std::string>{"pre Linear", "forward"}));
  // linear(2x) + 1 = 2 (x W^T) + b + 1 = 2 plain - b + 1
  expect_close(hooked, plain * 2.0 - lin.bias.data() + 1.0, 1e-6, 1e-6);
  pre.remove();
  post.remove();
  post.remove();  // twice does nothing
  expect_close(lin(x).data(), plain, 0, 0);
  EXPECT_FALSE(lin.has_forward_hooks());
}

TEST(ModuleHooks, EveryModuleThatRunsCallsItsHooks) {
  Generator g(7);
  models::GPT gpt(11, 8, small(false), g);
  nn::Sequential cnn;
  cnn.emplace_back<nn::Conv2d>(1, 2, 3, nn::Conv2dOptions{.padding = 1});
  cnn.emplace_back<nn::BatchNorm2d>(2);
  cnn.emplace_back<nn::ReLU>();
  cnn.emplace_back<nn::MaxPool2d>(2);
  cnn.emplace_back<nn::Flatten>();
  cnn.emplace_back<nn::Linear>(8, 3);
  for (nn::Module* model : {static_cast<nn::Module*>(&gpt), static_cast<nn::Module*>(&cnn)}) {
    std::set<std::string> fired, all;
    std::set<std::string> without_forward;
    for (auto& [name, m] : model->named_modules()) {
      if (!m->runs_hooks()) {  // a ModuleList has no forward of its own
        without_forward.insert(name);
        continue;
      }
      all.insert(name);
      m->register_forward_hook([&fired, name = name](const nn::Module&, const std::vector<Variable>&,
                                                     std::vector<Variable>&) { fired.insert(name); });
    }
    if (model == &gpt) {
      gpt(randint(0, 11, {2, 8}, g));
      EXPECT_EQ(without_forward, std::set<std::string>{"blocks"});
    } else {
      cnn(Variable(rnd({2, 1, 4, 4}, 2).to(DType::Float32)));
      EXPECT_TRUE(without_forward.empty());
    }
    EXPECT_EQ(fired, all);
  }
}

namespace {
// A model written by a user, not by the library: its forward is the plain computation, and being
// called as net(x) gives it hooks and errors that name where they happened.
struct TwoLayers : nn::Callable<TwoLayers> {
  nn::Linear fc1, fc2;
  TwoLayers() : fc1(3, 4), fc2(4, 2) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Variable forward(const Variable& x, double scale = 1.0) const { return fc2(relu(fc1(x))) * scale; }
  std::string type_name() const override { return "TwoLayers"; }
};
struct Outer : nn::Callable<Outer> {
  TwoLayers inner;
  Outer() { register_module("inner", inner); }
  Variable forward(const Variable& x) const { return inner(x, 2.0); }
  std::string type_name() const override { return "Outer"; }
};
// The same model derived from Module alone: it has no call that could run hooks.
struct Plain : nn::Module {
  std::string type_name() const override { return "Plain"; }
};
}  // namespace

TEST(ModuleHooks, AUserModuleGetsHooksAndErrorPathsFromBeingCalled) {
  Outer net;
  const Variable x(rnd({5, 3}, 1).to(DType::Float32));
  const Variable plain = net.inner.forward(x, 2.0);  // no hooks yet: the same numbers either way
  expect_close(net(x).data(), plain.data(), 0, 0);
  std::vector<std::string> order;
  net.inner.register_forward_pre_hook([&](const nn::Module& m, std::vector<Variable>& in) {
    order.push_back("pre " + m.type_name());
    ASSERT_EQ(in.size(), 1u);  // the Variable among (x, 2.0); the double passes unseen
    in[0] = in[0] * 0.0;       // replace the input: the output is then fc2(relu(b1)) * 2 for every row
  });
  net.inner.register_forward_hook([&](const nn::Module&, const std::vector<Variable>& in, std::vector<Variable>& out) {
    order.push_back("hook");
    expect_close(in[0].data(), zeros({5, 3}), 0, 0);  // hooks see the inputs as the pre-hooks left them
    out[0] = out[0] + 1.0;
  });
  const Variable y = net(x);
  EXPECT_EQ(order, (std::vector<std::string>{"pre TwoLayers", "hook"}));
  const Variable expected = net.inner.forward(Variable(zeros({5, 3})), 2.0) + 1.0;
  expect_close(y.data(), expected.data(), 0, 0);
  // Calling forward directly skips the hooks, as in PyTorch.
  order.clear();
  expect_close(net.inner.forward(x, 2.0).data(), plain.data(), 0, 0);
  EXPECT_TRUE(order.empty());
  // An error inside says where it happened, in the user's own model too.
  Outer broken;
  broken.inner.fc2.weight.set_data(ones({2, 5}));
  try {
    broken(x);
    ADD_FAILURE();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), testing::StartsWith("in inner.fc2 (Linear): "));
  }
  // A hook on a module nothing can call with hooks is refused, not left never to fire.
  Plain p;
  try {
    p.register_forward_hook([](const nn::Module&, const std::vector<Variable>&, std::vector<Variable>&) {});
    ADD_FAILURE();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nn::Callable<Plain>"));
  }
  EXPECT_THROW(p.register_forward_pre_hook([](const nn::Module&, std::vector<Variable>&) {}), ValueError);
}

namespace {
// A model that extends a library module names itself in Callable, so that m(x) runs its forward.
struct Doubled : nn::Callable<Doubled, nn::Linear> {
  Doubled() : Callable(3, 2) {}
  Variable forward(const Variable& x, const Tensor& mask = Tensor()) const {
    const Variable y = nn::Linear::forward(x) * 2.0;
    return mask.defined() ? y * Variable(mask) : y;
  }
  std::string type_name() const override { return "Doubled"; }
};
}  // namespace

TEST(ModuleHooks, AModuleExtendingALibraryModuleRunsItsOwnForward) {
  Doubled m;
  const Variable x(rnd({4, 3}, 3).to(DType::Float32));
  expect_close(m(x).data(), (m.nn::Linear::forward(x) * 2.0).data(), 0, 0);
  // with a hook, an optional Tensor argument left undefined reaches the hook as an undefined Variable
  int calls = 0;
  m.register_forward_pre_hook([&](const nn::Module&, std::vector<Variable>& in) {
    ++calls;
    ASSERT_EQ(in.size(), 2u);
    EXPECT_FALSE(in[1].defined());
  });
  expect_close(m(x, Tensor()).data(), (m.nn::Linear::forward(x) * 2.0).data(), 0, 0);
  EXPECT_EQ(calls, 1);
}

TEST(ModuleHooks, TokenIdsReachHooksAsVariablesAndGoBackAsTensors) {
  Generator g(4);
  nn::Embedding emb(10, 3, {}, g);
  const Tensor ids = from_vector<int64_t>({1, 2, 3}, {3});
  emb.register_forward_pre_hook([](const nn::Module&, std::vector<Variable>& in) {
    EXPECT_FALSE(in.at(0).requires_grad());
    in[0] = Variable(from_vector<int64_t>({7, 7, 7}, {3}));  // read token 7 instead
  });
  const Variable out = emb(ids);
  expect_close(out.data(), emb.weight.data().narrow(0, 7, 1).expand({3, 3}), 0, 0);
}

TEST(GradHooks, HooksSeeAndReplaceGradientsAndRunAfterAccumulation) {
  const Variable x(tensor({1, 2, 3}, {3}), true);
  const Variable y = x * x;  // dy/dx = 2x
  Tensor seen;
  GradHookHandle on_y = y.register_hook([&](const Tensor& g) {
    seen = g.clone();
    return g * 10.0;  // what flows on into mul's backward
  });
  GradHookHandle on_x = x.register_hook([](const Tensor& g) { return g + 1.0; });  // before accumulation
  std::vector<float> at_post;
  int posts = 0;
  GradHookHandle post = x.register_post_accumulate_grad_hook([&](const Variable& leaf) {
    ++posts;
    at_post = leaf.grad().to_vector<float>();
  });
  y.sum().backward();
  expect_close(seen, ones({3}), 0, 0);
  expect_close(x.grad(), tensor({21, 41, 61}, {3}), 0, 0);  // 10 * 2x + 1
  EXPECT_EQ(posts, 1);
  EXPECT_EQ(at_post, (std::vector<float>{21, 41, 61}));
  on_y.remove();
  on_x.remove();
  x.zero_grad();
  (x * x).sum().backward();
  expect_close(x.grad(), tensor({2, 4, 6}, {3}), 0, 0);
  EXPECT_EQ(posts, 2);
  post.remove();
  EXPECT_THROW(Variable(ones({2})).register_hook([](const Tensor& g) { return g; }), StateError);
  EXPECT_THROW(y.register_post_accumulate_grad_hook([](const Variable&) {}), StateError);
  // A hook that returns another shape is an error naming the variable.
  Variable w(ones({2}), true);
  w.set_name("w");
  w.register_hook([](const Tensor&) { return ones({3}); });
  try {
    (w * 2.0).sum().backward();
    ADD_FAILURE();
  } catch (const ShapeError& e) {
    EXPECT_THAT(
        e.what(),
        HasSubstr("register_hook: a hook on 'w' returned a gradient of shape (3,) for a gradient of shape (2,)"));
  }
}

// The hook a data-parallel trainer needs: once per backward for each parameter, after its whole
// gradient (both uses of a tied matrix summed) is in .grad().
TEST(GradHooks, PostAccumulateHookFiresOncePerParameterWithTheWholeGradient) {
  Generator g(8);
  models::GPT tied(11, 8, small(true), g);
  std::map<VariableImpl*, int> calls;
  for (auto& p : tied.parameters())
    p.register_post_accumulate_grad_hook([&](const Variable& leaf) {
      ++calls[leaf.impl().get()];
      EXPECT_TRUE(leaf.grad().defined());
    });
  const Tensor ids = randint(0, 11, {2, 8}, g);
  cross_entropy(tied(ids).reshape({16, 11}), randint(0, 11, {16}, g)).backward();
  EXPECT_EQ(calls.size(), tied.parameters().size());
  for (auto& [impl, n] : calls) EXPECT_EQ(n, 1);
}

// ---------------------------------------------------------------- where an error happened

namespace {
// A user's model whose forward calls its submodules: they know their paths.
struct Stack : nn::Callable<Stack> {
  nn::Linear embed{4, 8};
  nn::ModuleList blocks;
  Stack() {
    register_module("embed", embed);
    register_module("blocks", blocks);
    for (int i = 0; i < 3; ++i) blocks.emplace_back<models::GPTBlock>(8, 2);
  }
  Variable forward(const Variable& x) const {
    Variable h = embed(x);
    for (size_t i = 0; i < blocks.size(); ++i) h = blocks.at<models::GPTBlock>(i)(h);
    return h;
  }
  std::string type_name() const override { return "Stack"; }
};
}  // namespace

TEST(ModuleErrors, AnErrorInsideAForwardNamesWhereInTheModel) {
  Stack net;
  net.blocks.at<models::GPTBlock>(2).ln_1.weight.set_data(ones({5}));  // a broken layer deep inside
  try {
    net(Variable(ones({1, 3, 4})));
    ADD_FAILURE();
  } catch (const ShapeError& e) {  // the same error type
    EXPECT_THAT(e.what(), testing::StartsWith("in blocks.2.ln_1 (LayerNorm): layer_norm: "));
  }
  Generator g(9);
  models::GPT gpt(11, 8, small(false), g);
  try {
    gpt(tensor({1, 20}, {1, 2}).to(DType::Int64));
    ADD_FAILURE();
  } catch (const IndexError& e) {
    EXPECT_THAT(e.what(), testing::StartsWith("in tok (Embedding): embedding: "));
  }
  // A module called on its own needs no path: its message is the op's alone.
  nn::Linear lin(4, 2);
  try {
    lin(Variable(ones({3})));
    ADD_FAILURE();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), testing::Not(HasSubstr("in ")));
  }
  // After the error, nothing is left on the stack of running modules.
  try {
    nn::load_state_dict(lin, {});
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), testing::StartsWith("load: "));
  }
}
