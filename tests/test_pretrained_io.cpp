// Models saved in Hugging Face's layout (models/pretrained.h): the files hold transformers' names
// and shapes and load back, in minigrad and in transformers, an untied GPT-2 head as its own matrix;
// and what is refused, with the model unchanged: missing, extra or mis-shaped tensors, bad configs,
// too long or malformed inputs.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "pretrained_helpers.h"

using namespace mg;
using namespace mgtest;
using namespace mgtest::pretrained;
using testing::HasSubstr;

// ---------------------------------------------------------------- saving in Hugging Face's layout

TEST(Pretrained, SavedInHuggingFaceLayoutLoadsBackAndInTransformers) {
  const std::string dir = temp_path("hf");
  auto bert = models::bert_from_pretrained(kGolden + "/tiny_bert");
  auto gpt = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  models::save_hf_bert(*bert, dir + "/bert");
  models::save_hf_gpt2(*gpt, dir + "/gpt2");
  // The files hold exactly the names and shapes transformers wrote.
  for (const char* m : {"bert", "gpt2"}) {
    const SafeTensors ours = load_safetensors(dir + "/" + m + "/model.safetensors");
    const SafeTensors theirs = load_safetensors(kGolden + "/tiny_" + m + "/model.safetensors");
    ASSERT_EQ(ours.tensors.size(), theirs.tensors.size()) << m;
    for (const auto& [name, t] : theirs.tensors) {
      ASSERT_TRUE(ours.find(name).defined()) << m << " " << name;
      EXPECT_EQ(max_diff(ours.find(name), t), 0.0) << m << " " << name;
    }
  }
  // Loaded back by minigrad: the same numbers.
  auto bert2 = models::bert_from_pretrained(dir + "/bert");
  auto gpt2 = models::gpt2_from_pretrained(dir + "/gpt2");
  const Tensor ids = gold("bert.input_ids"), types = gold("bert.token_type_ids");
  EXPECT_EQ(max_diff((*bert2)(ids, {.token_type_ids = types}).last_hidden_state.data(),
                     (*bert)(ids, {.token_type_ids = types}).last_hidden_state.data()),
            0.0);
  EXPECT_EQ(max_diff((*gpt2)(gold("gpt2.input_ids")).data(), (*gpt)(gold("gpt2.input_ids")).data()), 0.0);
  // And by transformers itself, when it is installed (gen_pretrained.py check).
  bert->to(DType::Float64);
  gpt->to(DType::Float64);
  save_safetensors(dir + "/outputs.safetensors",
                   {{"bert.input_ids", ids},
                    {"bert.token_type_ids", types},
                    {"bert.last_hidden_state", (*bert)(ids, {.token_type_ids = types}).last_hidden_state.data()},
                    {"gpt2.input_ids", gold("gpt2.input_ids")},
                    {"gpt2.logits", (*gpt)(gold("gpt2.input_ids")).data()}});
  const std::string python = std::string(MG_SOURCE_DIR) + "/build/torch2-venv/bin/python";
  if (!fs::exists(python) ||
      std::system((python + " -c 'import transformers, safetensors' > /dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "transformers is not installed (" << python
                 << "): the saved folders were checked by minigrad only; see tests/golden/gen_pretrained.py";
  const std::string cmd = python + " " + kGolden + "/gen_pretrained.py check " + dir + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(Pretrained, AnUntiedGpt2HeadIsSavedAndLoadedAsItsOwnMatrix) {
  Generator gen(5);
  models::GPT model(30, 8,
                    {.d_model = 8,
                     .nhead = 2,
                     .num_layers = 1,
                     .tie_weights = false,
                     .gelu_approximate = GeluApproximate::Tanh,
                     .head_bias = false},
                    gen);
  const std::string dir = temp_path("untied");
  models::save_hf_gpt2(model, dir);
  const SafeTensors f = load_safetensors(dir + "/model.safetensors");
  ASSERT_TRUE(f.find("lm_head.weight").defined());
  nlohmann::json config;
  std::ifstream(dir + "/config.json") >> config;
  EXPECT_EQ(config["tie_word_embeddings"], false);
  auto back = models::gpt2_from_pretrained(dir);
  EXPECT_FALSE(back->head.weight.impl() == back->tok.weight.impl());
  EXPECT_EQ(max_diff(back->head.weight.data(), model.head.weight.data()), 0.0);
  const Tensor ids = from_vector<int64_t>({1, 5, 29, 3}, {1, 4});
  EXPECT_EQ(max_diff((*back)(ids).data(), model(ids).data()), 0.0);
  // and a GPT whose head has a bias cannot be written as GPT-2
  models::GPT biased(30, 8, {.d_model = 8, .nhead = 2, .num_layers = 1}, gen);
  EXPECT_THAT(error_of([&] { models::save_hf_gpt2(biased, temp_path("biased")); }), HasSubstr("head has a bias"));
}

// ---------------------------------------------------------------- bad checkpoints and configs

TEST(Pretrained, MissingExtraOrMisShapedTensorsAreRefusedAndTheModelIsUnchanged) {
  auto model = models::bert_from_pretrained(kGolden + "/tiny_bert");
  const auto before = snapshot(*model);
  const std::string missing = edited_copy("tiny_bert", [](StateDict& s) {
    std::erase_if(s, [](const auto& p) { return p.first == "encoder.layer.1.attention.self.key.weight"; });
  });
  std::string e = error_of([&] { models::load_hf_bert(*model, missing + "/model.safetensors"); });
  EXPECT_THAT(e, HasSubstr("'encoder.layer.1.attention.self.key.weight' is missing"));
  EXPECT_THAT(e, HasSubstr("encoder.layer.1.self_attn.w_k.weight"));
  EXPECT_THAT(e, HasSubstr(missing));
  const std::string extra =
      edited_copy("tiny_bert", [](StateDict& s) { s.emplace_back("encoder.layer.7.foo", ones({2})); });
  e = error_of([&] { models::load_hf_bert(*model, extra + "/model.safetensors"); });
  EXPECT_THAT(e, HasSubstr("the model does not have: encoder.layer.7.foo"));
  const std::string shaped = edited_copy("tiny_bert", [](StateDict& s) {
    for (auto& [n, t] : s)
      if (n == "encoder.layer.0.intermediate.dense.weight") t = zeros({31, 16});
  });
  e = error_of([&] { models::load_hf_bert(*model, shaped + "/model.safetensors"); });
  EXPECT_THAT(e, HasSubstr("'encoder.layer.0.intermediate.dense.weight' has shape (31, 16)"));
  EXPECT_THAT(e, HasSubstr("needs (32, 16)"));
  EXPECT_EQ(snapshot(*model), before);
  // A GPT-2 c_attn of the wrong width, and a config whose sizes do not match the file.
  auto gpt = models::gpt2_from_pretrained(kGolden + "/tiny_gpt2");
  const auto gpt_before = snapshot(*gpt);
  const std::string attn = edited_copy("tiny_gpt2", [](StateDict& s) {
    for (auto& [n, t] : s)
      if (n == "transformer.h.1.attn.c_attn.weight") t = zeros({16, 32});
  });
  e = error_of([&] { models::load_hf_gpt2(*gpt, attn + "/model.safetensors"); });
  EXPECT_THAT(e, HasSubstr("'transformer.h.1.attn.c_attn.weight' has shape (16, 32)"));
  EXPECT_EQ(snapshot(*gpt), gpt_before);
  const std::string config = edited_copy(
      "tiny_gpt2", [](StateDict&) {}, [](nlohmann::json& c) { c["n_embd"] = 32; });
  e = error_of([&] { models::gpt2_from_pretrained(config); });
  EXPECT_THAT(e,
              HasSubstr("'transformer.wte.weight' has shape (400, 16), but the model's 'tok.weight' needs (400, 32)"));
}

TEST(Pretrained, BadConfigsNameTheFileAndTheField) {
  const std::string act = edited_copy(
      "tiny_bert", [](StateDict&) {}, [](nlohmann::json& c) { c["hidden_act"] = "gelu_new"; });
  std::string e = error_of([&] { models::bert_from_pretrained(act); });
  EXPECT_THAT(e, HasSubstr("config.json"));
  EXPECT_THAT(e, HasSubstr("hidden_act must be \"gelu\" or \"relu\", got \"gelu_new\""));
  const std::string eps = edited_copy(
      "tiny_gpt2", [](StateDict&) {}, [](nlohmann::json& c) { c["layer_norm_epsilon"] = "1e-5"; });
  EXPECT_THAT(error_of([&] { models::gpt2_from_pretrained(eps); }),
              HasSubstr("field \"layer_norm_epsilon\" should be a number, got \"1e-5\""));
  const std::string tie = edited_copy(
      "tiny_gpt2", [](StateDict&) {}, [](nlohmann::json& c) { c["tie_word_embeddings"] = "yes"; });
  EXPECT_THAT(error_of([&] { models::gpt2_from_pretrained(tie); }),
              HasSubstr("field \"tie_word_embeddings\" should be true or false"));
  const std::string no_layers = edited_copy(
      "tiny_bert", [](StateDict&) {}, [](nlohmann::json& c) { c.erase("num_hidden_layers"); });
  EXPECT_THAT(error_of([&] { models::bert_from_pretrained(no_layers); }),
              HasSubstr("has no field \"num_hidden_layers\""));
  const std::string typed = edited_copy(
      "tiny_bert", [](StateDict&) {}, [](nlohmann::json& c) { c["hidden_size"] = "16"; });
  EXPECT_THAT(error_of([&] { models::bert_from_pretrained(typed); }),
              HasSubstr("field \"hidden_size\" should be a whole number, got \"16\""));
  const std::string gpt_as_bert = edited_copy(
      "tiny_bert", [](StateDict&) {}, [](nlohmann::json& c) { c["model_type"] = "gpt2"; });
  EXPECT_THAT(error_of([&] { models::bert_from_pretrained(gpt_as_bert); }), HasSubstr("expected model_type \"bert\""));
  const std::string heads = edited_copy(
      "tiny_bert", [](StateDict&) {}, [](nlohmann::json& c) { c["num_attention_heads"] = 3; });
  EXPECT_THAT(error_of([&] { models::bert_from_pretrained(heads); }),
              HasSubstr("hidden_size 16 must divide by num_attention_heads 3"));
  const std::string inner = edited_copy(
      "tiny_gpt2", [](StateDict&) {}, [](nlohmann::json& c) { c["n_inner"] = 8; });
  EXPECT_THAT(error_of([&] { models::gpt2_from_pretrained(inner); }), HasSubstr("n_inner 8 is not supported"));
  // BERT's layer_norm_eps is checked as GPT-2's layer_norm_epsilon is (it was accepted, then NaN)
  const std::string bert_eps = edited_copy(
      "tiny_bert", [](StateDict&) {}, [](nlohmann::json& c) { c["layer_norm_eps"] = -1; });
  EXPECT_THAT(error_of([&] { models::bert_from_pretrained(bert_eps); }),
              HasSubstr("layer_norm_eps must be finite and positive, got -1"));
  // 2^40 layers: refused before anything is built, naming the fields and the bytes (it allocated
  // until the system killed the process)
  const std::string deep_bert = edited_copy(
      "tiny_bert", [](StateDict&) {}, [](nlohmann::json& c) { c["num_hidden_layers"] = int64_t{1} << 40; });
  try {
    models::bert_from_pretrained(deep_bert);
    ADD_FAILURE() << "no error";
  } catch (const MemoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("config.json: BertModel: a model of num_hidden_layers=1099511627776"));
    EXPECT_THAT(e.what(), HasSubstr("bytes, more than this machine's"));
  }
  const std::string deep_gpt = edited_copy(
      "tiny_gpt2", [](StateDict&) {}, [](nlohmann::json& c) { c["n_layer"] = int64_t{1} << 40; });
  try {
    models::gpt2_from_pretrained(deep_gpt);
    ADD_FAILURE() << "no error";
  } catch (const MemoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("GPT: a model of num_layers=1099511627776"));
  }
  EXPECT_THAT(error_of([&] { models::bert_from_pretrained("/nonexistent/folder"); }),
              HasSubstr("bert_from_pretrained: '/nonexistent/folder' does not exist (expected a model folder"));
  // a folder without config.json: not a model folder (the reader does not open a file that is not there)
  const std::string empty_dir = temp_path("empty");
  fs::create_directories(empty_dir);
  EXPECT_THAT(error_of([&] { models::bert_from_pretrained(empty_dir); }),
              HasSubstr("has no config.json, so it is not a Hugging Face model folder"));
  const std::string not_json = temp_path("notjson");
  fs::create_directories(not_json);
  std::ofstream(not_json + "/config.json") << "{ hidden_size: ";
  EXPECT_THAT(error_of([&] { models::bert_from_pretrained(not_json); }), HasSubstr("is not valid JSON"));
}

TEST(Pretrained, TooLongOrMalformedInputsAreShapeErrors) {
  auto model = models::bert_from_pretrained(kGolden + "/tiny_bert");
  // BertModel's errors name BertModel (the call the user made), not the BertEmbeddings inside it
  EXPECT_THAT(error_of([&] {
                (*model)(zeros({1, 13}, DType::Int64));
              }),
              HasSubstr("BertModel: a sequence of 13 tokens is longer than max_position_embeddings 12"));
  EXPECT_THAT(error_of([&] {
                (*model)(full({1, 3}, 400, DType::Int64));
              }),
              HasSubstr("BertModel: input_ids must be token ids in [0, 40) (vocab_size), got ids from 400 to 400"));
  EXPECT_THAT(error_of([&] { (*model)(zeros({1, 3})); }), HasSubstr("BertModel: input_ids must be int64, got float32"));
  EXPECT_THAT(error_of([&] {
                (*model)(zeros({1, 3}, DType::Int64), {.token_type_ids = full({1, 3}, 5, DType::Int64)});
              }),
              HasSubstr("BertModel: token_type_ids must be in [0, 2) (type_vocab_size), got 5 to 5"));
  EXPECT_THAT(error_of([&] {
                (*model)(zeros({1, 4}, DType::Int64), {.attention_mask = ones({1, 5}, DType::Int64)});
              }),
              HasSubstr("attention_mask must have the shape of input_ids (1, 4), got (1, 5)"));
  EXPECT_THROW((*model)(zeros({1, 4}, DType::Int64), {.attention_mask = ones({1, 4})}), DTypeError);
  EXPECT_THAT(error_of([&] {
                (*model)(zeros({1, 4}, DType::Int64), {.head_mask = ones({2, 3})});
              }),
              HasSubstr("head_mask must have shape (2, 4) (layers, heads), got (2, 3)"));
  EXPECT_THROW((*model)(zeros({1, 4}, DType::Int64), {.head_mask = ones({2, 4}, DType::Int64)}), DTypeError);
  // a row of padding only: nothing for its queries to attend to (NaN otherwise)
  EXPECT_THAT(
      error_of([&] {
        (*model)(zeros({2, 3}, DType::Int64), {.attention_mask = from_vector<int64_t>({1, 1, 0, 0, 0, 0}, {2, 3})});
      }),
      HasSubstr("attention_mask row 1 marks every token as padding"));
  EXPECT_THAT(error_of([&] { (*model)(zeros({0, 0}, DType::Int64)); }), HasSubstr("at least one sequence"));
  EXPECT_THAT(error_of([&] {
                (*model)(zeros({1, 2}, DType::Int64), {.token_type_ids = full({1, 2}, 2, DType::Int64)});
              }),
              HasSubstr("2"));  // a token type outside the table of 2
  EXPECT_THAT(error_of([&] {
                (*model)(full({1, 3}, 40, DType::Int64));
              }),
              HasSubstr("40"));  // id outside the vocabulary
}
