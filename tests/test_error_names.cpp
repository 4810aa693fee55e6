// Errors name what the user called: a public op built from others (stack from concat, var from
// mean, mse_loss from sub, conv1d from conv2d, batch_norm from layer_norm) reports under its own
// name (OpScope, tensor/error.h), or checks its arguments in its own terms first; and each error
// has the type its cause calls for (a dtype problem is a DTypeError). Each case here once named
// the inner op, or had the wrong type.
#include <limits>

#include "file_helpers.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

using namespace mg;
using namespace mgtest;
using testing::HasSubstr;
using testing::StartsWith;

namespace {
// `call` must throw E whose message starts with "<op>: " (the op the user called).
template <class E>
void expect_named(const char* code, const std::function<void()>& call, const std::string& op) {
  try {
    call();
    ADD_FAILURE() << code << ": no error";
  } catch (const E& e) {
    EXPECT_THAT(e.what(), StartsWith(op + ": ")) << code;
  } catch (const std::exception& e) {
    ADD_FAILURE() << code << ": the wrong error type: " << e.what();
  }
}
}  // namespace
#define NAMED(E, op, ...) \
  expect_named<E>(        \
      #__VA_ARGS__, [&] { (void)(__VA_ARGS__); }, op)

TEST(ErrorNames, OpScopeRelabelsWhatThePartsRaise) {
  {
    const OpScope outer("stack");
    const OpScope inner("concat");  // nested: the outermost names the op
    try {
      throw ShapeError("concat: tensors of dtype float32 and float64");
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "stack: tensors of dtype float32 and float64 (raised by its concat)");
    }
    EXPECT_EQ(relabel_for_scope("stack: as it was"), "stack: as it was");
    EXPECT_EQ(relabel_for_scope("no op name here"), "stack: no op name here");
  }
  EXPECT_EQ(relabel_for_scope("concat: outside any scope"), "concat: outside any scope");
}

TEST(ErrorNames, CompositesNameTheOpCalled) {
  const Tensor f32 = zeros({2, 3}), f64 = zeros({2, 3}, DType::Float64);
  NAMED(DTypeError, "stack", stack(std::vector<Tensor>{f32, f64}, 0));
  NAMED(DTypeError, "stack", mg::stack({Variable(f32), Variable(f64)}, 0));
  NAMED(IndexError, "var", var(f32, {2}));
  NAMED(ValueError, "var", var(f32, {1, -1}));
  NAMED(IndexError, "std", mg::std(f32, {2}));
  NAMED(IndexError, "var", var(Variable(f32, true), {2}));
  NAMED(DTypeError, "mse_loss", mse_loss(Variable(f32), Variable(f64)));
  NAMED(DTypeError, "l1_loss", l1_loss(Variable(arange(6).view({2, 3})), Variable(arange(6).view({2, 3}))));
  NAMED(ValueError, "smooth_l1_loss",
        smooth_l1_loss(Variable(f32), Variable(f32), {.reduction = Reduction::BatchMean}));
  // conv1d checks in its own 3-D terms: the weight (1, 1, 0) once showed up as conv2d's (1, 1, 1, 0)
  try {
    conv1d(Variable(zeros({1, 1, 4})), Variable(zeros({1, 1, 0})));
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), StartsWith("conv1d: "));
    EXPECT_THAT(e.what(), HasSubstr("(1, 1, 0)"));
  }
  NAMED(DTypeError, "conv1d", conv1d(Variable(zeros({1, 1, 4})), Variable(zeros({1, 1, 2}, DType::Float64))));
  // batch and group norm: the input and the affine weights' dtypes, in their own words
  NAMED(DTypeError, "batch_norm",
        batch_norm(Variable(zeros({4, 3})), Tensor(), Tensor(), Variable(zeros({3}, DType::Float64)), Variable(), true,
                   0.1, 1e-5));
  NAMED(DTypeError, "group_norm", group_norm(Variable(zeros({4, 3})), 1, Variable(zeros({3}, DType::Float64))));
  NAMED(DTypeError, "batch_norm",
        batch_norm(Variable(zeros({4, 3}, DType::Int64)), Tensor(), Tensor(), Variable(), Variable(), true, 0.1, 1e-5));
  NAMED(DTypeError, "group_norm", group_norm(Variable(zeros({4, 3}, DType::Int64)), 1));
  // running statistics that share memory cannot be updated in place
  NAMED(
      ValueError, "batch_norm",
      batch_norm(Variable(randn({4, 3})), zeros({1}).expand({3}), ones({3}), Variable(), Variable(), true, 0.1, 1e-5));
}

TEST(ErrorNames, DTypeProblemsAreDTypeErrors) {
  // a gradient hook returning another dtype
  Variable x(zeros({3}), true);
  x.register_hook([](const Tensor& g) { return g.to(DType::Float64); });
  EXPECT_THROW(sum(x * 2.0).backward(), DTypeError);
  // GPT::generate with float ids
  models::GPT gpt(8, 6, {.d_model = 8, .nhead = 2, .num_layers = 1});
  NAMED(DTypeError, "GPT::generate", gpt.generate(zeros({1, 2}), 1));
  // Telemetry's probe must be int64 ids
  try {
    inspect::Telemetry t(gpt, [&](const Tensor& ids) { gpt(ids); }, {.vocab = 8, .probe = zeros({1, 6})});
    ADD_FAILURE() << "no error";
  } catch (const DTypeError& e) {
    EXPECT_THAT(e.what(), StartsWith("Telemetry: "));
  }
}

TEST(ErrorNames, ForwardHooksCannotDropAnOutput) {
  nn::Linear fc(3, 2);
  fc.register_forward_hook(
      [](const nn::Module&, const std::vector<Variable>&, std::vector<Variable>& out) { out[0] = Variable(); });
  try {
    fc(Variable(zeros({1, 3})));
    ADD_FAILURE() << "no error";
  } catch (const StateError& e) {
    EXPECT_THAT(e.what(), HasSubstr("forward hook: output 0 of Linear was replaced by an undefined Variable"));
  }
}

// A strict load of a tensor of the wrong shape lists it once, as mismatched, not also as missing;
// a training checkpoint loaded as weights says what it is and how to load it.
TEST(ErrorNames, LoadErrorsListEachNameOnce) {
  TinyMLP m;
  nn::StateDict sd = nn::state_dict(m);
  for (auto& [n, t] : sd)
    if (n == "fc1.weight") t = zeros({5, 3});
  try {
    nn::load_state_dict(m, sd);
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("mismatched: fc1.weight: shape (5, 3) in the file, (4, 3) in the model"));
    EXPECT_THAT(e.what(), testing::Not(HasSubstr("missing")));
  }
  const std::string path = temp_path("ckpt.safetensors");
  optim::AdamW opt(m.parameters());
  Variable loss = mse_loss(m(Variable(ones({2, 3}))), Variable(zeros({2, 2})));
  loss.backward();
  opt.step();
  optim::save_checkpoint(path, m, opt, 1);
  try {
    nn::load(m, path);
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("training checkpoint"));
    EXPECT_THAT(e.what(), HasSubstr("optim::load_checkpoint"));
  }
  EXPECT_NO_THROW(nn::load(m, path, {.ignore_prefixes = {"optimizer."}}));
}

// Sizes from hostile arguments: each a typed error or a right answer, never an overflow (UBSan).
TEST(ErrorNames, OverflowingSizes) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const Tensor s = ones({2, 3}).slice(0, 0, 2, kMax);  // one row: the stride is never used
  EXPECT_EQ(s.shape(), (Shape{1, 3}));
  EXPECT_EQ(s.to_vector<float>(), std::vector<float>(3, 1));
  for (bool ceil : {false, true}) {
    const Pool2dArgs a{.kernel_h = 2, .kernel_w = 2, .stride_h = kMax, .stride_w = kMax, .ceil_mode = ceil};
    EXPECT_EQ(max_pool2d(ones({1, 1, 4, 4}), a).y.shape(), (Shape{1, 1, 1, 1}));
    EXPECT_EQ(avg_pool2d(ones({1, 1, 4, 4}), a).shape(), (Shape{1, 1, 1, 1}));
  }
  // an empty shape whose other sizes multiply past 2^63: flatten(1) once gave (0, 0)
  EXPECT_THROW(zeros({0, int64_t{1} << 40, int64_t{1} << 40}), ValueError);
  EXPECT_THROW(zeros({0, 1, 1}).expand({0, int64_t{1} << 40, int64_t{1} << 40}), ValueError);
  EXPECT_EQ(zeros({0, int64_t{1} << 20, 4}).flatten(1).shape(), (Shape{0, int64_t{4} << 20}));
  // a view whose offset would wrap past the storage's end
  EXPECT_THROW(Tensor(ones({4}).storage(), DType::Float32, {2}, {1}, kMax), ValueError);
  // conv with a stride near 2^63 and padding: one output column, read from inside the image
  Conv2dArgs c;
  c.stride_w = kMax, c.pad_left = 2, c.pad_right = 2;
  EXPECT_EQ(conv2d(ones({1, 1, 1, 1}), ones({1, 1, 1, 1}), Tensor(), c).to_vector<float>(), std::vector<float>{0});
  c = Conv2dArgs{};
  c.stride_h = kMax;
  EXPECT_EQ(conv2d(ones({1, 1, 1, 2}), ones({1, 1, 1, 1}), Tensor(), c).to_vector<float>(), (std::vector<float>{1, 1}));
  // pictures of values near +-DBL_MAX (a NaN colour index once read outside its table)
  EXPECT_NO_THROW(viz::terminal_heatmap(from_vector<double>({-1e308, 1e308}, {1, 2}), {}, {}, 0));
  EXPECT_NO_THROW(viz::heatmap_svg(from_vector<double>({-1e308, 1e308}, {1, 2}), {}));
}

TEST(ErrorNames, MoreTypesAndSizes) {
  // score_heads (what Telemetry::record calls) with float ids
  models::GPT gpt(8, 6, {.d_model = 8, .nhead = 2, .num_layers = 1});
  NAMED(DTypeError, "score_heads",
        inspect::score_heads(
            gpt, [&](const Tensor& ids) { gpt(ids); }, zeros({1, 6}), 8));
  // MultiheadAttention with float64 input and float32 weights: the module's inputs, not its w_q's linear
  nn::MultiheadAttention mha(8, 2);
  NAMED(DTypeError, "MultiheadAttention", mha(Variable(zeros({1, 3, 8}, DType::Float64))));
  // KVCache and adam_step_: a dtype mismatch is a DTypeError
  nn::KVCache cache;
  EXPECT_THROW(cache.append(zeros({1, 2, 3, 4}), zeros({1, 2, 3, 4}, DType::Float64)), DTypeError);
  EXPECT_THROW(adam_step_(zeros({3}), zeros({3}, DType::Float64), zeros({3}), zeros({3}), {}), DTypeError);
  NAMED(DTypeError, "sample_logits",
        sample_logits(zeros({1, 3}, DType::Int64), 1.0, std::nullopt, default_generator()));
  NAMED(DTypeError, "batch_norm",
        batch_norm(Variable(randn({4, 3})), zeros({3}, DType::Int64), ones({3}), Variable(), Variable(), true, 0.1,
                   1e-5));
  // the order of an epoch too large to hold: a MemoryError, not std::length_error
  data::DataLoader loader(data::TensorDataset({zeros({1}).expand({int64_t{1} << 61})}), {.batch_size = 4});
  EXPECT_THROW(loader.order(0), MemoryError);
  // running statistics reset after the layer moved to float64 (copy_ of a float32 tensor failed)
  nn::BatchNorm1d bn(3);
  bn.to(DType::Float64);
  bn(Variable(randn({4, 3}).to(DType::Float64)));
  EXPECT_NO_THROW(bn.reset_running_stats());
  EXPECT_EQ(bn.running_var().to_vector<double>(), std::vector<double>(3, 1.0));
}

TEST(ErrorNames, WritersRaiseFileErrors) {
  const std::string file = temp_path("a_file");
  write_bytes(file, "x");
  EXPECT_THROW(viz::Report(file + "/sub", "t"), FileError);
}
