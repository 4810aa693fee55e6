// The Transformer layers and GPT: PyTorch golden values of whole encoder and decoder layers
// (outputs, input and parameter gradients), gradient checks through every parameter, causality.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>

#include <unistd.h>

#include "helpers.h"

using namespace mg;
using mgtest::check_module;
using mgtest::expect_close;
using mgtest::rnd;
using testing::HasSubstr;

TEST(Transformer, GoldenEncoderLayers) {
  nn::TransformerEncoderLayer post(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  check_module(post, "encoder_post_ln_relu", [&](const std::vector<Variable>& v) {
    return std::pair{post(v[0]), Variable()};
  });
  nn::TransformerEncoderLayer pre(
      8, 2, {.dim_feedforward = 16, .dropout = 0.0, .activation = nn::TransformerActivation::GELU, .norm_first = true});
  check_module(pre, "encoder_pre_ln_gelu", [&](const std::vector<Variable>& v) {
    return std::pair{pre(v[0], {triu(ones({4, 4}, DType::Bool), 1)}), Variable()};
  });
}

TEST(Transformer, GoldenDecoderLayers) {
  const nn::AttentionForwardOptions causal{triu(ones({3, 3}, DType::Bool), 1)};
  nn::TransformerDecoderLayer post(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  check_module(post, "decoder_post_ln", [&](const std::vector<Variable>& v) {
    return std::pair{post(v[0], v[1], causal), Variable()};
  });
  nn::TransformerDecoderLayer pre(
      8, 2, {.dim_feedforward = 16, .dropout = 0.0, .activation = nn::TransformerActivation::GELU, .norm_first = true});
  check_module(pre, "decoder_pre_ln_gelu", [&](const std::vector<Variable>& v) {
    return std::pair{pre(v[0], v[1], causal), Variable()};
  });
}

// The stacks against PyTorch's nn.TransformerEncoder (2 pre-LN layers, a final LayerNorm, a causal
// mask) and nn.TransformerDecoder (3 post-LN layers): outputs, input and parameter gradients, under
// PyTorch's state_dict names (layers.0.self_attn..., norm.weight).
TEST(Transformer, GoldenStacks) {
  nn::TransformerEncoder enc(
      8, 2, 2,
      {.dim_feedforward = 16, .dropout = 0.0, .activation = nn::TransformerActivation::GELU, .norm_first = true}, true);
  check_module(enc, "encoder_stack_pre_ln_norm", [&](const std::vector<Variable>& v) {
    return std::pair{enc(v[0], {triu(ones({4, 4}, DType::Bool), 1)}), Variable()};
  });
  nn::TransformerDecoder dec(8, 2, 3, {.dim_feedforward = 16, .dropout = 0.0});
  check_module(dec, "decoder_stack_post_ln", [&](const std::vector<Variable>& v) {
    return std::pair{dec(v[0], v[1], {triu(ones({3, 3}, DType::Bool), 1)}), Variable()};
  });
}

// What the stacks are made of: the encoder is its layers composed (then the norm); every decoder
// layer's cross-attention takes its keys and values from the memory passed in, the same tensor
// for all layers (recorded by forward hooks), not the output of the encoder layer at its depth.
TEST(Transformer, StacksComposeTheirLayersAndEveryDecoderLayerReadsTheMemory) {
  const nn::TransformerLayerOptions o{.dim_feedforward = 16, .dropout = 0.0, .norm_first = true};
  nn::TransformerEncoder enc(8, 2, 2, o, true);
  nn::TransformerDecoder dec(8, 2, 3, o);
  enc.to(DType::Float64), dec.to(DType::Float64);
  EXPECT_EQ(enc.layers.size(), 2u);
  EXPECT_NE(enc.norm, nullptr);
  EXPECT_EQ(dec.norm, nullptr);
  const Variable src(rnd({2, 5, 8}, 1)), tgt(rnd({2, 4, 8}, 2));
  const Variable memory = enc(src);
  expect_close(memory.data(), (*enc.norm)(enc.layer(1)(enc.layer(0)(src))).data(), 0, 0);
  std::vector<Tensor> keys, values;
  std::vector<nn::HookHandle> hooks;
  for (size_t i = 0; i < dec.layers.size(); ++i)
    hooks.push_back(dec.layer(i).multihead_attn.register_forward_hook(
        [&](const nn::Module&, const std::vector<Variable>& in, std::vector<Variable>&) {
          keys.push_back(in[1].data()), values.push_back(in[2].data());
        }));
  const Variable out = dec(tgt, memory, {.is_causal = true});
  ASSERT_EQ(keys.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    expect_close(keys[i], memory.data(), 0, 0);
    expect_close(values[i], memory.data(), 0, 0);
  }
  Variable x = tgt;
  for (size_t i = 0; i < 3; ++i) x = dec.layer(i)(x, memory, {.is_causal = true});
  expect_close(out.data(), x.data(), 0, 0);
  for (auto& h : hooks) h.remove();
  // zero layers: the identity (then the norm, if any)
  nn::TransformerEncoder none(8, 2, 0, o);
  none.to(DType::Float64);
  expect_close(none(src).data(), src.data(), 0, 0);
  // the names a state_dict uses, and a gradient reaching every parameter of both stacks
  const nn::StateDict sd = nn::state_dict(dec);
  EXPECT_EQ(sd.front().first, "layers.0.self_attn.w_q.weight");
  EXPECT_EQ(sd.back().first, "layers.2.norm3.bias");
  sum(dec(tgt, enc(src))).backward();
  for (auto& [name, p] : enc.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  for (auto& [name, p] : dec.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

TEST(Transformer, StacksRejectBadSettings) {
  EXPECT_THAT([] { nn::TransformerEncoder(8, 2, -1); },
              testing::ThrowsMessage<ValueError>(HasSubstr("TransformerEncoder: num_layers must be >= 0, got -1")));
  EXPECT_THAT([] { nn::TransformerDecoder(8, 2, -2); },
              testing::ThrowsMessage<ValueError>(HasSubstr("TransformerDecoder: num_layers must be >= 0, got -2")));
  nn::TransformerDecoder dec(8, 2, 1, {.dim_feedforward = 16});
  EXPECT_THROW(dec.layer(1), IndexError);
  EXPECT_THROW(nn::TransformerEncoder(8, 3, 2), ValueError);  // 8 is not divisible into 3 heads
}

// Saved and loaded in PyTorch's own layout (SaveOptions / LoadOptions::torch_layout): PyTorch's
// state_dict of nn.MultiheadAttention and the Transformer layers (in_proj_weight, out_proj) loads
// and gives PyTorch's output, and minigrad writes exactly those entries back, in PyTorch's order.
TEST(Transformer, SavedAndLoadedInPyTorchsLayout) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("minigrad_test_torch_layout_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  auto check = [&](nn::Module& m, nn::Module& fresh, const std::string& name,
                   const std::function<Variable(nn::Module&, const mgtest::GoldenCase&)>& forward) {
    SCOPED_TRACE(name);
    const mgtest::GoldenCase& c = mgtest::golden(name);
    nn::StateDict torch_sd;  // "sd:07:linear2.bias": PyTorch's entries, in its order
    for (auto& [k, t] : c)
      if (k.rfind("sd:", 0) == 0) torch_sd.emplace_back(k.substr(6), t);
    m.to(DType::Float64), fresh.to(DType::Float64);
    nn::load_state_dict(m, torch_sd, {.torch_layout = true});
    const Tensor out = forward(m, c).data();
    expect_close(out, c.at("out"), 1e-12, 1e-12);
    const nn::StateDict mine = nn::state_dict(m, {.torch_layout = true});
    ASSERT_EQ(mine.size(), torch_sd.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      EXPECT_EQ(mine[i].first, torch_sd[i].first);
      expect_close(mine[i].second, torch_sd[i].second, 0, 0);
    }
    // through a file: written in PyTorch's layout, read back into another module (strict names)
    nn::save(m, path, {.torch_layout = true});
    nn::load(fresh, path, {.torch_layout = true});
    expect_close(forward(fresh, c).data(), out, 0, 0);  // the same numbers, bit for bit
    // the same file read as minigrad's own layout: every name is reported, nothing changes
    EXPECT_THROW(nn::load(fresh, path), FileError);
    expect_close(forward(fresh, c).data(), out, 0, 0);
  };
  auto mha_call = [](nn::Module& m, const mgtest::GoldenCase& c) {
    auto& a = dynamic_cast<nn::MultiheadAttention&>(m);
    const Variable q(c.at("in0")), kv(c.count("in1") ? c.at("in1") : c.at("in0"));
    return a(q, kv, kv).output;
  };
  nn::MultiheadAttention mha(8, 2), mha2(8, 2);
  check(mha, mha2, "torch_layout_mha", mha_call);
  nn::MultiheadAttention plain(8, 4, {.bias = false}), plain2(8, 4, {.bias = false});
  check(plain, plain2, "torch_layout_mha_no_bias", mha_call);
  nn::TransformerEncoderLayer enc(8, 2, {.dim_feedforward = 16, .dropout = 0.0}),
      enc2(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  check(enc, enc2, "torch_layout_encoder_layer", [](nn::Module& m, const mgtest::GoldenCase& c) {
    return dynamic_cast<nn::TransformerEncoderLayer&>(m)(Variable(c.at("in0")));
  });
  nn::TransformerDecoderLayer dec(8, 2, {.dim_feedforward = 16, .dropout = 0.0}),
      dec2(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  check(dec, dec2, "torch_layout_decoder_layer", [](nn::Module& m, const mgtest::GoldenCase& c) {
    return dynamic_cast<nn::TransformerDecoderLayer&>(m)(Variable(c.at("in0")), Variable(c.at("in1")));
  });
  // grouped key/value heads have no PyTorch layout
  nn::MultiheadAttention gqa(8, 4, {.num_kv_heads = 2});
  EXPECT_THROW(nn::state_dict(gqa, {.torch_layout = true}), ValueError);
  std::filesystem::remove(path);
}

namespace {
// A user's own model with attention at two depths: a member, and a layer inside a ModuleList.
struct TwoAttentions : nn::Callable<TwoAttentions> {
  nn::Linear proj{8, 8};
  nn::MultiheadAttention attn{8, 2};
  nn::ModuleList layers;
  TwoAttentions() {
    register_module("proj", proj);
    register_module("attn", attn);
    layers.emplace_back<nn::TransformerEncoderLayer>(
        8, 2, nn::TransformerLayerOptions{.dim_feedforward = 16, .dropout = 0.0});
    register_module("layers", layers);
  }
  Variable forward(const Variable& x) const {
    const Variable h = attn(proj(x), proj(x), proj(x)).output;
    return layers.at<nn::TransformerEncoderLayer>(0)(h);
  }
  std::string type_name() const override { return "TwoAttentions"; }
};
}  // namespace

// PyTorch's layout inside a model of one's own: every attention module, at any depth, is written
// as in_proj_weight = [W_Q; W_K; W_V] (rows stacked), in_proj_bias, out_proj.*, under its own
// path; everything else keeps its name; and the file loads back into the same numbers.
TEST(Transformer, TorchLayoutReachesAttentionInsideAUsersModel) {
  TwoAttentions m, fresh;
  const nn::StateDict sd = nn::state_dict(m, {.torch_layout = true});
  std::map<std::string, Tensor> by_name(sd.begin(), sd.end());
  for (const std::string prefix : {"attn.", "layers.0.self_attn."}) {
    SCOPED_TRACE(prefix);
    const auto& a = prefix == "attn." ? m.attn : m.layers.at<nn::TransformerEncoderLayer>(0).self_attn;
    ASSERT_TRUE(by_name.count(prefix + "in_proj_weight"));
    expect_close(by_name.at(prefix + "in_proj_weight"),
                 concat({a.w_q.weight.data(), a.w_k.weight.data(), a.w_v.weight.data()}, 0), 0, 0);
    expect_close(by_name.at(prefix + "in_proj_bias"),
                 concat({a.w_q.bias.data(), a.w_k.bias.data(), a.w_v.bias.data()}, 0), 0, 0);
    expect_close(by_name.at(prefix + "out_proj.weight"), a.w_o.weight.data(), 0, 0);
    EXPECT_EQ(by_name.count(prefix + "w_q.weight"), 0u);
  }
  EXPECT_EQ(by_name.count("proj.weight"), 1u);
  EXPECT_EQ(by_name.count("layers.0.linear1.weight"), 1u);
  // 26 parameters: proj 2, attn 8, the layer 16 (its attention 8); each attention's 8 become 4
  EXPECT_EQ(m.named_parameters().size(), 26u);
  EXPECT_EQ(sd.size(), 18u);
  nn::load_state_dict(fresh, sd, {.torch_layout = true});
  const Variable x(rnd({2, 5, 8}, 21).to(DType::Float32));
  expect_close(fresh(x).data(), m(x).data(), 0, 0);
}

TEST(Transformer, GradcheckOfWholeLayers) {
  nn::TransformerDecoderLayer dec(4, 2, {.dim_feedforward = 8, .dropout = 0.0});
  dec.to(DType::Float64);
  Variable tgt(rnd({1, 3, 4}, 3), true), mem(rnd({1, 2, 4}, 4), true);
  std::vector<Variable> leaves = dec.parameters();
  leaves.push_back(tgt);
  leaves.push_back(mem);
  GradcheckResult r = gradcheck([&] { return dec(tgt, mem, {.is_causal = true}); }, leaves);
  EXPECT_TRUE(r.ok) << r.message;
  models::GPTBlock block(4, 2);
  block.to(DType::Float64);
  Variable x(rnd({2, 3, 4}, 5), true);
  leaves = block.parameters();
  leaves.push_back(x);
  r = gradcheck([&] { return block(x); }, leaves);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Transformer, GPTModel) {
  Generator g(1);
  models::GPT gpt(11, 6, {.d_model = 8, .nhead = 2, .num_layers = 2}, g);
  EXPECT_EQ(gpt.named_parameters()[2].first, "blocks.0.ln_1.weight");
  Tensor ids = randint(0, 11, {3, 6}, g);
  EXPECT_EQ(gpt(ids).shape(), (Shape{3, 6, 11}));
  // causal end to end: changing the last token leaves the first five positions' logits alone
  Tensor ids2 = ids.clone();
  ids2.narrow(1, 5, 1).fill_(0);
  ids.narrow(1, 5, 1).fill_(1);
  expect_close(gpt(ids2).data().narrow(1, 0, 5), gpt(ids).data().narrow(1, 0, 5), 0, 0);
  try {
    gpt(zeros({1, 7}, DType::Int64));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("GPT: ids must be (batch, seq) with 1 <= seq <= context 6, got shape (1, 7)"));
  }
}

TEST(Transformer, GPTBlockIsCausal) {
  // Changing a later token must not change an earlier position's output.
  models::GPTBlock block(8, 2);
  Tensor x = rnd({1, 4, 8}, 6).to(DType::Float32);
  Tensor y = block(Variable(x)).data();
  Tensor x2 = x.clone();
  x2.narrow(1, 3, 1).fill_(5);
  Tensor y2 = block(Variable(x2)).data();
  expect_close(y2.narrow(1, 0, 3), y.narrow(1, 0, 3), 0, 0);
  EXPECT_GT(max(abs(y2.narrow(1, 3, 1) - y.narrow(1, 3, 1))).item(), 1e-3);
}

// The block runs its MLP's first Linear and GELU as one op (linear_gelu); a forward hook on fc still
// sees fc's own output, and the block computes the same bits with and without one, gradients too.
TEST(Transformer, GPTBlockMlpWithAHookOnFc) {
  Generator g(3);
  models::GPTBlock block(8, 2, {}, g);
  const Tensor x = rnd({2, 4, 8}, 7).to(DType::Float32);
  auto run = [&] {
    block.zero_grad();
    const Variable y = block(Variable(x));
    sum(y * y).backward();
    return std::pair{y.data(), block.fc.weight.grad().clone()};
  };
  const auto [y0, gw0] = run();
  Tensor seen;
  nn::HookHandle hook = block.fc.register_forward_hook(
      [&](const nn::Module&, const std::vector<Variable>&, std::vector<Variable>& out) { seen = out[0].data(); });
  const auto [y1, gw1] = run();
  hook.remove();
  expect_close(y1, y0, 0, 0);
  expect_close(gw1, gw0, 0, 0);
  ASSERT_TRUE(seen.defined());
  EXPECT_EQ(seen.shape(), (Shape{2, 4, 32}));  // fc's output, before the GELU
  EXPECT_LT(min(seen).item(), -0.2);           // below GELU's minimum (-0.17): not the GELU's output
}

// ---------------------------------------------------------------- incremental decoding

namespace {
// A GPT big enough that the fused kernel's 64-row query blocks and BLAS's edge cases both matter.
std::unique_ptr<models::GPT> decoding_model(DType dt) {
  Generator g(7);
  auto gpt = std::make_unique<models::GPT>(23, 80, models::GPTOptions{.d_model = 32, .nhead = 4, .num_layers = 2}, g);
  gpt->to(dt);
  gpt->eval();
  return gpt;
}

// Logits of the last position of the window ids[:, start:end], computed without a cache: (B, vocab).
Tensor window_logits(const models::GPT& gpt, const Tensor& ids, int64_t start, int64_t end) {
  const Tensor l = gpt(ids.narrow(1, start, end - start).contiguous()).data();
  return l.narrow(1, l.size(1) - 1, 1).reshape({ids.size(0), gpt.vocab_size});
}
}  // namespace

TEST(Generate, CachedLogitsEqualTheWholeWindow) {
  for (DType dt : {DType::Float64, DType::Float32}) {
    SCOPED_TRACE(dtype_name(dt));
    const auto model = decoding_model(dt);
    const models::GPT& gpt = *model;
    Generator g(3);
    const Tensor ids = randint(0, 23, {2, 80}, g);
    NoGradGuard no_grad;
    models::GPTCache cache;
    // A prompt of 5 tokens, then one token per step up to the full context (past the 64-row block).
    Tensor l = gpt(ids.narrow(1, 0, 5).contiguous(), &cache).data();
    EXPECT_EQ(cache.size(), 5);
    expect_close(l, gpt(ids.narrow(1, 0, 5).contiguous()).data(), 0, 0);
    for (int64_t t = 5; t < 80; ++t) {
      SCOPED_TRACE(t);
      l = gpt(ids.narrow(1, t, 1).contiguous(), &cache).data().reshape({2, 23});
      // Not bit for bit: OpenBLAS sums a row of a product in an order that depends on how many
      // rows the product has (1 new token here, t + 1 in the window), so the last bits differ.
      if (dt == DType::Float64)
        expect_close(l, window_logits(gpt, ids, 0, t + 1), 1e-13, 1e-13);
      else
        expect_close(l, window_logits(gpt, ids, 0, t + 1), 1e-6, 1e-6);
    }
    EXPECT_EQ(cache.size(), 80);
  }
}

TEST(Generate, CachedBlockOfTokensAfterEarlierOnes) {
  // Several new tokens after cached ones take the composed path with the shifted causal mask.
  const auto model = decoding_model(DType::Float64);
  const models::GPT& gpt = *model;
  Generator g(4);
  const Tensor ids = randint(0, 23, {3, 40}, g);
  NoGradGuard no_grad;
  models::GPTCache cache;
  gpt(ids.narrow(1, 0, 10).contiguous(), &cache);
  const Tensor l = gpt(ids.narrow(1, 10, 30).contiguous(), &cache).data();  // positions 10..39
  expect_close(l, gpt(ids).data().narrow(1, 10, 30), 1e-12, 1e-12);
  // A full cache refuses more tokens, saying why.
  gpt(ids.narrow(1, 0, 40).contiguous(), &cache);
  try {
    gpt(ids.narrow(1, 0, 1).contiguous(), &cache);
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("GPT: the cache holds 80 tokens, and 1 more would pass the context of 80 positions"));
  }
}

TEST(Generate, CachedAttentionWeightsEqualUncached) {
  // need_weights with a cache: the weights of the new query are the last row of the full ones.
  Generator g(5);
  nn::MultiheadAttention mha(8, 2, {}, g);
  mha.to(DType::Float64);
  const Variable x(rnd({2, 6, 8}, 9));
  NoGradGuard no_grad;
  const nn::AttentionOutput full = mha(x, {.is_causal = true, .need_weights = true});
  nn::KVCache cache;
  mha(Variable(x.data().narrow(1, 0, 5).contiguous()), {.is_causal = true, .cache = &cache});
  const nn::AttentionOutput step =
      mha(Variable(x.data().narrow(1, 5, 1).contiguous()), {.is_causal = true, .need_weights = true, .cache = &cache});
  expect_close(step.weights.data(), full.weights.data().narrow(2, 5, 1), 1e-15, 1e-15);
  expect_close(step.output.data(), full.output.data().narrow(1, 5, 1), 1e-14, 1e-14);
}

TEST(Generate, CacheMisuseIsATypedError) {
  nn::MultiheadAttention mha(8, 2);
  const Variable x(rnd({1, 3, 8}, 1).to(DType::Float32)), y(rnd({1, 3, 8}, 2).to(DType::Float32));
  nn::KVCache cache;
  EXPECT_THROW(
      try { mha(x, {.cache = &cache}); } catch (const StateError& e) {
        EXPECT_THAT(e.what(), HasSubstr("a KV cache is for inference"));
        throw;
      },
      StateError);
  NoGradGuard no_grad;
  EXPECT_THROW(
      try { mha(x, y, y, {.cache = &cache}); } catch (const ValueError& e) {
        EXPECT_THAT(e.what(), HasSubstr("a KV cache serves self-attention only"));
        throw;
      },
      ValueError);
  EXPECT_THROW(mha(x, {.attn_mask = ones({3, 3}, DType::Bool), .cache = &cache}), ValueError);
  mha(x, {.cache = &cache});
  EXPECT_EQ(cache.size(), 3);
  EXPECT_THROW(
      try {
        mha(Variable(rnd({2, 1, 8}, 3).to(DType::Float32)), {.cache = &cache});
      } catch (const ShapeError& e) {
        EXPECT_THAT(e.what(),
                    HasSubstr("KVCache: holds 3 tokens of (batch, heads, head_dim, dtype) = (1, 2, 4, float32)"));
        throw;
      },
      ShapeError);
  cache.clear();
  mha(Variable(rnd({2, 1, 8}, 3).to(DType::Float32)), {.cache = &cache});  // a new batch size after clear()
  EXPECT_EQ(cache.size(), 1);
}

TEST(Generate, SameTokensWithAndWithoutTheCache) {
  for (DType dt : {DType::Float64, DType::Float32}) {
    SCOPED_TRACE(dtype_name(dt));
    const auto model = decoding_model(dt);
    const models::GPT& gpt = *model;
    Generator g(6);
    const Tensor prompt = randint(0, 23, {2, 3}, g);
    // 100 new tokens: past the context of 80, so the window slides for the last 23 steps.
    for (double temperature : {0.0, 1.0}) {
      Generator g1(11), g2(11);
      const Tensor a = gpt.generate(prompt, 100, temperature, 5, g1, true);
      const Tensor b = gpt.generate(prompt, 100, temperature, 5, g2, false);
      ASSERT_EQ(a.shape(), (Shape{2, 103}));
      EXPECT_EQ(a.to_vector<int64_t>(), b.to_vector<int64_t>());
      EXPECT_EQ(a.narrow(1, 0, 3).contiguous().to_vector<int64_t>(), prompt.to_vector<int64_t>());
    }
  }
}

TEST(Generate, TopKAndTemperatureSelectAsDocumented) {
  const auto model = decoding_model(DType::Float64);
  const models::GPT& gpt = *model;
  const Tensor prompt = zeros({1, 1}, DType::Int64);
  // top_k = 1 is the most likely token, like temperature 0, whatever the draws.
  Generator g1(1), g2(2);
  const Tensor greedy = gpt.generate(prompt, 20, 0.0, std::nullopt, g1);
  EXPECT_EQ(gpt.generate(prompt, 20, 1.0, 1, g2).to_vector<int64_t>(), greedy.to_vector<int64_t>());
  // The greedy token is the argmax of the window's logits, step by step.
  NoGradGuard no_grad;
  for (int64_t t = 1; t < 21; ++t)
    EXPECT_EQ(argmax(window_logits(gpt, greedy, 0, t), -1).to_vector<int64_t>()[0], greedy.to_vector<int64_t>()[t]);
  // With top_k = 3 every drawn token is among the 3 largest logits of its step.
  Generator g3(3);
  const Tensor s = gpt.generate(prompt, 40, 2.0, 3, g3);
  for (int64_t t = 1; t < 41; ++t) {
    const Tensor top = topk(window_logits(gpt, s, 0, t), 3).second;
    const std::vector<int64_t> allowed = top.to_vector<int64_t>();
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), s.to_vector<int64_t>()[t]), allowed.end()) << t;
  }
  EXPECT_EQ(gpt.generate(prompt, 0).shape(), (Shape{1, 1}));
  EXPECT_THROW(gpt.generate(prompt, 5, -1.0), ValueError);
  EXPECT_THROW(gpt.generate(prompt, 5, 1.0, 0), ValueError);
  EXPECT_THROW(gpt.generate(zeros({1, 2}), 5), DTypeError);
  EXPECT_THROW(gpt.generate(prompt, -1), ValueError);
}
