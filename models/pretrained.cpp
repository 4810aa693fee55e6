#include "minigrad/models/pretrained.h"

#include <array>
#include <filesystem>
#include <fmt/ranges.h>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "minigrad/tensor/atomic_file.h"

namespace mg::models {
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------- shared checks

// One tensor the model needs, read from the file: its name there, and the shape the model wants.
Tensor take(const SafeTensors& file, const std::string& path, const std::string& hf_name, const Shape& want,
            const std::string& ours) {
  const Tensor t = file.find(hf_name);
  MG_CHECK(t.defined(), FileError, "{}: tensor '{}' is missing (the model's '{}' needs it)", path, hf_name, ours);
  MG_CHECK(t.shape() == want, FileError, "{}: tensor '{}' has shape {}, but the model's '{}' needs {}", path, hf_name,
           shape_str(t.shape()), ours, shape_str(want));
  MG_CHECK(is_floating_point(t.dtype()), FileError, "{}: tensor '{}' is {}, expected a floating dtype", path, hf_name,
           dtype_name(t.dtype()));
  return t;
}

// Every name of the file that no rule used, listed in one error.
void check_unused(const SafeTensors& file, const std::string& path, const std::set<std::string>& used,
                  const std::function<bool(const std::string&)>& skipped) {
  std::vector<std::string> extra;
  for (const auto& [name, t] : file.tensors)
    if (!used.count(name) && !skipped(name)) extra.push_back(name);
  MG_CHECK(extra.empty(), FileError, "{}: {} tensor(s) the model does not have: {}", path, extra.size(),
           fmt::join(extra, ", "));
}

nlohmann::json read_json(const std::string& path, const char* who) {
  std::ifstream in(path);
  MG_CHECK(in.good(), FileError, "{}: cannot open {}", who, path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("{}: {} is not valid JSON ({})", who, path, e.what()));
  }
  MG_CHECK(j.is_object(), FileError, "{}: {} should hold a JSON object", who, path);
  return j;
}

// ---------------------------------------------------------------- BERT names

// Inside encoder.layer.i: Hugging Face's module path and ours.
constexpr std::array<std::pair<const char*, const char*>, 8> kBertLayerNames{{
    {"attention.self.query", "self_attn.w_q"},
    {"attention.self.key", "self_attn.w_k"},
    {"attention.self.value", "self_attn.w_v"},
    {"attention.output.dense", "self_attn.w_o"},
    {"attention.output.LayerNorm", "norm1"},
    {"intermediate.dense", "linear1"},
    {"output.dense", "linear2"},
    {"output.LayerNorm", "norm2"},
}};
constexpr const char* kLayerPrefix = "encoder.layer.";

// "encoder.layer.12.rest" -> {"encoder.layer.12.", "rest"}; {"", ""} for any other name.
std::pair<std::string, std::string> split_layer(const std::string& name) {
  if (name.rfind(kLayerPrefix, 0) != 0) return {"", ""};
  const size_t digits = std::string(kLayerPrefix).size(), dot = name.find('.', digits);
  if (dot == std::string::npos || dot == digits) return {"", ""};
  for (size_t i = digits; i < dot; ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return {"", ""};
  return {name.substr(0, dot + 1), name.substr(dot + 1)};
}

// Rename the module path of `rest` ("attention.self.query.weight") by the table, from column
// `from` to column `to`; empty when no row matches.
std::string rename_in_layer(const std::string& rest, bool from_hf) {
  for (const auto& [hf, ours] : kBertLayerNames) {
    const std::string a = from_hf ? hf : ours, b = from_hf ? ours : hf;
    if (rest.rfind(a + ".", 0) == 0 && rest.find('.', a.size() + 1) == std::string::npos)
      return b + rest.substr(a.size());
  }
  return "";
}

// "bert." (the prefix of BertFor* models) removed.
std::string without_bert_prefix(const std::string& name) { return name.rfind("bert.", 0) == 0 ? name.substr(5) : name; }

// Tensors of the file that are not BertModel's: the position_ids buffer (it is just 0, 1, 2, ...)
// and the task heads of BertFor* models ("cls.*", "classifier.*", "qa_outputs.*", ...).
bool bert_skipped(const std::string& hf_name) {
  const std::string n = without_bert_prefix(hf_name);
  if (n == "embeddings.position_ids") return true;
  return n.rfind("embeddings.", 0) != 0 && n.rfind("encoder.", 0) != 0 && n.rfind("pooler.", 0) != 0;
}

// Checkpoints from the original TensorFlow release (bert-base-uncased on the hub) call a
// LayerNorm's weight and bias "gamma" and "beta"; transformers renames them as it loads.
std::string modern_layer_norm_name(const std::string& n) {
  const auto ends = [&](const std::string& tail) {
    return n.size() >= tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (ends("LayerNorm.gamma")) return n.substr(0, n.size() - 5) + "weight";
  if (ends("LayerNorm.beta")) return n.substr(0, n.size() - 4) + "bias";
  return n;
}

}  // namespace

std::string bert_name_from_hf(const std::string& hf_name) {
  const std::string n = modern_layer_norm_name(without_bert_prefix(hf_name));
  const auto [layer, rest] = split_layer(n);
  if (!layer.empty()) {
    const std::string r = rename_in_layer(rest, true);
    return r.empty() ? "" : layer + r;
  }
  if (n.rfind("embeddings.", 0) == 0 || n.rfind("pooler.", 0) == 0) return n;
  return "";
}

std::string bert_name_to_hf(const std::string& name) {
  const auto [layer, rest] = split_layer(name);
  if (layer.empty()) return name;
  const std::string r = rename_in_layer(rest, false);
  return r.empty() ? "" : layer + r;
}

namespace {
void load_hf_bert_from(BertModel& model, const SafeTensors& file, const std::string& path) {
  // The file's names may carry "bert." and old LayerNorm names: find each model tensor under its
  // spelling in this file.
  std::map<std::string, std::string> hf_of;  // our name -> the file's name
  bool prefixed = false;
  for (const auto& [name, t] : file.tensors) {
    const std::string ours = bert_name_from_hf(name);
    if (!ours.empty()) hf_of[ours] = name;
    prefixed |= name.rfind("bert.", 0) == 0;
  }
  nn::StateDict state;
  std::set<std::string> used;
  for (const auto& [ours, slot] : state_dict(model)) {
    const auto it = hf_of.find(ours);
    const std::string hf = it != hf_of.end() ? it->second : (prefixed ? "bert." : "") + bert_name_to_hf(ours);
    state.emplace_back(ours, take(file, path, hf, slot.shape(), ours));
    used.insert(hf);
  }
  check_unused(file, path, used, bert_skipped);
  load_state_dict(model, state);  // converts dtypes; changes nothing unless all of it fits
}
}  // namespace

void load_hf_bert(BertModel& model, const std::string& path) { load_hf_bert_from(model, load_safetensors(path), path); }

namespace {
// A Hugging Face model folder, or a FileError that says what was given and what to pass instead:
// the folder of a file, or the folder below that holds config.json (a download's destination).
void check_model_folder(const char* op, const std::string& folder) {
  std::error_code ec;
  MG_CHECK(fs::exists(folder, ec), FileError,
           "{}: '{}' does not exist (expected a model folder with config.json "
           "and model.safetensors)",
           op, folder);
  MG_CHECK(fs::is_directory(folder, ec), FileError,
           "{}: '{}' is a file; pass the model folder that holds it, config.json and model.safetensors ('{}')", op,
           folder, fs::path(folder).parent_path().string());
  if (fs::exists(fs::path(folder) / "config.json", ec)) return;
  std::string below;  // a config.json up to three folders down
  for (auto it = fs::recursive_directory_iterator(folder, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 2) it.disable_recursion_pending();
    if (it->path().filename() == "config.json" && fs::exists(it->path().parent_path() / "model.safetensors", ec)) {
      below = it->path().parent_path().string();
      break;
    }
  }
  throw FileError(fmt::format("{}: '{}' has no config.json, so it is not a Hugging Face model folder{}", op, folder,
                              below.empty() ? "" : fmt::format("; '{}' is one: pass that", below)));
}
}  // namespace

std::unique_ptr<BertModel> bert_from_pretrained(const std::string& folder) {
  check_model_folder("bert_from_pretrained", folder);
  BertConfig config = BertConfig::from_json_file((fs::path(folder) / "config.json").string());
  const std::string weights = (fs::path(folder) / "model.safetensors").string();
  MG_CHECK(fs::exists(weights), FileError,
           "bert_from_pretrained: {} has no model.safetensors (a pytorch_model.bin alone is not read: convert it "
           "with safetensors.torch.save_file)",
           folder);
  // The pooler is there when the file has it (sentence-transformers' exports may leave it out).
  const SafeTensors file = load_safetensors(weights);
  bool has_pooler = false;
  for (const auto& [name, t] : file.tensors) has_pooler |= bert_name_from_hf(name) == "pooler.dense.weight";
  config.add_pooling_layer = has_pooler;
  auto model = std::make_unique<BertModel>(config);
  load_hf_bert_from(*model, file, weights);
  model->eval();
  return model;
}

void save_hf_bert(const BertModel& model, const std::string& folder) {
  make_directories(folder, "save_hf");
  nn::StateDict state;
  for (const auto& [name, t] : state_dict(model)) state.emplace_back(bert_name_to_hf(name), t);
  save_safetensors((fs::path(folder) / "model.safetensors").string(), state, {{"format", "pt"}});
  const BertConfig& c = model.config;
  const nlohmann::ordered_json j = {{"architectures", {"BertModel"}},
                                    {"model_type", "bert"},
                                    {"vocab_size", c.vocab_size},
                                    {"hidden_size", c.hidden_size},
                                    {"num_hidden_layers", c.num_hidden_layers},
                                    {"num_attention_heads", c.num_attention_heads},
                                    {"intermediate_size", c.intermediate_size},
                                    {"hidden_act", c.hidden_act},
                                    {"max_position_embeddings", c.max_position_embeddings},
                                    {"type_vocab_size", c.type_vocab_size},
                                    {"layer_norm_eps", c.layer_norm_eps},
                                    {"hidden_dropout_prob", c.hidden_dropout_prob},
                                    {"attention_probs_dropout_prob", c.attention_probs_dropout_prob},
                                    {"position_embedding_type", "absolute"},
                                    {"pad_token_id", 0}};
  write_text_file((fs::path(folder) / "config.json").string(), j.dump(2) + "\n", "save_hf");
}

// ---------------------------------------------------------------- GPT-2

namespace {
// An optional field of a config.json: its value, or `fallback` when absent (or null); a ValueError
// naming the file and the field when it has another type.
template <class T>
T optional_field(const nlohmann::json& j, const std::string& path, const char* name, T fallback) {
  if (!j.contains(name) || j.at(name).is_null()) return fallback;
  const nlohmann::json& v = j.at(name);
  bool ok = false;
  if constexpr (std::is_same_v<T, std::string>)
    ok = v.is_string();
  else if constexpr (std::is_same_v<T, bool>)
    ok = v.is_boolean();
  else
    ok = v.is_number();
  MG_CHECK(ok, ValueError, "gpt2 config: {}: field \"{}\" should be {}, got {}", path, name,
           std::is_same_v<T, std::string> ? "a string"
           : std::is_same_v<T, bool>      ? "true or false"
                                          : "a number",
           v.dump());
  return v.get<T>();
}
}  // namespace

GPTOptions gpt2_options_from_json(const std::string& path, int64_t& vocab_size, int64_t& context) {
  const nlohmann::json j = read_json(path, "gpt2 config");
  auto integer = [&](const char* name) {
    MG_CHECK(j.contains(name) && j.at(name).is_number_integer() && j.at(name).get<int64_t>() > 0, ValueError,
             "gpt2 config: {}: field \"{}\" should be a positive whole number{}", path, name,
             j.contains(name) ? ", got " + j.at(name).dump() : " and is missing");
    return j.at(name).get<int64_t>();
  };
  const std::string type = optional_field<std::string>(j, path, "model_type", "gpt2");
  MG_CHECK(type == "gpt2", ValueError, "gpt2 config: {} is a \"{}\" model's config, expected model_type \"gpt2\"", path,
           type);
  GPTOptions o;
  vocab_size = integer("vocab_size");
  context = integer("n_positions");
  o.d_model = integer("n_embd");
  o.nhead = integer("n_head");
  o.num_layers = integer("n_layer");
  MG_CHECK(o.d_model % o.nhead == 0, ValueError, "gpt2 config: {}: n_embd {} must divide by n_head {}", path, o.d_model,
           o.nhead);
  if (j.contains("n_inner") && !j.at("n_inner").is_null())
    MG_CHECK(j.at("n_inner") == 4 * o.d_model, ValueError,
             "gpt2 config: {}: n_inner {} is not supported (GPTBlock's MLP is 4 * n_embd = {})", path,
             j.at("n_inner").dump(), 4 * o.d_model);
  const std::string act = optional_field<std::string>(j, path, "activation_function", "gelu_new");
  MG_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu", ValueError,
           "gpt2 config: {}: activation_function \"{}\" is not supported (gelu_new, gelu_pytorch_tanh or gelu)", path,
           act);
  o.gelu_approximate = act == "gelu" ? GeluApproximate::None : GeluApproximate::Tanh;
  MG_CHECK(!optional_field<bool>(j, path, "scale_attn_by_inverse_layer_idx", false) &&
               optional_field<bool>(j, path, "scale_attn_weights", true),
           ValueError,
           "gpt2 config: {}: only scale_attn_weights = true and scale_attn_by_inverse_layer_idx = false are supported "
           "(scores divided by sqrt(head size))",
           path);
  o.layer_norm_eps = optional_field<double>(j, path, "layer_norm_epsilon", 1e-5);
  MG_CHECK(o.layer_norm_eps > 0, ValueError, "gpt2 config: {}: layer_norm_epsilon must be positive, got {}", path,
           o.layer_norm_eps);
  o.tie_weights = optional_field<bool>(j, path, "tie_word_embeddings", true);
  o.head_bias = false;
  return o;
}

namespace {
// GPT-2's weights into `model`, whatever its activation (gpt2_from_pretrained built it from config.json).
void load_gpt2_weights(GPT& model, const std::string& path) {
  const SafeTensors file = load_safetensors(path);
  MG_CHECK(!model.head.bias.defined(), ValueError,
           "load_hf_gpt2: the model must have head_bias = false (GPT-2's lm_head has none); use gpt2_from_pretrained");
  // GPT2LMHeadModel's names start with "transformer."; GPT2Model's do not.
  const std::string pre = file.find("transformer.wte.weight").defined() ? "transformer." : "";
  const int64_t d = model.options.d_model, V = model.vocab_size;
  std::set<std::string> used;
  nn::StateDict state;
  auto plain = [&](const std::string& hf, const std::string& ours, const Shape& shape) {
    state.emplace_back(ours, take(file, path, pre + hf, shape, ours));
    used.insert(pre + hf);
  };
  // A Conv1D weight (in, out) -> Linear's (out, in).
  auto conv1d = [&](const std::string& hf, const std::string& ours, int64_t in, int64_t out) {
    state.emplace_back(ours + ".weight",
                       take(file, path, pre + hf + ".weight", {in, out}, ours + ".weight").transpose(0, 1));
    used.insert(pre + hf + ".weight");
    plain(hf + ".bias", ours + ".bias", {out});
  };
  plain("wte.weight", "tok.weight", {V, d});
  plain("wpe.weight", "pos.weight", {model.context, d});
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    const std::string h = fmt::format("h.{}.", i), b = fmt::format("blocks.{}.", i);
    for (const char* ln : {"ln_1", "ln_2"}) {
      plain(h + ln + ".weight", b + ln + ".weight", {d});
      plain(h + ln + ".bias", b + ln + ".bias", {d});
    }
    // c_attn: x W (d, 3d) + b (3d); columns [0, d) make q, [d, 2d) k, [2d, 3d) v.
    const Tensor w = take(file, path, pre + h + "attn.c_attn.weight", {d, 3 * d}, b + "attn.w_q/w_k/w_v.weight");
    const Tensor bias = take(file, path, pre + h + "attn.c_attn.bias", {3 * d}, b + "attn.w_q/w_k/w_v.bias");
    used.insert(pre + h + "attn.c_attn.weight");
    used.insert(pre + h + "attn.c_attn.bias");
    const char* names[3] = {"w_q", "w_k", "w_v"};
    for (int64_t k = 0; k < 3; ++k) {
      state.emplace_back(b + "attn." + names[k] + ".weight", w.narrow(1, k * d, d).transpose(0, 1));
      state.emplace_back(b + "attn." + names[k] + ".bias", bias.narrow(0, k * d, d));
    }
    conv1d(h + "attn.c_proj", b + "attn.w_o", d, d);
    conv1d(h + "mlp.c_fc", b + "fc", d, 4 * d);
    conv1d(h + "mlp.c_proj", b + "proj", 4 * d, d);
  }
  plain("ln_f.weight", "ln_f.weight", {d});
  plain("ln_f.bias", "ln_f.bias", {d});
  // lm_head: absent when tied (save_pretrained leaves it out), or the same matrix as wte.
  const Tensor head = file.find("lm_head.weight");
  if (head.defined()) used.insert("lm_head.weight");
  if (!model.options.tie_weights) {
    MG_CHECK(head.defined(), FileError,
             "{}: tensor 'lm_head.weight' is missing, and the model's head is not tied to the token embedding", path);
    state.emplace_back("head.weight", take(file, path, "lm_head.weight", {V, d}, "head.weight"));
  }
  check_unused(file, path, used, [&](const std::string& n) {
    const std::string tail = n.size() > 5 ? n.substr(n.rfind('.') + 1) : n;
    return n.find(".attn.") != std::string::npos && (tail == "bias" || tail == "masked_bias") &&
           n.find("c_attn") == std::string::npos && n.find("c_proj") == std::string::npos;
  });
  load_state_dict(model, state);
}
}  // namespace

void load_hf_gpt2(GPT& model, const std::string& path) {
  // A model built by hand must have GPT-2's usual activation; gpt2_from_pretrained builds the one
  // config.json names (activation_function "gelu" is GELU without the tanh approximation).
  MG_CHECK(
      model.options.gelu_approximate == GeluApproximate::Tanh, ValueError,
      "load_hf_gpt2: the model must have gelu_approximate = GeluApproximate::Tanh (GPT-2's gelu_new); use gpt2_from_pretrained, "
      "which builds the activation config.json names");
  load_gpt2_weights(model, path);
}

std::unique_ptr<GPT> gpt2_from_pretrained(const std::string& folder) {
  int64_t vocab = 0, context = 0;
  check_model_folder("gpt2_from_pretrained", folder);
  const GPTOptions o = gpt2_options_from_json((fs::path(folder) / "config.json").string(), vocab, context);
  auto model = std::make_unique<GPT>(vocab, context, o);
  load_gpt2_weights(*model, (fs::path(folder) / "model.safetensors").string());
  model->eval();
  return model;
}

void save_hf_gpt2(const GPT& model, const std::string& folder) {
  MG_CHECK(
      !model.head.bias.defined(), ValueError,
      "save_hf_gpt2: the model's head has a bias, which GPT-2's lm_head cannot hold (build it with head_bias = false)");
  make_directories(folder, "save_hf");
  nn::StateDict state;
  auto put = [&](const std::string& hf, const Tensor& t) { state.emplace_back("transformer." + hf, t); };
  auto conv1d = [&](const std::string& hf, const nn::Linear& l) {
    put(hf + ".weight", l.weight.data().transpose(0, 1));
    put(hf + ".bias", l.bias.data());
  };
  put("wte.weight", model.tok.weight.data());
  put("wpe.weight", model.pos.weight.data());
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    const GPTBlock& b = model.blocks.at<GPTBlock>(i);
    const std::string h = fmt::format("h.{}.", i);
    put(h + "ln_1.weight", b.ln_1.weight.data());
    put(h + "ln_1.bias", b.ln_1.bias.data());
    put(h + "ln_2.weight", b.ln_2.weight.data());
    put(h + "ln_2.bias", b.ln_2.bias.data());
    const nn::MultiheadAttention& a = b.attn;
    put(h + "attn.c_attn.weight",
        concat({a.w_q.weight.data(), a.w_k.weight.data(), a.w_v.weight.data()}, 0).transpose(0, 1));
    put(h + "attn.c_attn.bias", concat({a.w_q.bias.data(), a.w_k.bias.data(), a.w_v.bias.data()}, 0));
    conv1d(h + "attn.c_proj", a.w_o);
    conv1d(h + "mlp.c_fc", b.fc);
    conv1d(h + "mlp.c_proj", b.proj);
  }
  put("ln_f.weight", model.ln_f.weight.data());
  put("ln_f.bias", model.ln_f.bias.data());
  const bool tied = model.head.weight.impl() == model.tok.weight.impl();
  if (!tied) state.emplace_back("lm_head.weight", model.head.weight.data());
  save_safetensors((fs::path(folder) / "model.safetensors").string(), state, {{"format", "pt"}});
  const GPTOptions& o = model.options;
  const nlohmann::ordered_json j = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", model.vocab_size},
      {"n_positions", model.context},
      {"n_embd", o.d_model},
      {"n_layer", o.num_layers},
      {"n_head", o.nhead},
      {"n_inner", nullptr},
      {"activation_function", o.gelu_approximate == GeluApproximate::Tanh ? "gelu_new" : "gelu"},
      {"layer_norm_epsilon", o.layer_norm_eps},
      {"resid_pdrop", o.dropout},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", o.dropout},
      {"tie_word_embeddings", tied},
      {"scale_attn_weights", true},
  };
  write_text_file((fs::path(folder) / "config.json").string(), j.dump(2) + "\n", "save_hf");
}

}  // namespace mg::models
