// Bad calls of test_bad_inputs.cpp on the surface added since the first catalogue: attention's
// new options, pad, repeat, einsum, interpolate, the norms' eps, rotary tables, the schedulers,
// LBFGS, the data loader and the tokenizers.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include <unistd.h>

#include "bad_inputs.h"
#include "bad_inputs_catalogue.h"

using namespace mg;
using namespace mgtest;

// The surface added since the first catalogue (einsum, pad, interpolate, attention's new options,
// the schedulers, LBFGS, the tokenizers, the data loader): each case once crashed, hung, overflowed,
// returned garbage, or named the wrong op.
void new_surface() {
  // scaled_dot_product_attention: 0 query heads over 1 key head divided by zero (SIGFPE) under
  // create_graph; head size 0 without a scale made every weight NaN
  {
    Variable q(zeros({1, 0, 3, 4}), true), k(ones({1, 1, 3, 4}), true), v(ones({1, 1, 3, 4}), true);
    const Variable y = sum(scaled_dot_product_attention(q, k, v));
    EXPECT_NO_THROW(grad({y}, {k}, {.create_graph = true, .allow_unused = true}));
    BAD(ShapeError, "scaled_dot_product_attention: q and k have head size 0",
        scaled_dot_product_attention(Variable(ones({1, 1, 3, 0})), Variable(ones({1, 1, 3, 0})),
                                     Variable(ones({1, 1, 3, 4}))));
    BAD(DTypeError, "self_attention_qkv: expected a floating input",
        self_attention_qkv(Variable(ones({1, 2, 6}, DType::Int64)), 1));
  }
  // pad: crops past the input (an IndexError from narrow), INT64_MIN (negated before any check), a
  // fill value the dtype cannot hold (named full), sizes no memory holds (std::bad_alloc), and
  // pad_index called directly (SIGFPE on circular of size 0, UB, out-of-range indices)
  BAD(ShapeError, "pad: cropping (-5, 10) removes more than the 3 elements", pad(ones({3}), {-5, 10}));
  BAD(ShapeError, "pad: cropping (2, -4)", pad(Variable(ones({3})), {2, -4}));
  BAD(ShapeError, "pad:", pad(ones({3}), {std::numeric_limits<int64_t>::min(), kBig}));
  BAD(ShapeError, "pad:", pad(Variable(ones({3})), {std::numeric_limits<int64_t>::min(), kBig}));
  BAD(ValueError, "pad: 1e+30 is not an int64 value", pad(ones({2}, DType::Int64), {1, 1}, PadMode::Constant, 1e30));
  BAD(MemoryError, "pad:", pad(ones({1}), {int64_t{1} << 40, 0}, PadMode::Replicate));
  BAD(ValueError, "pad: circular padding (1, 0) must not wrap", pad_index(0, 1, 0, PadMode::Circular));
  BAD(ValueError, "pad: replicate padding", pad_index(0, 1, 1, PadMode::Replicate));
  BAD(ValueError, "pad: reflect padding (5, 0) must be smaller", pad_index(1, 5, 0, PadMode::Reflect));
  BAD(ValueError, "pad: negative size", pad_index(-5, 0, 0, PadMode::Reflect));
  // a reflect pad of nothing is still a copy, as Tensor pad's (the Variable form returned x itself)
  {
    Variable x(ones({3}));
    EXPECT_NE(pad(x, {}, PadMode::Reflect).data().storage(), x.data().storage());
  }
  // repeat of size-1 dims returned a view of x (stride 0): writing the "copy" wrote x
  {
    const Tensor x = ones({1});
    Tensor y = repeat(x, {3});
    y.fill_(5);
    EXPECT_EQ(x.item(), 1.0);
  }
  // repeat_interleave: one count for 2^40 slices looped over them all (a hang); counts past memory
  // or int64 are named
  EXPECT_EQ(repeat_interleave(ones({1}).expand({int64_t{1} << 40}), from_vector<int64_t>({0}, {1}), 0).numel(), 0);
  BAD(MemoryError,
      "repeat_interleave:", repeat_interleave(ones({1}).expand({int64_t{1} << 40}), from_vector<int64_t>({1}, {1}), 0));
  BAD(ValueError, "repeat_interleave:", repeat_interleave(ones({4, 4}), int64_t{1} << 60, 0));
  BAD(MemoryError, "repeat_interleave:", repeat_interleave(ones({3}), int64_t{1} << 40));
  BAD(StateError, "tril: the tensor is undefined", tril(Tensor()));
  BAD(MemoryError, "tril:", tril(ones({1, 1}).expand({1 << 20, 1 << 20})));
  BAD(MemoryError, "flip:", flip(ones({1}).expand({int64_t{1} << 40}), {0}));
  BAD(MemoryError, "cumsum:", cumsum(ones({1}).expand({int64_t{1} << 40}), 0));
  // einsum: an int64 operand was named matmul
  BAD(DTypeError, "einsum: the operands must be floating",
      einsum("ij,jk->ik", {ones({2, 2}, DType::Int64), ones({2, 2}, DType::Int64)}));
  BAD(DTypeError,
      "einsum:", einsum("ij,jk->ik", {Variable(ones({2, 2}, DType::Int64)), Variable(ones({2, 2}, DType::Int64))}));
  // interpolate: the public matrix builder took any dtype and scale (a negative one wrote out of
  // bounds); huge sizes need dense matrices no memory holds
  BAD(DTypeError, "interpolate: expected float32 or float64",
      interpolation_matrix(2, 3, InterpolateMode::Linear, false, std::nullopt, DType::Int64));
  BAD(ValueError, "interpolate: scale factors must be finite and positive",
      interpolation_matrix(2, 3, InterpolateMode::Nearest, false, -1e-6, DType::Float32));
  BAD(ValueError, "interpolate: scale factors must be finite and positive",
      interpolation_matrix(2, 3, InterpolateMode::Nearest, false, NAN, DType::Float32));
  BAD(MemoryError, "interpolate: resampling 1 positions to 1099511627776",
      interpolate(zeros({1, 1, 1}), {.size = {int64_t{1} << 40}}));
  // layer norm's eps (rms_norm, group_norm and batch_norm refused a bad one; layer_norm gave NaN)
  BAD(ValueError, "layer_norm: eps must be finite and >= 0, got -1",
      layer_norm(Variable(ones({2, 3})), {3}, Variable(), Variable(), -1.0));
  BAD(ValueError, "layer_norm: eps must be finite and >= 0, got nan",
      layer_norm(ones({2, 3}), {3}, Tensor(), Tensor(), NAN));
  BAD(ValueError, "LayerNorm: eps must be finite and >= 0", nn::LayerNorm({3}, {.eps = -1}));
  // rotary tables and the module: sizes past memory were named "empty"
  BAD(Error, "rotary_tables:", rotary_tables(kBig - 1, 2));
  BAD(Error, "RotaryEmbedding:", nn::RotaryEmbedding(int64_t{1} << 62, {.max_seq_len = 1}));

  // schedules: a rate the optimizer itself would refuse (negative, inf), OneCycleLR's phases of no
  // length (NaN rates; PyTorch's ZeroDivisionError), a plateau schedule inside a sequence, a saved
  // NaN best, step counts at INT64_MAX, and errors naming the base class
  Variable w(zeros({1}), true);
  optim::SGD opt({w}, {.lr = 0.1});
  {
    optim::SGD big({w}, {.lr = 10});
    BAD(ValueError, "LambdaLR: at step 0 the rate of group 0 (initial rate 10) would be inf",
        optim::LambdaLR(big, [](int64_t) { return 1e308; }));
  }
  {
    optim::StepLR huge(opt, 1, 1e300);
    huge.step();
    BAD(ValueError, "StepLR: at step 2 the rate", huge.step());
    EXPECT_EQ(huge.last_step(), 1);  // a refused step leaves the schedule where it was
  }
  BAD(ValueError, "OneCycleLR: with total_steps 2 and pct_start 0.5 the first phase has no steps",
      optim::OneCycleLR(opt, 0.1, 2, {.pct_start = 0.5, .cycle_momentum = false}));
  BAD(ValueError, "OneCycleLR: with total_steps 4 and pct_start 1 the last phase",
      optim::OneCycleLR(opt, 0.1, 4, {.pct_start = 1, .cycle_momentum = false}));
  BAD(ValueError, "OneCycleLR: div_factor",
      optim::OneCycleLR(opt, 0.1, 10, {.cycle_momentum = false, .final_div_factor = 1e-310}));
  BAD(ValueError, "OneCycleLR: max_lr 0.1 with div_factor",
      optim::OneCycleLR(opt, 0.1, 10, {.cycle_momentum = false, .div_factor = 1e-310}));
  {
    optim::StepLR a(opt, 2);
    optim::ReduceLROnPlateau plateau(opt);
    BAD(ValueError, "SequentialLR: scheduler 1 is a ReduceLROnPlateau", optim::SequentialLR(opt, {&a, &plateau}, {3}));
    BAD(FileError, "ReduceLROnPlateau: the saved best metric is NaN",
        plateau.check_state({{"best", NAN}, {"num_bad_epochs", 0}, {"cooldown_counter", 0}}));
    plateau.set_step(kBig);
    BAD(StateError, "ReduceLROnPlateau: the step count", plateau.step(1.0));
    BAD(ValueError, "StepLR: step must be >= 0", a.set_step(-1));
    a.set_step(kBig);
    BAD(StateError, "StepLR: the step count", a.step());
    optim::OneCycleLR cycle(opt, 0.1, 3, {.cycle_momentum = false});
    optim::SequentialLR seq(opt, {&a, &cycle}, {1});
    seq.set_step(4);
    BAD(ValueError, "SequentialLR: tried to step 4 times", seq.step());
  }
  // LBFGS: max_iter * 5 / 4 overflowed (one iteration instead of many); NaN and inf in a saved state
  {
    Variable p(full({2}, 3.0, DType::Float64), true);
    optim::LBFGS lbfgs({p}, {.max_iter = int64_t{1} << 61});
    lbfgs.step([&] {
      lbfgs.zero_grad();
      Variable l = sum(p * p);
      l.backward();
      return l;
    });
    EXPECT_LT(std::abs(p.data().at({0})), 1e-6);  // converged: the run was not cut to one iteration
    std::map<std::string, Tensor> state = lbfgs.shared_state();
    state["scalars"] = from_vector<double>({1, NAN, 0, 1, 5}, {5});
    BAD(FileError, "load_checkpoint: LBFGS's H_diag is nan", lbfgs.check_shared_state(state));
    state = lbfgs.shared_state();
    state["scalars"] = from_vector<double>({1, 1, 0, 1, 1e300}, {5});
    BAD(FileError, "load_checkpoint: LBFGS's n_iter", lbfgs.check_shared_state(state));
    state = lbfgs.shared_state();
    state["d"] = full(state["d"].shape(), INFINITY, DType::Float64);
    BAD(FileError, "load_checkpoint: LBFGS \"d\" holds NaN or inf", lbfgs.check_shared_state(state));
  }

  // the data loader: prefetch_factor INT64_MAX deadlocked (taken + depth overflowed), the epoch
  // count wrapped, and a dataset's error named only the dataset
  {
    data::DataLoader dl(data::TensorDataset({arange(20).to(DType::Float32).reshape({20, 1})}),
                        {.batch_size = 1, .num_workers = 1, .prefetch_factor = kBig});
    int64_t batches = 0;
    for (const data::Batch& b : dl) batches += b.size() == 1;
    EXPECT_EQ(batches, 20);
    dl.set_epoch(kBig);
    BAD(StateError, "DataLoader: the epoch count", dl.begin());
    struct Ragged : data::Dataset {
      int64_t size() const override { return 3; }
      data::Batch get(int64_t i) const override { return {zeros({i + 1})}; }
    };
    BAD(ShapeError, "DataLoader: field 0 of example 1",
        data::DataLoader(std::make_shared<Ragged>(), {.batch_size = 3}).batch(0, 0));
  }

  // tokenizers: a vocabulary id nested 200 000 deep overflowed the stack (the message dumped it);
  // WordPiece was cubic in a word's length with the length cap raised, took invalid UTF-8 in
  // wordpiece(), and named tokenize or id_to_token for errors of encode and decode
  {
    const std::string dir = ::testing::TempDir() + "minigrad_bad_tokenizers_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/vocab.json") << "{\"a\": " << std::string(200000, '[') << std::string(200000, ']') << "}";
    std::ofstream(dir + "/merges.txt") << "#version: 0.2\n";
    BAD(ValueError, "the id of token 'a' is a JSON array",
        data::GPT2Tokenizer::from_files(dir + "/vocab.json", dir + "/merges.txt"));
    data::WordPieceOptions o;
    o.max_input_chars_per_word = kBig;
    const data::WordPieceTokenizer wp({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##a", "b"}, o);
    EXPECT_EQ(wp.tokenize(std::string(20000, 'a') + "b").size(), 1u);  // [UNK]: "##b" is not a piece; it finished
    EXPECT_EQ(wp.tokenize(std::string(20000, 'a')).size(), 20000u);
    BAD(ValueError, "WordPieceTokenizer::wordpiece: the word is not valid UTF-8 (byte offset 0)",
        wp.wordpiece("\x80hello"));
    BAD(ValueError, "WordPieceTokenizer::encode:", wp.encode("hello \xff"));
    BAD(ValueError, "WordPieceTokenizer::encode_batch:", wp.encode_batch({"a", "\xff"}));
    BAD(IndexError, "WordPieceTokenizer::decode: id 99 is out of range", wp.decode({0, 99}));
    std::filesystem::remove_all(dir);
  }
}
