// Small, fast versions of the examples: they assert what was learned (accuracy, where the
// attention mass sits, equal outputs after folding, equal losses), not just that a program ran.
// Each example's main.cpp is compiled here without its main().
#define MG_EXAMPLE_NO_MAIN
#include "examples/char_gpt/main.cpp"
#include "examples/char_lstm/main.cpp"
#include "examples/digits_cnn/main.cpp"
#include "examples/hand_attention/main.cpp"
#include "examples/heads_specialise/main.cpp"
#include "examples/one_matrix_per_head/main.cpp"
#include "examples/seq2seq_cross_attention/main.cpp"
#include "examples/where_weights_come_from/main.cpp"
#include "helpers.h"

#include <filesystem>
#include <fstream>

using namespace mg;

class Examples : public testing::Test {
 protected:
  void SetUp() override { set_num_threads(1); }  // tiny models: one thread is fastest
};

TEST_F(Examples, HandAttentionSetByHand) {
  const hand_attention::HandResult h = hand_attention::hand_set();
  mgtest::expect_values(h.q, {4, 2}, {0, 1, 0, 1, 0, 1, 0, 1});
  mgtest::expect_values(h.scores, {4, 4}, {0, 0, 10, 0, 0, 0, 10, 0, 0, 0, 10, 0, 0, 0, 10, 0});
  // every row: e^10 / (e^10 + 3) on the B unscaled; e^(10/sqrt 2) / (e^(10/sqrt 2) + 3) scaled
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_NEAR(h.attn.at({r, 2}), std::exp(10.0) / (std::exp(10.0) + 3), 1e-6);
    EXPECT_NEAR(h.attn_scaled.at({r, 2}), std::exp(10 / std::sqrt(2.0)) / (std::exp(10 / std::sqrt(2.0)) + 3), 1e-6);
  }
}

TEST_F(Examples, HandAttentionLearnedFromRandomWeights) {
  hand_attention::Config c;
  c.steps = 150;
  const hand_attention::TrainResult r = hand_attention::train(c);
  EXPECT_GE(r.eval.accuracy, 0.99);
  EXPECT_GE(r.eval.min_mass, 0.9);  // every row's attention on the B
  // Different numbers from the hand-set matrices, the same behaviour: in W_Q W_K^T, column B
  // beats column A by a wide margin for both query tokens.
  const Tensor M = matmul(r.W_Q, r.W_K.transpose(0, 1));
  for (int64_t q = 0; q < 2; ++q) EXPECT_GT(M.at({q, 1}) - M.at({q, 0}), 4.0);
  EXPECT_GT(max(abs(r.W_Q - tensor({0, 1, 0, 1}, {2, 2}))).item(), 0.5);
}

TEST_F(Examples, WhereWeightsComeFrom) {
  where_weights::Config c;
  c.steps = 250;
  Generator g(c.seed);
  where_weights::Model m(c, g);
  const where_weights::RunResult r = where_weights::train(m, c, where_weights::Variant::Learned, g);
  EXPECT_GE(r.test_accuracy, 0.99);
  // one backward reaches the embeddings and all four attention matrices
  for (auto& [name, norm] : r.first_grad_norms)
    if (name.find("weight") != std::string::npos) EXPECT_GT(norm, 1e-4) << name;
  EXPECT_EQ(where_weights::embedding_vs_onehot(m, c, g), 0.0);
  const where_weights::ContextResult ctx = where_weights::static_vs_contextual(m, c);
  EXPECT_DOUBLE_EQ(ctx.embedding_cosine, 1.0);
  EXPECT_LT(ctx.contextual_cosine, 0.9);
  EXPECT_THAT(r.graph_dot, testing::HasSubstr("attn.w_q.weight"));
  // the ablation: identity projections do clearly worse in the same budget
  Generator g2(c.seed);
  where_weights::Model ident(c, g2);
  const where_weights::RunResult ri = where_weights::train(ident, c, where_weights::Variant::Identity, g2);
  EXPECT_GT(ri.test_loss, 10 * r.test_loss + 0.01);
}

TEST_F(Examples, HeadsSpecialise) {
  heads_specialise::Config c;
  c.steps = 1200;
  Generator g(c.seed);
  heads_specialise::Model m(c, g);
  heads_specialise::train(m, c, g);
  const heads_specialise::Batch test = heads_specialise::make_batch(c, g, 256);
  const auto full = heads_specialise::evaluate(m, test, c);
  EXPECT_GE(full.both, 0.95);
  const auto roles = heads_specialise::measure_heads(m, test, c);
  // one head on the previous token, the other on the first token (measured)
  const int prev_head = roles.on_prev[0] > roles.on_prev[1] ? 0 : 1, first_head = 1 - prev_head;
  EXPECT_GT(roles.on_prev[prev_head], 0.8);
  EXPECT_GT(roles.on_first[first_head], 0.8);
  // removing a head breaks its half of the answer and leaves the other half
  auto without = [&](int h) { return from_vector<float>({h == 0 ? 0.f : 1.f, h == 1 ? 0.f : 1.f}, {2}); };
  const auto no_prev = heads_specialise::evaluate(m, test, c, without(prev_head));
  const auto no_first = heads_specialise::evaluate(m, test, c, without(first_head));
  EXPECT_LT(no_prev.prev, 0.5);
  EXPECT_GT(no_prev.first, 0.9);
  EXPECT_LT(no_first.first, 0.5);
  EXPECT_GT(no_first.prev, 0.9);
}

TEST_F(Examples, OneMatrixPerHeadFoldsAndTrainsAlike) {
  one_matrix::Config c;
  Generator g(c.seed);
  EXPECT_LT(one_matrix::fold_difference(c, g), 1e-5);
  c.steps = 250;
  Generator g1(1), g2(1);
  one_matrix::TaskModel<nn::MultiheadAttention> standard(c, g1);
  one_matrix::TaskModel<one_matrix::OverParamAttention> over(c, g2);
  EXPECT_EQ(over.num_parameters() - standard.num_parameters(), 3 * c.heads * (c.dim / c.heads) * (c.dim / c.heads));
  const double a = one_matrix::tail_mean(one_matrix::train(standard, c, 2, "standard")),
               b = one_matrix::tail_mean(one_matrix::train(over, c, 2, "per-head"));
  EXPECT_LT(a, 0.01);
  EXPECT_LT(b, 0.01);
}

TEST_F(Examples, Seq2SeqReversesHeldOutStringsWithAntiDiagonalCrossAttention) {
  seq2seq::Config c;
  c.length = 5;
  c.dim = 32;
  c.ff = 64;
  c.steps = 700;
  Generator g(c.seed);
  seq2seq::Model m(c, g);
  seq2seq::train(m, c, g);
  const seq2seq::Evaluation e = seq2seq::evaluate(m, c, g);
  EXPECT_GE(e.exact_match, 0.99);
  EXPECT_GT(e.anti_diagonal, 0.8);
}

TEST_F(Examples, CharGptRunsWithAShortContext) {
  // A context shorter than the 24 characters the attention pictures show once made char_gpt train
  // and then exit 1. A tiny run on a text of its own, from loading to the report.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "minigrad_test_char_gpt";
  fs::create_directories(dir);
  {
    std::ofstream text(dir / "text.txt");
    for (int i = 0; i < 80; ++i) text << "the cat sat on the mat. ";
  }
  char_gpt::Config c;
  c.data = (dir / "text.txt").string();
  c.context = 16, c.dim = 16, c.heads = 2, c.layers = 1, c.batch = 4, c.steps = 40, c.eval_every = 20, c.ckpt_every = 40;
  c.sample_len = 30, c.out = (dir / "run").string();
  const char_gpt::Data d = char_gpt::load_data(c);
  Generator g(c.seed);
  nn::GPT m(d.vocab.size(), c.context, char_gpt::gpt_options(c), g);
  optim::AdamW opt(m.parameters(), {.lr = c.lr});
  optim::WarmupCosineLR sched(opt, 2, c.steps, 0.1);
  fs::create_directories(c.out);
  const char_gpt::History h = char_gpt::train(m, opt, sched, d, c, 0, c.out + "/checkpoint.safetensors");
  ASSERT_EQ(h.val_losses.size(), 2u);
  EXPECT_LT(h.val_losses.back(), std::log(static_cast<double>(d.vocab.size())) - 0.5);  // it learns
  Generator sg(1);
  const std::string sampled = char_gpt::sample(m, d.vocab, c, sg);
  EXPECT_EQ(sampled.size(), c.prompt.size() + 30);
  EXPECT_TRUE(fs::exists(char_gpt::write_report(m, d, c, h, sampled)));
  EXPECT_TRUE(fs::exists(dir / "run" / "attn_blocks.0.attn_head1.svg"));
}

TEST_F(Examples, DigitsCnnReadsHeldOutHandwriting) {
  // The default run cut to 8 epochs (about a second; seeds 0-2 give 98.3-99.4%): at least 97% of the
  // 359 held-out digits right.
  digits_cnn::Config c;
  c.epochs = 8;
  c.data = std::string(MG_SOURCE_DIR) + "/data/digits.csv";
  ASSERT_TRUE(std::filesystem::exists(c.data)) << c.data << " is missing: run scripts/fetch-digits (make test does)";
  const digits_cnn::Split s = digits_cnn::split(digits_cnn::load_digits(c.data), c.test_fraction, c.seed);
  ASSERT_EQ(s.train.y.size(0), 1438);
  ASSERT_EQ(s.test.y.size(0), 359);
  Generator g(c.seed);
  digits_cnn::DigitsCNN m(g);
  const digits_cnn::Result r = digits_cnn::train(m, s, c);
  EXPECT_GE(r.test.accuracy, 0.97);
  EXPECT_LT(r.train_loss.back(), 0.1 * r.train_loss.front());
  // The confusion matrix counts every held-out image once, the right ones on its diagonal.
  EXPECT_EQ(sum(r.test.confusion).item(), 359.0);
  double right = 0;
  for (int64_t d = 0; d < 10; ++d) right += r.test.confusion.at({d, d});
  EXPECT_EQ(right, 359.0 - static_cast<double>(r.test.wrong.size()));
  c.out = (std::filesystem::temp_directory_path() / "mg_test_digits_cnn").string();
  EXPECT_TRUE(std::filesystem::exists(digits_cnn::write_report(m, s, r, c)));
  EXPECT_TRUE(std::filesystem::exists(c.out + "/filters.svg"));
}

TEST_F(Examples, CharLstmLearnsARepeatedSentence) {
  // A sentence repeated: after a few characters the next one is determined, and an LSTM that carries
  // them in its state predicts it. From nearly log(12) = 2.5 nats to a small fraction of that.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "minigrad_test_char_lstm";
  fs::create_directories(dir);
  {
    std::ofstream text(dir / "text.txt");
    for (int i = 0; i < 80; ++i) text << "the cat sat on the mat. ";
  }
  char_lstm::Config c;
  c.data = (dir / "text.txt").string();
  c.context = 16, c.embed = 16, c.hidden = 48, c.layers = 2, c.batch = 8, c.steps = 150, c.eval_every = 50;
  c.prompt = "the cat ", c.sample_len = 40, c.temperature = 0.5, c.top_k = 3, c.out = (dir / "run").string();
  const char_text::Data d = char_lstm::load_data(c);
  ASSERT_EQ(d.vocab.size(), 12);  // "the cat sat on the mat." and the newline
  Generator g(c.seed);
  char_lstm::CharLSTM m(d.vocab.size(), c, g);
  const char_lstm::History h = char_lstm::train(m, d, c);
  ASSERT_EQ(h.val_losses.size(), 3u);
  EXPECT_GT(h.losses.front(), 2.3);
  EXPECT_LT(h.val_losses.back(), 0.3);
  Generator sg(1);
  const char_lstm::Sample s = char_lstm::sample(m, d.vocab, c, sg);
  EXPECT_EQ(s.text.size(), c.prompt.size() + 40);
  EXPECT_EQ(s.hidden.shape(), (Shape{static_cast<int64_t>(c.prompt.size()) + 40, 48}));
  EXPECT_NE(s.text.find("cat sat on the ", c.prompt.size()), std::string::npos) << s.text;  // the words, in order, after the prompt
  EXPECT_TRUE(fs::exists(char_lstm::write_report(h, s, c)));
}
