// inspect::Telemetry and the attention explorer: what a run records (when, what shape, which numbers),
// that recording leaves training untouched bit for bit, bad options named, and the page built
// from the JSON. The page in a real browser: tests/browser/test_explorer.sh.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "helpers.h"
#include "minigrad/viz/explorer.h"

using namespace mg;

namespace {

// ids (B, T) -> logits (B, T, V): embeddings, one causal attention layer of 2 heads, a read-out.
struct Tiny : nn::Callable<Tiny> {
  nn::Embedding tok, pos;
  nn::MultiheadAttention attn;
  nn::Linear out;
  explicit Tiny(Generator& g) : tok(12, 8, {}, g), pos(10, 8, {}, g), attn(8, 2, {}, g), out(8, 12, {}, g) {
    register_module("tok", tok), register_module("pos", pos), register_module("attn", attn),
        register_module("out", out);
  }
  Variable forward(const Tensor& ids) const {
    Variable x = tok(ids) + pos(arange(ids.size(1)));
    return out(x + attn(x, {.is_causal = true}).output);
  }
  std::string type_name() const override { return "Tiny"; }
};

// Train `steps` SGD steps on random ids predicting themselves shifted; record when due if `tel`.
std::vector<float> train(Tiny& m, int steps, inspect::Telemetry* tel) {
  Generator g(7);
  optim::SGD opt(m.parameters(), {.lr = 0.1});
  std::vector<float> losses;
  for (int step = 1; step <= steps; ++step) {
    const Tensor ids = randint(0, 12, {4, 10}, g);
    Variable loss =
        cross_entropy(reshape(narrow(m(ids), 1, 0, 9), {-1, 12}), ids.narrow(1, 1, 9).contiguous().reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(static_cast<float>(loss.item()));
    if (tel && tel->due(step)) tel->record(step, loss.item());
  }
  return losses;
}

inspect::TelemetryOptions options(Tiny& m) {
  return {
      .vocab = 12,
      .probe = from_vector<int64_t>({3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, {1, 10}),
      .every = 3,
      .scores = {.induction_length = 5, .induction_batch = 4, .logits = [&m](const Tensor& ids) { return m(ids); }}};
}

}  // namespace

TEST(Telemetry, RecordsEveryHeadWhenDueWithoutChangingTraining) {
  Generator g1(1), g2(1);
  Tiny plain(g1), watched(g2);
  inspect::Telemetry tel(
      watched, [&](const Tensor& ids) { watched(ids); }, options(watched));
  EXPECT_TRUE(tel.due(1));
  EXPECT_FALSE(tel.due(2));
  EXPECT_TRUE(tel.due(3));
  // the same losses bit for bit: recording draws from no training generator and changes no mode
  watched.train();
  EXPECT_EQ(train(plain, 6, nullptr), train(watched, 6, &tel));
  EXPECT_TRUE(watched.is_training());
  ASSERT_EQ(tel.records().size(), 3u);  // steps 1, 3, 6 (after step 6's update)
  EXPECT_EQ(tel.records()[2].step, 6);
  const inspect::TelemetryRecord& r = tel.records().back();
  ASSERT_EQ(r.heads.size(), 2u);
  EXPECT_EQ(r.heads[1].layer, "attn");
  EXPECT_FALSE(std::isnan(r.heads[1].copying));
  EXPECT_FALSE(std::isnan(r.icl.score));
  EXPECT_NEAR(r.icl.score, r.icl.late - r.icl.early, 1e-12);
  ASSERT_EQ(r.patterns.size(), 1u);
  EXPECT_EQ(r.patterns[0].weights.shape(), (Shape{2, 10, 10}));
  // the patterns are the model's weights on the probe: recompute them
  NoGradGuard no_grad;
  inspect::AttentionCapture cap(watched);
  watched.eval();
  watched(from_vector<int64_t>({3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, {1, 10}));
  mgtest::expect_close(r.patterns[0].weights, cap.at("attn").weights.squeeze(0), 1e-6);
}

TEST(Telemetry, JsonHasTheFormatTheExplorerReads) {
  Generator g(2);
  Tiny m(g);
  inspect::Telemetry tel(
      m, [&](const Tensor& ids) { m(ids); }, options(m));
  train(m, 3, &tel);
  const auto j = nlohmann::json::parse(tel.json({{"example", "tiny"}}));
  EXPECT_EQ(j["format"], "minigrad-telemetry-1");
  EXPECT_EQ(j["meta"]["example"], "tiny");
  ASSERT_EQ(j["layers"].size(), 1u);
  EXPECT_EQ(j["layers"][0]["name"], "attn");
  EXPECT_EQ(j["layers"][0]["heads"], 2);
  EXPECT_EQ(j["layers"][0]["key_tokens"][5], "9");  // the probe's ids as labels
  ASSERT_EQ(j["records"].size(), 2u);               // steps 1 and 3
  const auto& rec = j["records"][1];
  EXPECT_EQ(rec["step"], 3);
  EXPECT_EQ(rec["heads"].size(), 2u);
  EXPECT_TRUE(rec["icl"].is_object());
  // weights [layer][head][query][key]: rows sum to 1 (3 decimals each), the future masked to 0
  const auto& w = rec["weights"][0];
  ASSERT_EQ(w.size(), 2u);
  ASSERT_EQ(w[0].size(), 10u);
  for (const auto& head : w)
    for (size_t q = 0; q < 10; ++q) {
      double s = 0;
      for (size_t k = 0; k < 10; ++k) s += head[q][k].get<double>();
      EXPECT_NEAR(s, 1.0, 10 * 5e-4);  // 3 decimals each
      if (q < 9) EXPECT_EQ(head[q][q + 1].get<double>(), 0.0);
    }
  // scores: masked entries (-inf) are null
  EXPECT_TRUE(rec["scores"][0][0][0][1].is_null());
  EXPECT_FALSE(rec["scores"][0][0][1][0].is_null());
  // save writes the same text
  const std::string path = (std::filesystem::temp_directory_path() / "mg_telemetry_test.json").string();
  tel.save(path, {{"example", "tiny"}});
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), tel.json({{"example", "tiny"}}));
  std::filesystem::remove(path);
}

TEST(Telemetry, BadOptionsAreNamed) {
  Generator g(3);
  Tiny m(g);
  auto fwd = [&](const Tensor& ids) { m(ids); };
  auto with = [&](auto change) {
    inspect::TelemetryOptions o = options(m);
    change(o);
    return o;
  };
  EXPECT_THROW(inspect::Telemetry(m, fwd, with([](auto& o) { o.vocab = 1; })), ValueError);
  EXPECT_THROW(inspect::Telemetry(m, fwd, with([](auto& o) { o.probe = o.probe.to(DType::Float32); })), DTypeError);
  EXPECT_THROW(inspect::Telemetry(m, fwd, with([](auto& o) { o.probe = Tensor(); })), StateError);
  EXPECT_THROW(inspect::Telemetry(m, fwd, with([](auto& o) { o.every = 0; })), ValueError);
  EXPECT_THROW(inspect::Telemetry(m, fwd, with([](auto& o) { o.tokens = {"a", "b"}; })), ShapeError);
  nn::Linear lonely(2, 2);
  EXPECT_THROW(inspect::Telemetry(
                   lonely, [](const Tensor&) {}, options(m)),
               ValueError);
}

TEST(Explorer, EmbedsTheRunAndRefusesOtherText) {
  const std::string json =
      R"({"format":"minigrad-telemetry-1","meta":{"x":"</script><b>","y":"<!--"},"layers":[],"records":[]})";
  const std::string html = viz::explorer_html("run <1>", json);
  EXPECT_NE(html.find("<title>run &lt;1&gt;</title>"), std::string::npos);
  // every '<' of the data is written \u003c: it can neither close its <script> element nor open a comment
  EXPECT_NE(html.find(R"("\u003c/script>\u003cb>")"), std::string::npos);
  EXPECT_EQ(html.find("</script><b>"), std::string::npos);
  EXPECT_EQ(html.find("<!--"), std::string::npos);
  EXPECT_NE(html.find("id=\"grid\""), std::string::npos);
  EXPECT_NE(html.find("id=\"step\""), std::string::npos);
  EXPECT_THROW(viz::explorer_html("x", "[]"), ValueError);
  EXPECT_THROW(viz::explorer_html("x", R"({"format":"other"})"), ValueError);
}
