// Attention that connects parts of a model (docs/05): seq2seq_cross_attention (the decoder reads
// the encoder's memory along the anti-diagonal) and induction_heads (a two-layer circuit forms in a
// phase change, is causal under ablation, needs both layers; bad settings are refused).
// seq2seq's main.cpp is compiled here without its main(); induction_heads through its report.h.
#include "example_helpers.h"
#include "examples/induction_heads/report.h"
#include "examples/seq2seq_cross_attention/experiment.h"
#include "helpers.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

using namespace mg;
using example_tests::Examples;
using example_tests::expect_telemetry;

// docs/05's cross-attention claims (exact reversal, the anti-diagonal, the output following the
// memory) on seeds 0, 1 and 2, at a smaller size.
class Seq2SeqSeeds : public Examples, public testing::WithParamInterface<uint64_t> {};
INSTANTIATE_TEST_SUITE_P(Examples, Seq2SeqSeeds, testing::ValuesIn(example_tests::seeds({0, 1, 2})));

TEST_P(Seq2SeqSeeds, ReversesHeldOutStringsWithAntiDiagonalCrossAttention) {
  seq2seq::Config c;
  c.seed = GetParam();
  c.length = 5;
  c.dim = 32;
  c.ff = 64;
  c.steps = 700;
  c.out = (std::filesystem::temp_directory_path() / ("minigrad_test_seq2seq_" + std::to_string(c.seed))).string();
  Generator g(c.seed);
  seq2seq::Model m(c, g);
  const seq2seq::TrainResult tr = seq2seq::train(m, c, g);
  // telemetry of the encoder's, the decoder's and the cross-attention's 4 heads at step 1, every 5
  // up to 100 and every 50 (33 records)
  expect_telemetry(tr.records, tr.telemetry_json, seq2seq::save_explorer(c, tr), 33, {4, 4, 4});
  const nlohmann::json j = nlohmann::json::parse(tr.telemetry_json);
  EXPECT_EQ(j["layers"][2]["name"], "dec.layers.0.multihead_attn");
  EXPECT_EQ(j["meta"]["task"], "reverse");
  EXPECT_EQ(j["layers"][2]["query_tokens"].size(), 6u);  // <s> and 5 digits
  EXPECT_EQ(j["layers"][2]["query_tokens"][0], "<s>");
  EXPECT_EQ(j["layers"][2]["key_tokens"].size(), 5u);  // the 5 source digits
  for (const inspect::HeadScore& h : tr.records.back().heads)
    EXPECT_EQ(h.label == "cross-attention", h.layer == "dec.layers.0.multihead_attn");
  // the recorded cross-attention map (probe row 0) is 6 x 5 and turns into the anti-diagonal
  const auto mirrored = [&](const inspect::TelemetryRecord& r) {
    const Tensor w = r.patterns[2].weights;  // (H, 6, 5)
    EXPECT_EQ(w.shape(), (Shape{4, 6, 5}));
    double s = 0;
    for (int64_t t = 0; t < 5; ++t) s += mean(w.narrow(1, t, 1).narrow(2, 4 - t, 1)).item();
    return s / 5;
  };
  EXPECT_LT(mirrored(tr.records.front()), 0.4);
  EXPECT_GT(mirrored(tr.records.back()), 0.8);
  // what the program prints for the explorer is that weight, record by record
  ASSERT_EQ(tr.aligned.size(), 1u);
  ASSERT_EQ(tr.aligned[0].size(), tr.records.size());
  for (size_t k = 0; k < tr.records.size(); ++k) EXPECT_NEAR(tr.aligned[0][k], mirrored(tr.records[k]), 1e-6) << k;
  const seq2seq::Evaluation e = seq2seq::evaluate(m, c, g);
  EXPECT_GE(e.exact_match, 0.99);
  ASSERT_EQ(e.cross.size(), 1u);
  EXPECT_GT(e.cross[0].aligned, 0.8);
  EXPECT_NEAR(e.cross[0].uniform, 0.2, 1e-6);  // 1 of 5 positions
  // positional: one fixed source position per output step takes as much weight as the mirrored one
  EXPECT_GT(e.cross[0].positional, e.cross[0].aligned - 0.05);
  EXPECT_EQ(e.cross[0].maps.shape(), (Shape{2, 6, 5}));  // L + 1 decoder steps x L source digits: not square
  EXPECT_EQ(e.memory_difference, 0.0);  // the cross-attention's keys and values are the encoder's output
  EXPECT_THAT(seq2seq::alignment_verdict(e.cross[0]), testing::HasSubstr("so the alignment is positional"));
  // an untrained, uniform map is neither positional nor content-based (both comparisons alone
  // would call it one or the other): reversal and sorting at chance
  for (const seq2seq::CrossLayer& uniform :
       {seq2seq::CrossLayer{"x", 0.2, 0.2, 0.2, {}}, seq2seq::CrossLayer{"x", 0.277, 0.277, 0.2, {}}})
    EXPECT_THAT(seq2seq::alignment_verdict(uniform), testing::HasSubstr("no layer has learned"));
  EXPECT_THAT(e.shapes, testing::HasSubstr("query input  (500, 6, 32)"));
  EXPECT_THAT(e.shapes, testing::HasSubstr("key input    (500, 5, 32)"));
  // the output follows the memory: a's decoder input with b's memory gives b's digits, and one
  // swapped memory position changes exactly the mirrored output digit
  const seq2seq::Intervention iv = seq2seq::intervene(m, c, g);
  EXPECT_GT(iv.swapped_follows_memory, 0.9);
  EXPECT_LT(iv.swapped_follows_input, 0.3);
  EXPECT_GT(iv.slot_exact, 0.8);
}

// docs/05's content-based alignment, on seeds 0, 1 and 2: sorting with two encoder and two decoder
// layers. The cross-attention puts its weight on the positions holding the digit written, a map no
// fixed position explains; both decoder layers read the same memory, the encoder's final output.
TEST_P(Seq2SeqSeeds, SortsWithContentBasedCrossAttentionAndBothLayersReadTheFinalMemory) {
  MG_SKIP_LONG_TRAINING_UNDER_SANITIZERS("Seq2SeqSeeds.ReversesHeldOutStringsWithAntiDiagonalCrossAttention");
  seq2seq::Config c;
  c.seed = GetParam();
  c.task = seq2seq::Task::Sort;
  c.layers = 2;
  c.length = 5;
  c.dim = 32;
  c.ff = 64;
  c.steps = 1500;
  c.every = 100;
  c.out = (std::filesystem::temp_directory_path() / ("minigrad_test_seq2seq_sort_" + std::to_string(c.seed))).string();
  Generator g(c.seed);
  seq2seq::Model m(c, g);
  const seq2seq::TrainResult tr = seq2seq::train(m, c, g);
  const nlohmann::json j = nlohmann::json::parse(tr.telemetry_json);
  EXPECT_EQ(j["meta"]["task"], "sort");
  ASSERT_EQ(tr.aligned.size(), 2u);  // one series per decoder layer
  const seq2seq::Evaluation e = seq2seq::evaluate(m, c, g);
  EXPECT_GE(e.exact_match, 0.95);
  ASSERT_EQ(e.cross.size(), 2u);
  EXPECT_EQ(e.cross[1].name, "dec.layers.1.multihead_attn");
  const seq2seq::CrossLayer& r = e.cross[e.reader];
  EXPECT_GT(r.aligned, 0.6);
  EXPECT_GT(r.aligned, 2 * r.uniform);
  EXPECT_LT(r.positional, r.aligned - 0.3);  // not positional
  EXPECT_THAT(seq2seq::alignment_verdict(r), testing::HasSubstr("so the alignment follows the content"));
  EXPECT_GT(tr.aligned[e.reader].back(), tr.aligned[e.reader].front() + 0.2);  // learned, on the probe string
  // every decoder layer read exactly the encoder's final output, not encoder layer 0's
  EXPECT_EQ(e.memory_difference, 0.0);
  EXPECT_GT(e.first_layer_difference, 0.1);
  // the output follows the memory more than the decoder's own input
  const seq2seq::Intervention iv = seq2seq::intervene(m, c, g);
  EXPECT_GT(iv.swapped_follows_memory, 0.5);
  EXPECT_GT(iv.swapped_follows_memory, 2 * iv.swapped_follows_input);
  EXPECT_GT(iv.slot_exact, 0.5);
}

// induction_heads at a smaller size (vocab 16, 32 tokens, width 32, 2 heads per layer): the same
// story in a few seconds, on seeds 0, 1 and 2 (their phase changes fall at steps 875-1025 of 1500).
induction_heads::Config induction_config() {
  induction_heads::Config c;
  c.vocab = 16, c.seq_len = 32, c.span_min = 6, c.span_max = 16, c.dim = 32, c.heads = 2, c.batch = 32;
  return c;
}

// The step at which a score series first reaches half of its final value.
int64_t half_way(const std::vector<inspect::TelemetryRecord>& records,
                 const std::function<double(const inspect::TelemetryRecord&)>& f) {
  const double target = 0.5 * f(records.back());
  for (const auto& r : records)
    if (f(r) >= target) return r.step;
  return -1;
}

// docs/05's induction story, on seeds 0, 1 and 2: the plateau and the jump, the two heads' roles
// appearing at the jump, the interventions, the circuits, the stripe and the position split.
class InductionSeeds : public Examples, public testing::WithParamInterface<uint64_t> {};
INSTANTIATE_TEST_SUITE_P(Examples, InductionSeeds, testing::ValuesIn(example_tests::seeds({0, 1, 2})));

TEST_P(InductionSeeds, HeadsFormInAPhaseChangeAndTheCircuitIsCausal) {
  MG_SKIP_LONG_TRAINING_UNDER_SANITIZERS("InductionSeeds.NeedTwoLayers");
  induction_heads::Config c = induction_config();
  c.seed = GetParam();
  Generator g(c.seed);
  induction_heads::Model m(c, g);
  const induction_heads::RunResult r = induction_heads::train(m, c, g);
  ASSERT_EQ(r.records.size(), 61u);  // step 1 and every 25
  // The plateau: after 250 steps the in-context-learning score has barely moved; at the end the
  // second copy of a span costs 1.8+ nats less than the first.
  const auto icl_at = [&](int64_t step) { return r.records[static_cast<size_t>(step / c.every)].icl.score; };
  EXPECT_GT(icl_at(250), -0.2);
  EXPECT_LT(r.records.back().icl.score, -1.8);
  // Then the jump: half of the whole move is made late, and the 250 steps around that point make
  // at least 35% of it: over twice the average rate (250 of 1500 steps is 17%).
  ASSERT_GT(r.phase_step, 500);
  const double move = r.records.back().icl.score - r.records.front().icl.score;
  EXPECT_GT((icl_at(r.phase_step + 125) - icl_at(r.phase_step - 125)) / move, 0.35) << r.phase_step;
  // The head roles, and they appear at the same steps as the jump.
  EXPECT_EQ(r.prev_head.layer, "attn0");
  EXPECT_GT(r.prev_head.previous_token, 0.4);
  EXPECT_EQ(r.induction_head.layer, "attn1");
  EXPECT_GT(r.induction_head.induction, 0.6);
  const int64_t prev_step = half_way(r.records, [&](const auto& rec) {
    return induction_heads::score_of(rec, "attn0", r.prev_head.head).previous_token;
  });
  const int64_t ind_step = half_way(r.records, [&](const auto& rec) {
    return induction_heads::score_of(rec, "attn1", r.induction_head.head).induction;
  });
  EXPECT_LE(std::abs(prev_step - r.phase_step), 150) << prev_step << " vs " << r.phase_step;
  EXPECT_LE(std::abs(ind_step - r.phase_step), 250) << ind_step << " vs " << r.phase_step;
  EXPECT_GT(r.final_span.accuracy, 0.65);
  // Interventions: without the previous-token head(s) the induction head stops finding the token
  // and the repeated span is lost; without the other layer-0 heads, almost nothing changes.
  const std::vector<induction_heads::Ablation> ab = induction_heads::ablate(m, c, r);
  ASSERT_GE(ab.size(), 3u);
  const auto& none = ab.front();
  const auto& strongest = ab[1];
  const auto& others = ab.back();
  EXPECT_EQ(none.span.accuracy, r.final_span.accuracy);
  EXPECT_LT(strongest.span.accuracy, 0.3);
  EXPECT_LT(strongest.induction, 0.5 * none.induction);
  ASSERT_NE(others.removed.find("all the others"), std::string::npos);
  EXPECT_EQ(std::count(others.heads.begin(), others.heads.end(), r.prev_head.head), 0);
  EXPECT_GT(others.span.accuracy, none.span.accuracy - 0.05);
  EXPECT_GT(others.induction, 0.8 * none.induction);
  // The circuits: the induction head's QK circuit through the previous-token head matches a
  // query's token to the token before the key; the layer's OV circuit copies.
  const induction_heads::Circuits circ = induction_heads::circuits(m, r);
  EXPECT_GE(circ.qk_diagonal, 0.9);
  EXPECT_GE(circ.ov_layer_diagonal, 0.9);
  // Before and after softmax: on a span repeated twice, the induction head's weights in the
  // second copy peak n - 1 back (the token after the earlier copy of the query's token), and
  // the scores are masked exactly above the diagonal
  const induction_heads::HeadMaps maps =
      induction_heads::head_maps(m, c, r.induction_head.layer, r.induction_head.head);
  const int64_t n = c.seq_len / 2;
  ASSERT_EQ(maps.mean.size(0), 2 * n);
  int64_t on_stripe = 0;
  const Tensor best = argmax(maps.mean, 1);
  for (int64_t t = n; t < 2 * n; ++t) on_stripe += best.data<int64_t>()[t] == t - n + 1;
  EXPECT_GE(on_stripe, n - 1) << on_stripe;
  const Tensor sc = maps.scores.to(DType::Float64);
  for (int64_t i = 0; i < 2 * n; i += 5)
    for (int64_t j = 0; j < 2 * n; ++j) EXPECT_EQ(std::isinf(sc.at({i, j})), j > i) << i << " " << j;
  // The previous-token heads look at t - 1 where the induction head needs such keys (inside the
  // first copies), and not where it never does: why their score is well below 1.
  const induction_heads::PositionProfile profile = induction_heads::position_profile(m, c);
  const induction_heads::ProfileSplit split = induction_heads::split_profile(profile);
  EXPECT_GT(split.where_needed, 0.6) << split.elsewhere;
  EXPECT_GT(split.where_needed, split.elsewhere + 0.4) << split.elsewhere;
  EXPECT_LT(r.prev_head.previous_token, 0.9);
  // the share of needed keys is the batch's own count: key t is needed in a sequence exactly when
  // t lies in the first copy after its first token
  Generator gb(5);
  const induction_heads::Batch b = induction_heads::make_batch(c, gb, 64);
  for (int64_t i = 0; i < 64; ++i) {
    int64_t needed = 0, predictable = 0;
    for (int64_t t = 0; t < c.seq_len; ++t) {
      needed += b.key_needed.data<bool>()[i * c.seq_len + t];
      predictable += b.in_span.data<bool>()[i * c.seq_len + t];
    }
    EXPECT_EQ(needed, predictable) << "sequence " << i;  // one needed key per predictable position
  }
}

TEST_P(InductionSeeds, NeedTwoLayers) {
  // The same data, steps and seed with one layer: no previous-token information can reach a key,
  // so no induction head. What it learns instead (raising tokens seen earlier in the sequence)
  // helps a little: better than chance, far below the 2-layer model's 74%.
  induction_heads::Config c = induction_config();
  c.seed = GetParam();
  c.layers = 1;
  Generator g(c.seed);
  induction_heads::Model m(c, g);
  const induction_heads::RunResult r = induction_heads::train(m, c, g);
  EXPECT_LT(r.induction_head.induction, 0.5);
  EXPECT_LT(r.final_span.accuracy, 0.4);
  EXPECT_GT(r.final_span.accuracy, 2.0 / static_cast<double>(c.vocab));
  EXPECT_GT(r.records.back().icl.score, -1.2);
}

// A span longer than half the sequence once drew its start from a negative range and wrote past
// the batch; every setting that cannot make a run is now a ValueError naming the flag.
TEST_F(Examples, InductionHeadsRefusesSettingsThatCannotMakeARun) {
  EXPECT_NO_THROW(induction_heads::validate(induction_heads::Config{}));
  EXPECT_NO_THROW(induction_heads::validate(induction_config()));
  auto refused = [](auto change, const std::string& says) {
    induction_heads::Config c;
    change(c);
    try {
      induction_heads::validate(c);
      ADD_FAILURE() << "accepted; expected an error saying " << says;
    } catch (const ValueError& e) {
      EXPECT_THAT(e.what(), testing::HasSubstr(says));
    }
  };
  refused([](auto& c) { c.span_max = 25; }, "--span-max 25 does not fit twice in --seq-len 48 (at most 24)");
  refused([](auto& c) { c.span_min = 1; }, "need 2 <= --span-min <= --span-max, got 1 and 24");
  refused([](auto& c) { c.span_min = 30; }, "need 2 <= --span-min <= --span-max, got 30 and 24");
  refused([](auto& c) { c.dim = 66; }, "--dim 66 must be a positive multiple of --heads 4");
  refused([](auto& c) { c.vocab = 1; }, "--vocab must be at least 2");
  refused([](auto& c) { c.steps = 0; }, "--steps and --every must be at least 1");
  refused([](auto& c) { c.lr = -1; }, "--lr must be positive");
}
