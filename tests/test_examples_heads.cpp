// Why attention has the matrices and heads it has (docs/05): related_not_similar (a relation needs
// separate W_Q and W_K), heads_specialise (two heads split a task; one head, or two started equal,
// do not) and one_matrix_per_head (a per-head matrix folds into W_Q and trains alike).
// Each example's main.cpp is compiled here without its main().
#include "example_helpers.h"
#include "examples/heads_specialise/report.h"
#include "examples/one_matrix_per_head/experiment.h"
#include "examples/related_not_similar/experiment.h"
#include "helpers.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

using namespace mg;
using example_tests::Examples;
using example_tests::expect_telemetry;

TEST_F(Examples, HeadsSpecialise) {
  heads_specialise::Config c;
  c.steps = 1200;
  c.out = (std::filesystem::temp_directory_path() / "minigrad_test_heads_specialise").string();
  const auto r = heads_specialise::run(c, heads_specialise::Variant::TwoHeads, 256);
  // telemetry at step 1, every 5 up to 100 and every 50 (43 records), both heads; the page made of it
  expect_telemetry(r.records, r.telemetry_json, heads_specialise::save_explorer(c, r, "two heads"), 43, {2});
  EXPECT_TRUE(std::filesystem::exists(c.out + "/telemetry.json"));
  EXPECT_THAT(r.telemetry_json, testing::HasSubstr(R"("query_tokens":["x0=)"));
  EXPECT_GE(r.full.both, 0.95);
  // one head on the previous token, the other on the first token (measured)
  // the pictures' data: scores masked exactly above the diagonal, weights = softmax of the scores
  // row by row, mean maps whose rows sum to 1, one token label per position
  ASSERT_EQ(r.roles.tokens.size(), static_cast<size_t>(c.seq_len));
  for (int h = 0; h < 2; ++h) {
    const Tensor sc = r.roles.example_scores[h].to(DType::Float64), w = r.roles.example[h].to(DType::Float64);
    for (int64_t i = 0; i < c.seq_len; ++i)
      for (int64_t j = 0; j < c.seq_len; ++j) EXPECT_EQ(std::isinf(sc.at({i, j})), j > i) << h << " " << i << " " << j;
    EXPECT_LT(max(abs(softmax(sc, -1) - w)).item(), 1e-5);
    EXPECT_LT(max(abs(sum(r.roles.mean[h], {1}) - 1.0)).item(), 1e-5);
  }
  // softmax's shift invariance on the real scores: rows shifted by -3, 0, +3 give the same weights,
  // the masked future stays masked, and each row moved by exactly its constant
  for (int h = 0; h < 2; ++h) {
    const heads_specialise::RowShift rs = heads_specialise::shift_rows(r.roles.example_scores[h]);
    EXPECT_LT(rs.max_diff, 1e-12);
    const Tensor sc = r.roles.example_scores[h].to(DType::Float64);
    for (int64_t i = 0; i < c.seq_len; ++i) {
      EXPECT_TRUE(std::isinf(rs.shifted.at({i, c.seq_len - 1})) || i == c.seq_len - 1);
      EXPECT_DOUBLE_EQ(rs.shifted.at({i, 0}) - sc.at({i, 0}), 3.0 * (i % 3) - 3.0);
    }
  }
  const int prev_head = r.roles.on_prev[0] > r.roles.on_prev[1] ? 0 : 1, first_head = 1 - prev_head;
  EXPECT_GT(r.roles.on_prev[prev_head], 0.8);
  EXPECT_GT(r.roles.on_first[first_head], 0.8);
  // removing a head breaks its half of the answer and leaves the other half
  EXPECT_LT(r.ablated[prev_head].prev, 0.5);
  EXPECT_GT(r.ablated[prev_head].first, 0.9);
  EXPECT_LT(r.ablated[first_head].first, 0.5);
  EXPECT_GT(r.ablated[first_head].prev, 0.9);
}

TEST_F(Examples, HeadsSpecialiseRolesDependOnTheSeed) {
  // docs/05's seed table, on four of its seeds: seeds 0 and 1 split with head 0 on t-1, seed 8
  // splits with the roles swapped, seed 3 does not split cleanly (one head mixes both places); all four
  // solve the task. In a clean split, the head that leaned more to t-1 at step 20 ends on t-1. And
  // two heads started identical but for 1e-6 in one entry are not pulled back together.
  MG_SKIP_SEED_TABLE_WHERE_FIRST_SEED_ONLY();
  std::vector<heads_specialise::SeedRow> rows;
  heads_specialise::RunResult first;  // seed 0's two-head run, for the printed table
  for (uint64_t seed : {0, 8, 3, 1}) {
    heads_specialise::Config c;
    c.seed = seed;
    const auto two = heads_specialise::run(c, heads_specialise::Variant::TwoHeads, 256);
    if (seed == 0) first = two;
    rows.push_back(
        heads_specialise::seed_row(seed, two, heads_specialise::run(c, heads_specialise::Variant::NudgedStart, 16)));
    EXPECT_GE(rows.back().accuracy, 0.95) << seed;
    EXPECT_GT(rows.back().nudged_diff, 1e-6) << seed;
    if (!rows.back().clean()) continue;
    // in a clean split, removing a head breaks exactly its half of the answer (seeds 0, 8 and 1)
    const int prev_head = heads_specialise::role_of(two.roles, 0) == heads_specialise::Role::Previous ? 0 : 1;
    EXPECT_LT(two.ablated[prev_head].prev, 0.5) << seed;
    EXPECT_GT(two.ablated[prev_head].first, 0.9) << seed;
    EXPECT_LT(two.ablated[1 - prev_head].first, 0.5) << seed;
    EXPECT_GT(two.ablated[1 - prev_head].prev, 0.9) << seed;
  }
  using heads_specialise::Role, heads_specialise::role_of;
  EXPECT_TRUE(rows[0].clean() && !rows[0].swapped());
  EXPECT_EQ(role_of(rows[0].roles, 0), Role::Previous);
  EXPECT_TRUE(rows[1].clean() && rows[1].swapped());
  EXPECT_EQ(role_of(rows[1].roles, 0), Role::First);
  EXPECT_FALSE(rows[2].clean());
  EXPECT_EQ(static_cast<int>(role_of(rows[2].roles, 0) == Role::Mixed) + (role_of(rows[2].roles, 1) == Role::Mixed), 1);
  EXPECT_TRUE(rows[3].clean() && !rows[3].swapped());
  const heads_specialise::SeedSummary s = heads_specialise::summarise(rows);
  EXPECT_EQ(s.n, 4);
  EXPECT_EQ(s.clean, 3);
  EXPECT_EQ(s.swapped, 1);
  EXPECT_EQ(s.mixed, 1);
  EXPECT_EQ(s.early_predicts, 3);
  EXPECT_EQ(s.start_predicts, 2);  // at step 1 the lean misleads at seed 8 (docs/05: 4 of 7 over seeds 0-9)
  EXPECT_EQ(s.nudged_close, 4);    // docs/05: 9 of 10 nudged runs end within 1e-3 (seed 9 does not)
  EXPECT_LE(s.nudged_close_hi, 1e-3);
  // what the example prints is computed from the same rows
  const std::string table = heads_specialise::seed_table(heads_specialise::Config{}, rows, first);
  EXPECT_THAT(table, testing::HasSubstr("In 3 of 4 seeds the two heads divide the work, one look-up each: 2 with "
                                        "head 0 on t-1, 1 with the roles swapped."));
  EXPECT_THAT(table, testing::HasSubstr("In 4 of the 4 seeds the nudged heads end within 1.0e-03 of each other"));
}

TEST_F(Examples, HeadsSpecialiseOneHeadSolvesItBySplittingItsAttention) {
  // The control that corrects the old premise "one head can look at one place": one head of the
  // same model reaches the same accuracy by dividing its attention between t-1 and position 0,
  // on seeds 0, 1 and 2.
  for (uint64_t seed : example_tests::seeds({0, 1, 2})) {
    heads_specialise::Config c;
    c.steps = 1200;
    c.seed = seed;
    const auto r = heads_specialise::run(c, heads_specialise::Variant::OneHead, 256);
    ASSERT_EQ(r.roles.on_prev.size(), 1u);
    EXPECT_GE(r.full.both, 0.95) << seed;
    EXPECT_GT(r.roles.on_prev[0], 0.25) << seed;
    EXPECT_GT(r.roles.on_first[0], 0.25) << seed;
    EXPECT_GT(r.roles.on_prev[0] + r.roles.on_first[0], 0.9) << seed;  // nearly all of it on the two places
  }
}

TEST_F(Examples, HeadsSpecialiseIdenticalStartStaysIdentical) {
  MG_SKIP_LONG_TRAINING_UNDER_SANITIZERS("HeadsSpecialiseOneHeadSolvesItBySplittingItsAttention");
  // Why do heads differ? Two heads started equal get equal gradients and never part: the
  // symmetry that random initialisation breaks. On seeds 0, 1 and 2.
  for (uint64_t seed : example_tests::seeds({0, 1, 2})) {
    heads_specialise::Config c;
    c.seed = seed;
    const auto r = heads_specialise::run(c, heads_specialise::Variant::IdenticalStart, 256);  // the full 1500 steps
    const auto random = heads_specialise::run(c, heads_specialise::Variant::TwoHeads, 16);
    EXPECT_EQ(r.head_diff_start, 0.0) << seed;
    // exactly 0, on every CPU: the portable products (the fixture's, as the example's) give both
    // heads' columns the same arithmetic; docs/05 shows the one OpenBLAS kernel that does not
    EXPECT_EQ(r.head_diff_end, 0.0) << seed;
    EXPECT_GT(random.head_diff_end, 0.1) << seed;
    // so the same split, to the last bit
    EXPECT_EQ(r.roles.on_prev[0], r.roles.on_prev[1]) << seed;
    EXPECT_EQ(r.roles.on_first[0], r.roles.on_first[1]) << seed;
    EXPECT_GT(r.roles.on_prev[0], 0.25) << seed;  // both split, like the single head
    EXPECT_GT(r.roles.on_first[0], 0.25) << seed;
    EXPECT_GE(r.full.both, 0.95) << seed;
  }
}

TEST_F(Examples, OneMatrixPerHeadFoldsAndTrainsAlike) {
  one_matrix::Config c;
  Generator g(c.seed);
  EXPECT_LT(one_matrix::fold_difference(c, g), 1e-5);
  {
    Generator g1(1);
    one_matrix::TaskModel<nn::MultiheadAttention> standard(c, g1);
    one_matrix::TaskModel<one_matrix::OverParamAttention> over(c, g1);
    EXPECT_EQ(over.num_parameters() - standard.num_parameters(), 3 * c.heads * (c.dim / c.heads) * (c.dim / c.heads));
  }
  // The paper's W_i^Q is row block i of the one W_Q (as stored, out x in): head i's queries are
  // x W_Q[i]^T + b_Q[i], exactly what split_heads(w_q(x)) puts in head slot i.
  {
    nn::MultiheadAttention mha(c.dim, c.heads, {}, g);
    const int64_t d = c.dim / c.heads;
    Variable x(randn({2, 5, c.dim}, g));
    NoGradGuard no_grad;
    const Tensor q = nn::split_heads(mha.w_q(x), c.heads).data();  // (2, H, 5, d)
    for (int64_t i = 0; i < c.heads; ++i) {
      const Tensor qi = matmul(x.data(), mha.w_q.weight.data().narrow(0, i * d, d).transpose(0, 1)) +
                        mha.w_q.bias.data().narrow(0, i * d, d);
      EXPECT_LT(max(abs(q.narrow(1, i, 1).squeeze(1) - qi)).item(), 1e-6) << "head " << i;
    }
  }
  // The fair experiment on 3 seeds: each pair starts as the same function, then the curves
  // separate. Which one ends lower depends on the seed (docs/05), so that is not asserted.
  c.steps = 200;
  std::vector<one_matrix::SeedRun> runs;
  for (uint64_t s = 0; s < 3; ++s) runs.push_back(one_matrix::run_seed(c, s));
  for (const one_matrix::SeedRun& r : runs) {
    EXPECT_LT(r.start_logit_diff, 1e-5) << "seed " << r.seed;
    EXPECT_NEAR(r.start_loss_standard, r.start_loss_product, 1e-6) << "seed " << r.seed;
    EXPECT_NEAR(r.standard[0], r.product[0], 1e-6) << "seed " << r.seed;  // the same batch, the same function
    const int sep = one_matrix::separation_step(r);
    EXPECT_GT(sep, 1) << "seed " << r.seed;
    EXPECT_LE(sep, 60) << "seed " << r.seed;
    // both learn the task: the last quarter's loss is far below the first step's ~log(16)
    EXPECT_LT(one_matrix::window_mean(r.standard, 151, 200), 0.1) << "seed " << r.seed;
    EXPECT_LT(one_matrix::window_mean(r.product, 151, 200), 0.1) << "seed " << r.seed;
  }
  // The printed conclusion follows the measured ratios, whichever way they fall.
  const std::vector<one_matrix::Quarter> qs = one_matrix::quarters(runs);
  ASSERT_EQ(qs.size(), 4u);
  EXPECT_EQ(qs[3].from, 151u);
  EXPECT_EQ(qs[3].to, 200u);
  auto with_ratios = [&](std::vector<std::vector<double>> r) {
    std::vector<one_matrix::Quarter> q = qs;
    for (size_t k = 0; k < 4; ++k) {
      q[k].ratios = r[k];
      q[k].lo = *std::min_element(r[k].begin(), r[k].end());
      q[k].hi = *std::max_element(r[k].begin(), r[k].end());
    }
    return one_matrix::conclusion(runs, q);
  };
  const std::string slower = with_ratios({{1, 1, 1}, {1.2, 1.5, 1.1}, {1.3, 2, 1.4}, {1.1, 1.2, 1.3}});
  EXPECT_NE(slower.find("trains more slowly than the standard one in every one of the 3 seeds"), std::string::npos)
      << slower;
  const std::string faster = with_ratios({{1, 1, 1}, {0.8, 0.5, 0.9}, {0.7, 0.9, 0.6}, {0.9, 0.8, 0.7}});
  EXPECT_NE(faster.find("trains faster than the standard one in every one of the 3 seeds"), std::string::npos)
      << faster;
  const std::string most = with_ratios({{1, 1, 1}, {1.2, 1.5, 0.9}, {1.3, 0.8, 1.4}, {1.1, 1.2, 0.7}});
  EXPECT_NE(most.find("more slowly in most seeds (2 of 3 in each later quarter); in 2 of the 3 seeds it is ahead in "
                      "at least one of those quarters"),
            std::string::npos)
      << most;
  // Behind in every seed in the last quarter, not in the two before: the sentence gives both counts
  // (it used to say "2 of 3 ... but not in all of them" from one quarter, under a row of 3 of 3).
  const std::string last_all = with_ratios({{1, 1, 1}, {1.2, 0.9, 1.1}, {1.3, 1.2, 0.9}, {1.1, 1.2, 1.3}});
  EXPECT_NE(last_all.find("more slowly in most seeds (2 to 3 of 3 in each later quarter); in 2 of the 3 seeds"),
            std::string::npos)
      << last_all;
  EXPECT_NE(last_all.find("steps 151-200: higher in every seed"), std::string::npos) << last_all;
  const std::string mixed = with_ratios({{1, 1, 1}, {1.2, 0.5, 0.9}, {1.3, 0.8, 1.4}, {1.1, 1.2, 0.7}});
  EXPECT_NE(mixed.find("depends on the seed"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("higher in 1 of 3 seeds, lower in 2"), std::string::npos) << mixed;
}

TEST(ExampleNumbers, NumericalRankOfHandMatrices) {
  EXPECT_EQ(example::numerical_rank(zeros({3, 3}, DType::Float64)), 0);
  EXPECT_EQ(example::numerical_rank(eye(4, DType::Float64)), 4);
  // an outer product u v^T, and the same with a third row the sum of the first two
  EXPECT_EQ(example::numerical_rank(from_vector<double>({1, 2, 3, 2, 4, 6, -1, -2, -3}, {3, 3})), 1);
  EXPECT_EQ(example::numerical_rank(from_vector<double>({1, 0, 2, 0, 1, 1, 1, 1, 3}, {3, 3})), 2);
  EXPECT_EQ(example::numerical_rank(from_vector<double>({0, 1, 1, 0}, {2, 2})), 2);        // needs the row swap
  EXPECT_EQ(example::numerical_rank(from_vector<double>({1, 2, 3, 2, 4, 6}, {2, 3})), 1);  // not square
  EXPECT_EQ(example::numerical_rank(from_vector<double>({1, 0, 0, 1, 1, 1}, {3, 2})), 2);
  EXPECT_THROW(example::numerical_rank(zeros({3})), ShapeError);
}

TEST_F(Examples, RelatedNotSimilarNeedsTwoMatrices) {
  // Attend to the successor x + 1 mod 16: separate W_Q, W_K learn it (an asymmetric form); one
  // shared matrix gives a symmetric form whose best key is the token itself for most tokens, and
  // (Cauchy-Schwarz around the cycle) never the successor for every token.
  related::Config c;
  {  // the batches: distinct tokens, and every target is the position of the token's successor
    Generator g(3);
    auto [ids, targets] = related::make_batch(c, g, 32);
    for (int64_t i = 0; i < 32; ++i)
      for (int64_t t = 0; t < 8; ++t) {
        const int64_t tg = targets.data<int64_t>()[i * 8 + t], x = ids.data<int64_t>()[i * 8 + t];
        int64_t where = -1;
        for (int64_t u = 0; u < 8; ++u)
          if (ids.data<int64_t>()[i * 8 + u] == (x + 1) % 16) where = u;
        EXPECT_EQ(tg, where);
      }
  }
  for (uint64_t seed : example_tests::seeds({0, 1, 2})) {
    c.seed = seed;
    const related::RunResult r_sep = related::train(c, false), r_tie = related::train(c, true);
    const related::Measures &sep = r_sep.trained, &tie = r_tie.trained, &init = r_sep.init;
    EXPECT_GE(sep.accuracy, 0.99) << seed;
    EXPECT_GT(sep.asymmetry, 0.5) << seed;
    EXPECT_EQ(sep.successor_best, 1.0) << seed;
    EXPECT_LT(tie.asymmetry, 1e-6) << seed;
    EXPECT_LT(tie.accuracy, 0.2) << seed;
    EXPECT_GE(tie.self_best, 0.8) << seed;
    EXPECT_LT(tie.successor_best, 1.0) << seed;
    // The baselines docs/05 prints beside them: at initialisation the separate form is already
    // about as asymmetric (two unrelated random matrices, about sqrt 2), while the successor is the
    // first choice of few tokens and found in few rows (chance: 1 in 16, 1 in 8).
    EXPECT_GT(init.asymmetry, 1.0) << seed;
    EXPECT_LT(init.asymmetry, 1.8) << seed;
    EXPECT_LE(init.successor_best, 0.3) << seed;
    EXPECT_LT(init.accuracy, 0.3) << seed;
    EXPECT_LT(r_tie.init.asymmetry, 1e-6) << seed;
    // Narrow heads (docs/05): with d_k = 1 the form has rank 1, M[a, b] = u_a v_b, so every row's
    // best key is the token of largest or of smallest v: at most 2 of the 16 tokens can have their
    // successor first. d_k = 2 (rank 2, angles on a circle) is enough for the whole cycle.
    const std::vector<related::WidthRow> w = related::width_table(c, {1, 2});
    EXPECT_EQ(w[0].rank, 1) << seed;
    EXPECT_LE(w[0].trained.successor_best, 2.0 / 16) << seed;
    EXPECT_LT(w[0].trained.accuracy, 0.5) << seed;
    EXPECT_EQ(w[1].rank, 2) << seed;
    EXPECT_GE(w[1].trained.accuracy, 0.99) << seed;
    EXPECT_EQ(w[1].parameters, 2 * 2 * c.dim);
    EXPECT_EQ(sep.rank, c.dim) << seed;
  }
}
