// What each attention head does, measured: inspect::score_heads on heads forced by masks or by
// hand-set weights (hand-computed scores), the copying and in-context-learning scores,
// inspect::HeadAblation against head_mask, inspect::head_value_writes against the module's output,
// and cross-attention layers (no positional scores; their
// own labels in inspect::Telemetry).
#include <cmath>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using mgtest::expect_values;
using mgtest::rnd;
using testing::HasSubstr;
namespace {
struct ForcedHeads : nn::Callable<ForcedHeads> {
  nn::Embedding emb;
  nn::MultiheadAttention prev, first, ind;
  explicit ForcedHeads(Generator& g) : emb(50, 4, {}, g), prev(4, 1, {}, g), first(4, 1, {}, g), ind(4, 1, {}, g) {
    register_module("emb", emb), register_module("prev", prev), register_module("first", first),
        register_module("ind", ind);
  }
  // Bool mask (T, T) or (B*H, T, T) -> true where a query may NOT look: all but `key(b, t)`.
  static Tensor only(int64_t B, int64_t T, const std::function<int64_t(int64_t, int64_t)>& key) {
    Tensor m = full({B, 1, T, T}, 1, DType::Bool);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) m.narrow(0, b, 1).narrow(2, t, 1).narrow(3, key(b, t), 1).fill_(0);
    return m;
  }
  void forward(const Tensor& ids) const {
    const int64_t B = ids.size(0), T = ids.size(1);
    const Variable x = emb(ids);
    const std::vector<int64_t> v = ids.to_vector<int64_t>();
    prev(x, {.attn_mask = only(B, T, [](int64_t, int64_t t) { return t == 0 ? 0 : t - 1; })});
    first(x, {.attn_mask = only(B, T, [](int64_t, int64_t) { return 0; })});
    ind(x, {.attn_mask = only(B, T, [&](int64_t b, int64_t t) {
              for (int64_t j = t - 1; j >= 0; --j)
                if (v[b * T + j] == v[b * T + t]) return j + 1;
              return int64_t{0};
            })});
  }
  std::string type_name() const override { return "ForcedHeads"; }
};
}  // namespace

TEST(HeadScores, ForcedHeadsScoreAsComputedByHand) {
  Generator g(3);
  ForcedHeads m(g);
  // a probe without repeats: T = 6, so the "ind" head sits on key 0
  const Tensor probe = from_vector<int64_t>({0, 1, 2, 3, 4, 0, 4, 3, 2, 1, 0, 4}, {2, 6});
  const auto s = inspect::score_heads(
      m, [&](const Tensor& ids) { m(ids); }, probe, 50);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].layer, "prev");
  EXPECT_NEAR(s[0].previous_token, 1.0, 1e-6);
  EXPECT_NEAR(s[0].first_token, 1.0 / 5, 1e-6);  // only t = 1, whose previous token is position 0
  EXPECT_EQ(s[0].label, "previous token");
  EXPECT_NEAR(s[1].first_token, 1.0, 1e-6);
  EXPECT_NEAR(s[1].previous_token, 1.0 / 5, 1e-6);
  EXPECT_EQ(s[1].label, "first token");
  // on r r (n = 3): every second-copy query finds its first occurrence at t - 3 and looks at
  // t - 2, the induction key, unless a token repeats inside r (3 tokens out of 50 rarely do)
  EXPECT_GT(s[2].induction, 0.8);
  EXPECT_EQ(s[2].label, "induction");
  EXPECT_NEAR(s[0].induction, 0.0, 1e-6);  // t - 1 is never t - n + 1 for n = 3
  EXPECT_NEAR(s[1].induction, 0.0, 1e-6);
  EXPECT_THROW(inspect::score_heads(
                   m, [&](const Tensor& ids) { m(ids); }, probe.narrow(1, 0, 3), 50),
               ValueError);
  EXPECT_THROW(inspect::score_heads(
                   m, [&](const Tensor& ids) { m(ids); }, probe.to(DType::Float32), 50),
               DTypeError);
}

namespace {
// One head over one-hot tokens (embedding = I, W_V = I, W_O = gain * I, no biases) whose attention
// is forced onto the induction key, and logits = the head's output: attending to token i writes
// gain on logit i and nothing else.
struct ForcedCopier : nn::Callable<ForcedCopier> {
  nn::Embedding emb;
  nn::MultiheadAttention ind;
  ForcedCopier(Generator& g, int64_t vocab, double gain) : emb(vocab, vocab, {}, g), ind(vocab, 1, {}, g) {
    register_module("emb", emb), register_module("ind", ind);
    NoGradGuard no_grad;
    emb.weight.data().copy_(eye(vocab));
    ind.w_v.weight.data().copy_(eye(vocab));
    ind.w_o.weight.data().copy_(eye(vocab) * gain);
    for (nn::Linear* l : {&ind.w_q, &ind.w_k, &ind.w_v, &ind.w_o}) l->bias.data().fill_(0);
  }
  Variable forward(const Tensor& ids) const {
    const int64_t B = ids.size(0), T = ids.size(1);
    const std::vector<int64_t> v = ids.to_vector<int64_t>();
    return ind(emb(ids), {.attn_mask = ForcedHeads::only(B, T,
                                                         [&](int64_t b, int64_t t) {
                                                           for (int64_t j = t - 1; j >= 0; --j)
                                                             if (v[b * T + j] == v[b * T + t]) return j + 1;
                                                           return int64_t{0};
                                                         })})
        .output;
  }
  std::string type_name() const override { return "ForcedCopier"; }
};
}  // namespace

TEST(HeadScores, CopyingIsTheLogitRaisedOnTheAttendedTokenAsComputedByHand) {
  // With the head: logits_t = gain * onehot(attended token); without it: 0. So d_t = gain * onehot
  // and copying = gain - gain / vocab, for every query; a head that writes -gain scores the negative.
  const int64_t V = 8;
  Generator g(5);
  const Tensor probe = from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, {1, 8});
  for (double gain : {2.0, -2.0}) {
    ForcedCopier m(g, V, gain);
    const auto s = inspect::score_heads(m, [&](const Tensor& ids) { m(ids); }, probe, V,
                                        {.induction_length = 4, .logits = [&](const Tensor& ids) { return m(ids); }});
    ASSERT_EQ(s.size(), 1u);
    EXPECT_NEAR(s[0].copying, gain - gain / V, 1e-6) << "gain " << gain;
  }
  // without a logits function the copying score is not measured
  ForcedCopier m(g, V, 2.0);
  EXPECT_TRUE(std::isnan(inspect::score_heads(
                             m, [&](const Tensor& ids) { m(ids); }, probe, V)[0]
                             .copying));
}

TEST(HeadScores, IclScoreOfAPerfectCopierAsComputedByHand) {
  // logits: 0 everywhere except, in the second copy (t >= n), 100 on ids[t - n + 1], the token that
  // comes next. Early: every target costs log V. Late: the first target (r_1 after r_n) costs log V,
  // the other n - 1 cost log(1 + (V - 1) e^-100) = 0. So late = log V / n.
  const int64_t V = 10, n = 5;
  auto copier = [&](const Tensor& ids) {
    const int64_t B = ids.size(0), T = ids.size(1);
    Tensor z = zeros({B, T, V}, DType::Float64);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = n; t < T; ++t)
        z.narrow(0, b, 1).narrow(1, t, 1).narrow(2, static_cast<int64_t>(ids.at({b, t - n + 1})), 1).fill_(100);
    return Variable(z);
  };
  const inspect::IclScore s = inspect::icl_score(copier, V, n);
  EXPECT_NEAR(s.early, std::log(10.0), 1e-12);
  EXPECT_NEAR(s.late, std::log(10.0) / n, 1e-12);
  EXPECT_NEAR(s.score, std::log(10.0) / n - std::log(10.0), 1e-12);
  EXPECT_THROW(inspect::icl_score(copier, 1, n), ValueError);
  EXPECT_THROW(inspect::icl_score(
                   [&](const Tensor& ids) {
                     return Variable(zeros({ids.size(0), ids.size(1), 3}));
                   },
                   V, n),
               ShapeError);
}

TEST(HeadAblation, SameNumbersAsHeadMaskAndGradientsFlow) {
  struct Wrap : nn::Callable<Wrap> {
    nn::MultiheadAttention attn;
    explicit Wrap(Generator& g) : attn(12, 3, {}, g) { register_module("attn", attn); }
    std::string type_name() const override { return "Wrap"; }
  };
  Generator g(11);
  Wrap m(g);
  m.to(DType::Float64);
  const Tensor x0 = randn({2, 5, 12}, g, DType::Float64);
  Variable xa(x0, true), xb(x0, true);
  const Variable masked = m.attn(xa, {.is_causal = true, .head_mask = from_vector<double>({1, 0, 1}, {3})}).output;
  Variable hooked;
  {
    inspect::HeadAblation off(m, "attn", {1});
    hooked = m.attn(xb, {.is_causal = true}).output;
  }
  expect_close(hooked.data(), masked.data(), 1e-12);
  sum(masked * masked).backward();
  sum(hooked * hooked).backward();
  expect_close(xb.grad(), xa.grad(), 1e-12);
  // the hook is gone with the object: the full output again
  const Variable full = m.attn(Variable(x0), {.is_causal = true}).output;
  EXPECT_GT(max(abs(full.data() - hooked.data())).item(), 1e-3);
  EXPECT_THROW(inspect::HeadAblation(m, "attn", {3}), ValueError);
  EXPECT_THROW(inspect::HeadAblation(m, "nothing", {0}), ValueError);
}

// inspect::head_value_writes: each head's weights times what it writes from each key, summed over
// the heads, plus W_O's bias, is the module's output; with grouped heads, biases everywhere, a
// cross-attention, and value inputs that are transposed or expanded (stride 0) views.
TEST(HeadValueWrites, HeadPartsAddUpToTheModulesOutput) {
  Generator g(21);
  nn::MultiheadAttention attn(12, 4, {.num_kv_heads = 2}, g);
  attn.to(DType::Float64);
  for (nn::Linear* l : {&attn.w_q, &attn.w_k, &attn.w_v, &attn.w_o})
    l->bias.data().copy_(randn({l->out_features}, g, DType::Float64));
  const Tensor q = randn({2, 3, 12}, g, DType::Float64);
  const Tensor kv_t = randn({2, 12, 5}, g, DType::Float64).transpose(1, 2);     // (2, 5, 12), strided
  const Tensor kv_e = randn({1, 5, 12}, g, DType::Float64).expand({2, 5, 12});  // stride 0 on the batch
  for (const Tensor& kv : {kv_t, kv_e}) {
    const nn::AttentionOutput out = attn(Variable(q), Variable(kv), Variable(kv), {.need_weights = true});
    Tensor sum = attn.w_o.bias.data().reshape({1, 1, 12}).expand({2, 3, 12});
    for (int64_t h = 0; h < 4; ++h) {
      const Tensor u = inspect::head_value_writes(attn, Variable(kv), h).data();  // (2, 5, 12)
      ASSERT_EQ(u.shape(), (Shape{2, 5, 12}));
      sum = sum + matmul(out.weights.data().narrow(1, h, 1).reshape({2, 3, 5}), u);
    }
    expect_close(sum, out.output.data(), 1e-12);
    // the same from a contiguous copy of the input: the layout changes nothing
    expect_close(inspect::head_value_writes(attn, Variable(kv.contiguous()), 3).data(),
                 inspect::head_value_writes(attn, Variable(kv), 3).data(), 1e-14);
  }
  EXPECT_THROW(inspect::head_value_writes(attn, Variable(kv_t), 4), ValueError);
  EXPECT_THROW(inspect::head_value_writes(attn, Variable(kv_t), -1), ValueError);
}

namespace {
// The shape of an encoder-decoder in a few lines: a decoder stream with causal self-attention and
// a cross-attention that reads a memory made of the first `memory` ids; with `bos` the decoder
// runs on a start token and the ids (one longer than the source), else on the ids.
struct TinyEncoderDecoder : nn::Callable<TinyEncoderDecoder> {
  nn::Embedding emb;
  nn::MultiheadAttention self_attn, cross_attn;
  nn::Linear out;
  int64_t memory;
  bool bos;
  TinyEncoderDecoder(Generator& g, int64_t vocab, int64_t memory, bool bos)
      : emb(vocab, 8, {}, g),
        self_attn(8, 2, {}, g),
        cross_attn(8, 2, {}, g),
        out(8, vocab, {}, g),
        memory(memory),
        bos(bos) {
    register_module("emb", emb), register_module("self_attn", self_attn), register_module("cross_attn", cross_attn);
    register_module("out", out);
  }
  // ids (B, T) -> logits (B, T, vocab), or (B, T + 1, vocab) with bos
  Variable forward(const Tensor& ids) const {
    const Tensor dec = bos ? concat({zeros({ids.size(0), 1}, DType::Int64), ids}, 1) : ids;
    const Variable x = emb(dec), mem = emb(ids.narrow(1, 0, memory).contiguous());
    Variable y = x + self_attn(x, {.is_causal = true}).output;
    y = y + cross_attn(y, mem, mem).output;
    return out(y);
  }
  std::string type_name() const override { return "TinyEncoderDecoder"; }
};
}  // namespace

TEST(HeadScores, CrossAttentionHeadsGetNoScores) {
  // Keys from another sequence than the queries: no key is "t - 1" of a query, so the heads of a
  // cross-attention get NaN and the label "cross-attention", whatever the two lengths (3 keys for
  // 8 queries, or 8 for 8). The self-attention next to it is scored as usual, copying included.
  const int64_t V = 12;
  Generator g(21);
  const Tensor probe = randint(0, V, {2, 8}, g);
  for (int64_t memory : {3, 8}) {
    TinyEncoderDecoder m(g, V, memory, false);
    const auto s = inspect::score_heads(m, [&](const Tensor& ids) { m(ids); }, probe, V,
                                        {.induction_batch = 4, .logits = [&](const Tensor& ids) { return m(ids); }});
    ASSERT_EQ(s.size(), 4u);
    for (const inspect::HeadScore& h : s) {
      if (h.layer == "self_attn") {
        EXPECT_NE(h.label, "cross-attention");
        EXPECT_TRUE(std::isfinite(h.previous_token) && std::isfinite(h.first_token) && std::isfinite(h.induction));
        EXPECT_TRUE(std::isfinite(h.copying)) << h.head;
      } else {
        EXPECT_EQ(h.layer, "cross_attn");
        EXPECT_EQ(h.label, "cross-attention") << "memory " << memory;
        EXPECT_TRUE(std::isnan(h.previous_token) && std::isnan(h.first_token) && std::isnan(h.induction) &&
                    std::isnan(h.copying));
      }
    }
  }
}

TEST(Telemetry, CrossAttentionMapsAreDecoderBySourceWithLabelsOfTheirOwn) {
  // Decoder <s> + 6 ids (7 queries) against 6 source keys: the recorded map is 7 x 6, and the
  // decoder's layers need labels of their own, 7 long, which the JSON carries per layer.
  const int64_t V = 10;
  Generator g(4);
  TinyEncoderDecoder m(g, V, 6, true);
  const Tensor probe = randint(0, V, {3, 6}, g);
  const std::vector<std::string> src = {"a", "b", "c", "d", "e", "f"}, dec = {"<s>", "f", "e", "d", "c", "b", "a"};
  auto forward = [&](const Tensor& ids) { m(ids); };
  inspect::Telemetry tel(m, forward,
                         {.vocab = V,
                          .probe = probe,
                          .tokens = src,
                          .query_tokens = {{"self_attn", dec}, {"cross_attn", dec}},
                          .key_tokens = {{"self_attn", dec}}});
  const inspect::TelemetryRecord& r = tel.record(1, 2.5);
  ASSERT_EQ(r.patterns.size(), 2u);
  EXPECT_EQ(r.patterns[0].weights.shape(), (Shape{2, 7, 7}));
  EXPECT_EQ(r.patterns[1].weights.shape(), (Shape{2, 7, 6}));  // (H, decoder, source)
  EXPECT_EQ(r.patterns[1].scores.shape(), (Shape{2, 7, 6}));
  ASSERT_EQ(r.heads.size(), 4u);
  EXPECT_EQ(r.heads[2].label, "cross-attention");
  const std::string json = tel.json();
  EXPECT_THAT(json, HasSubstr(R"({"name":"cross_attn","heads":2,"query_tokens":["<s>","f","e","d","c","b","a"],)"
                              R"("key_tokens":["a","b","c","d","e","f"]})"));
  EXPECT_THAT(json,
              HasSubstr(R"({"layer":"cross_attn","head":0,"previous_token":null,"first_token":null,"induction":null,)"
                        R"("copying":null,"label":"cross-attention"})"));
  // Without the decoder's labels the 7th query has none: record() names the layer.
  inspect::Telemetry unlabelled(m, forward, {.vocab = V, .probe = probe, .tokens = src});
  try {
    unlabelled.record(1);
    ADD_FAILURE() << "no error for 7 queries with 6 labels";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("self_attn attends from 7 queries to 7 keys"));
    EXPECT_THAT(e.what(), HasSubstr("query_tokens / key_tokens[\"self_attn\"]"));
  }
  // A label map for a layer the model does not have is a typo, caught at once.
  EXPECT_THROW(inspect::Telemetry(m, forward, {.vocab = V, .probe = probe, .key_tokens = {{"cross", src}}}),
               ValueError);
}
