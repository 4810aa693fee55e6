// safetensors checkpoints: round trips, a file written from PyTorch, bad files refused with the
// model unchanged, atomic writes, and training runs that resume exactly.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>

#include "helpers.h"

using namespace mg;
using mgtest::expect_close;
using testing::HasSubstr;
namespace fs = std::filesystem;

namespace {
// The architecture of tests/golden/safetensors_io.py's MLP.
struct TinyMLP : nn::Module {
  nn::Linear fc1{3, 4}, fc2{4, 2};
  TinyMLP() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Variable forward(const Variable& x) const { return fc2.forward(tanh(fc1.forward(x))); }
  std::string type_name() const override { return "TinyMLP"; }
};

// A path in a folder of this test's own: ctest runs the tests of this file in parallel processes,
// and one test's temporary files must not show up in another's folder (WritesAreAtomic looks for
// leftovers, and two tests wrote "bad.safetensors" side by side).
std::string temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "minigrad_test_serialize" /
                       ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::create_directories(dir);
  return (dir / name).string();
}

std::vector<std::vector<float>> snapshot(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (auto& p : m.parameters()) out.push_back(p.data().to_vector<float>());
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file with an 8-byte length and a hand-written header, for the malformed cases.
std::string with_header(const std::string& json, const std::string& data) {
  std::string h = json;
  uint64_t n = h.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + h + data;
}
}  // namespace

TEST(Serialize, RoundTripRestoresEveryParameter) {
  Generator g1(1), g2(2);
  TinyMLP a, b;
  a.fc1.reset_parameters(g1);
  b.fc1.reset_parameters(g2);
  const std::string path = temp_path("roundtrip.safetensors");
  nn::save(a, path);
  nn::load(b, path);
  EXPECT_EQ(snapshot(a), snapshot(b));
  SafeTensors f = load_safetensors(path);
  EXPECT_EQ(f.tensors.size(), 4u);
  EXPECT_EQ(f.tensors[0].first, "fc1.weight");
  EXPECT_EQ(f.metadata.at("format"), "pt");
}

TEST(Serialize, AllDtypesAndShapesRoundTrip) {
  const std::string path = temp_path("dtypes.safetensors");
  Tensor f32 = arange(6, DType::Float32).view({2, 3}).transpose(0, 1);  // non-contiguous: stored contiguous
  Tensor f64 = full({2}, 0.1, DType::Float64), i64 = arange(3), b = from_vector<bool>({true, false}, {2});
  Tensor scalar = scalar_tensor(7), empty_t = zeros({0, 4});
  save_safetensors(path, {{"f32", f32}, {"f64", f64}, {"i64", i64}, {"b", b}, {"scalar", scalar}, {"empty", empty_t}}, {{"k", "v"}});
  SafeTensors r = load_safetensors(path);
  expect_close(r.find("f32"), f32, 0, 0);
  EXPECT_EQ(r.find("f64").to_vector<double>(), f64.to_vector<double>());
  EXPECT_EQ(r.find("i64").to_vector<int64_t>(), i64.to_vector<int64_t>());
  EXPECT_EQ(r.find("b").dtype(), DType::Bool);
  EXPECT_EQ(r.find("scalar").dim(), 0);
  EXPECT_EQ(r.find("empty").shape(), (Shape{0, 4}));
  EXPECT_EQ(r.metadata.at("k"), "v");
  EXPECT_THROW(save_safetensors(path, {{"x", f64}, {"x", f64}}), ValueError);
}

TEST(Serialize, LoadsAFileWrittenFromPyTorch) {
  // tests/golden/torch_mlp.safetensors was written from a torch.nn.Module's state_dict by
  // tests/golden/safetensors_io.py; torch_mlp.txt holds that model's outputs.
  TinyMLP m;
  nn::load(m, std::string(MG_GOLDEN_DIR) + "/torch_mlp.safetensors");
  const auto& c = mgtest::golden("torch_mlp");
  Variable y = m.forward(Variable(c.at("x").to(DType::Float32)));
  expect_close(y.data(), c.at("out"), 1e-6, 1e-6);
}

TEST(Serialize, MinigradFilesFollowTheSpecByteForByte) {
  // The layout an independent reader (safetensors_io.py, PyTorch's safetensors) expects:
  // u64 little-endian header size, JSON, then the raw tensors at their offsets; data 8-aligned.
  TinyMLP m;
  const std::string path = temp_path("spec.safetensors");
  nn::save(m, path);
  const std::string bytes = read_bytes(path);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const std::string header = bytes.substr(8, n);
  EXPECT_THAT(header, HasSubstr("\"fc1.weight\":{\"dtype\":\"F32\",\"shape\":[4,3],\"data_offsets\":[0,48]}"));
  EXPECT_EQ(bytes.size(), 8 + n + 4 * (12 + 4 + 8 + 2));
  float first;
  std::memcpy(&first, bytes.data() + 8 + n, 4);
  EXPECT_EQ(first, m.fc1.weight.data().at({0, 0}));
}

TEST(Serialize, BadFilesAreRefusedAndTheModelIsUnchanged) {
  TinyMLP good, m;
  const std::string ok = temp_path("good.safetensors"), bad = temp_path("bad.safetensors");
  nn::save(good, ok);
  const std::string bytes = read_bytes(ok);
  const auto before = snapshot(m);
  auto expect_refused = [&](const std::string& content, const std::string& text) {
    SCOPED_TRACE(text);
    write_bytes(bad, content);
    try {
      nn::load(m, bad);
      ADD_FAILURE() << "loaded a bad file";
    } catch (const FileError& e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
    EXPECT_EQ(snapshot(m), before);
  };
  expect_refused(bytes.substr(0, 5), "too short");
  expect_refused(bytes.substr(0, 40), "truncated");
  expect_refused(bytes.substr(0, bytes.size() - 3), "fall outside");
  expect_refused(with_header("{\"a\": ", ""), "not valid JSON");
  expect_refused(with_header("[1, 2]", ""), "not a JSON object");
  expect_refused(with_header(R"({"fc1.weight": {"dtype": "F16", "shape": [4, 3], "data_offsets": [0, 24]}})", std::string(24, '\0')),
                 "unsupported dtype");
  expect_refused(with_header(R"({"fc1.weight": {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 40]}})", std::string(40, '\0')),
                 "needs 48");
  expect_refused(with_header(R"({"fc1.weight": {"dtype": "F32", "shape": [-4, 3], "data_offsets": [0, 0]}})", ""),
                 "non-negative");
  // A valid file for another model: names and shapes are listed.
  nn::Linear other(3, 4);
  nn::save(other, bad);
  try {
    nn::load(m, bad);
    ADD_FAILURE();
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing from the file: fc1.weight, fc1.bias, fc2.weight, fc2.bias"));
    EXPECT_THAT(e.what(), HasSubstr("not in the model: weight, bias"));
    EXPECT_THAT(e.what(), HasSubstr("left unchanged"));
  }
  struct Wide : nn::Module {
    nn::Linear fc1{3, 5}, fc2{4, 2};
    Wide() { register_module("fc1", fc1), register_module("fc2", fc2); }
    std::string type_name() const override { return "Wide"; }
  } wide;
  nn::save(wide, bad);
  try {
    nn::load(m, bad);
    ADD_FAILURE();
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("fc1.weight: shape (5, 3) in the file, (4, 3) in the model"));
  }
  EXPECT_EQ(snapshot(m), before);
  EXPECT_THROW(load_safetensors(temp_path("does-not-exist.safetensors")), FileError);
}

TEST(Serialize, WritesAreAtomic) {
  TinyMLP m;
  const std::string path = temp_path("atomic.safetensors");
  nn::save(m, path);
  const std::string old = read_bytes(path);
  // A write that fails (the target is a directory, so the final rename fails) leaves the old
  // file as it was and no temporary file behind.
  const std::string dir_target = temp_path("atomic_dir");
  fs::create_directories(dir_target + "/x");
  EXPECT_THROW(nn::save(m, dir_target), FileError);
  EXPECT_THROW(nn::save(m, temp_path("no/such/dir/file.safetensors")), FileError);
  EXPECT_EQ(read_bytes(path), old);
  for (auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
}

namespace {
// A few AdamW steps with a warm-up schedule on a fixed regression problem.
void train(TinyMLP& m, optim::AdamW& opt, optim::WarmupCosineLR& sched, int steps) {
  Generator g(123);
  Tensor x = randn({16, 3}, g), y = randn({16, 2}, g);
  for (int i = 0; i < steps; ++i) {
    Variable loss = mse_loss(m.forward(Variable(x)), Variable(y));
    opt.zero_grad();
    loss.backward();
    opt.step();
    sched.step();
  }
}
}  // namespace

TEST(Checkpoint, ResumeContinuesExactly) {
  const std::string path = temp_path("resume.safetensors");
  Generator g0(5);
  TinyMLP straight;
  straight.fc1.reset_parameters(g0);
  TinyMLP first;
  for (size_t i = 0; i < 4; ++i) first.parameters()[i].data().copy_(straight.parameters()[i].data());
  {
    optim::AdamW opt(straight.parameters());
    optim::WarmupCosineLR sched(opt, 2, 10);
    train(straight, opt, sched, 6);
  }
  {
    optim::AdamW opt(first.parameters());
    optim::WarmupCosineLR sched(opt, 2, 10);
    train(first, opt, sched, 3);
    optim::save_checkpoint(path, first, opt, 3, &sched);
  }
  TinyMLP resumed;  // different random init: everything must come from the file
  optim::AdamW opt(resumed.parameters(), {.lr = 0.5});  // and the schedule's base rate too
  optim::WarmupCosineLR sched(opt, 2, 10);
  const int64_t step = optim::load_checkpoint(path, resumed, opt, &sched);
  EXPECT_EQ(step, 3);
  EXPECT_EQ(sched.last_step(), 3);  // the schedule resumes where it stopped: no set_step by hand
  EXPECT_EQ(sched.base_lrs(), std::vector<double>{1e-3});
  EXPECT_EQ(opt.state(resumed.fc1.weight).at("step").item(), 3);
  train(resumed, opt, sched, 3);
  EXPECT_EQ(snapshot(resumed), snapshot(straight));  // bit for bit
  // The checkpoint still opens as plain weights; optimizer entries are named after parameters.
  SafeTensors f = load_safetensors(path);
  EXPECT_TRUE(f.find("optimizer.fc1.weight.exp_avg").defined());
  EXPECT_EQ(f.metadata.at("optimizer"), "AdamW");
}

TEST(Checkpoint, MismatchedCheckpointsChangeNothing) {
  const std::string path = temp_path("mismatch.safetensors");
  TinyMLP a;
  optim::AdamW opt_a(a.parameters());
  optim::WarmupCosineLR sched(opt_a, 1, 5);
  train(a, opt_a, sched, 2);
  optim::save_checkpoint(path, a, opt_a, 2);
  TinyMLP b;
  const auto before = snapshot(b);
  optim::SGD sgd(b.parameters());
  try {
    optim::load_checkpoint(path, b, sgd);
    ADD_FAILURE();
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds AdamW state but the optimizer is SGD"));
  }
  EXPECT_EQ(snapshot(b), before);
  // An optimizer over only part of the model cannot take state for the rest.
  optim::AdamW partial(b.fc2.parameters());
  EXPECT_THROW(optim::load_checkpoint(path, b, partial), FileError);
  EXPECT_EQ(snapshot(b), before);
  EXPECT_FALSE(partial.has_state(b.fc2.weight));
  // Weights-only files are not training checkpoints.
  nn::save(a, path);
  optim::AdamW opt_b(b.parameters());
  EXPECT_THROW(optim::load_checkpoint(path, b, opt_b), FileError);
  EXPECT_EQ(snapshot(b), before);
}

// The trap: a checkpoint of one optimizer loaded into another with other settings resumed a
// different run without a word. Every setting is checked, and the error names both values.
TEST(Checkpoint, OtherGroupsOrSettingsAreErrorsNamingBoth) {
  const std::string path = temp_path("settings.safetensors");
  TinyMLP a;
  optim::AdamW opt_a({{a.fc1.parameters(), {}}, {a.fc2.parameters(), {.weight_decay = 0.0}}}, {.beta2 = 0.95});
  optim::WarmupCosineLR sched_a(opt_a, 1, 5);
  train(a, opt_a, sched_a, 2);
  optim::save_checkpoint(path, a, opt_a, 2, &sched_a);
  TinyMLP b;
  auto before = snapshot(b);
  auto refused = [&](optim::Optimizer& opt, optim::LRScheduler* sched, const std::string& why) {
    try {
      optim::load_checkpoint(path, b, opt, sched);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const FileError& e) {
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
    EXPECT_EQ(snapshot(b), before);
    for (auto& p : b.parameters()) EXPECT_FALSE(opt.has_state(p));
  };
  optim::AdamW one_group(b.parameters(), {.beta2 = 0.95});
  optim::WarmupCosineLR s1(one_group, 1, 5);
  refused(one_group, &s1, "saved by an optimizer with 2 parameter group(s); this AdamW has 1");
  optim::AdamW other_split({{{b.fc1.weight}, {}}, {{b.fc1.bias, b.fc2.weight, b.fc2.bias}, {.weight_decay = 0.0}}}, {.beta2 = 0.95});
  optim::WarmupCosineLR s2(other_split, 1, 5);
  refused(other_split, &s2, "saved with 2 parameter(s) in group 0; this AdamW has 1 there");
  optim::AdamW other_decay({{b.fc1.parameters(), {}}, {b.fc2.parameters(), {.weight_decay = 0.1}}}, {.beta2 = 0.95});
  optim::WarmupCosineLR s3(other_decay, 1, 5);
  refused(other_decay, &s3, "saved with weight_decay 0 in group 1; this AdamW has 0.1");
  optim::AdamW other_beta({{b.fc1.parameters(), {}}, {b.fc2.parameters(), {.weight_decay = 0.0}}});
  optim::WarmupCosineLR s4(other_beta, 1, 5);
  refused(other_beta, &s4, "saved by an AdamW with beta2 = 0.95; this one has beta2 = 0.999");
  optim::AdamW same({{b.fc1.parameters(), {}}, {b.fc2.parameters(), {.weight_decay = 0.0}}}, {.beta2 = 0.95});
  optim::WarmupCosineLR other_schedule(same, 2, 5);
  refused(same, &other_schedule, "saved by a WarmupCosineLR with warmup_steps = 1; this one has warmup_steps = 2");
  optim::StepLR step_lr(same, 3);
  refused(same, &step_lr, "holds a WarmupCosineLR schedule but the scheduler is a StepLR");
  refused(same, nullptr, "holds the state of a WarmupCosineLR learning-rate schedule; pass the scheduler");
  // a schedule built on another (one-group) optimizer: refused before the weights are touched
  optim::WarmupCosineLR of_another(one_group, 1, 5);
  refused(same, &of_another, "the WarmupCosineLR was made for an optimizer with 1 parameter groups");
  optim::WarmupCosineLR fits(same, 1, 5);
  EXPECT_EQ(optim::load_checkpoint(path, b, same, &fits), 2);
  EXPECT_EQ(fits.last_step(), 2);
  EXPECT_EQ(same.groups()[0].lr, opt_a.groups()[0].lr);
  // A file without a schedule cannot restore one.
  optim::save_checkpoint(path, a, opt_a, 2);
  TinyMLP c;
  before = snapshot(c);
  optim::AdamW fresh({{c.fc1.parameters(), {}}, {c.fc2.parameters(), {.weight_decay = 0.0}}}, {.beta2 = 0.95});
  optim::WarmupCosineLR s5(fresh, 1, 5);
  try {
    optim::load_checkpoint(path, c, fresh, &s5);
    ADD_FAILURE();
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds no learning-rate schedule, but a WarmupCosineLR was given"));
  }
  EXPECT_EQ(snapshot(c), before);
}

// Named tensors in and out: PyTorch's state_dict / load_state_dict(strict=False), a prefix for a
// sub-module, and a file held in memory.
TEST(StateDict, NonStrictPrefixAndBytes) {
  TinyMLP a, b;
  const nn::StateDict sd = nn::state_dict(a);
  ASSERT_EQ(sd.size(), 4u);
  EXPECT_EQ(sd[0].first, "fc1.weight");
  EXPECT_EQ(sd[0].second.storage(), a.fc1.weight.data().storage());  // the tensors themselves, as PyTorch's
  nn::load_state_dict(b, sd);
  EXPECT_EQ(snapshot(b), snapshot(a));

  // Non-strict: what matched is loaded, the rest reported.
  TinyMLP c;
  const auto c_fc2 = c.fc2.weight.data().to_vector<float>();
  const nn::LoadResult r = nn::load_state_dict(c, {{"fc1.weight", full({4, 3}, 0.5)}, {"fc1.bias", zeros({4})}, {"extra", zeros({1})}},
                                               {.strict = false});
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"fc2.weight", "fc2.bias"}));
  EXPECT_EQ(r.unexpected_keys, std::vector<std::string>{"extra"});
  expect_close(c.fc1.weight.data(), full({4, 3}, 0.5), 0, 0);
  EXPECT_EQ(c.fc2.weight.data().to_vector<float>(), c_fc2);
  // Strict (the default) refuses the same and names both lists; a wrong shape is refused either way.
  try {
    nn::load_state_dict(c, {{"fc1.weight", full({4, 3}, 0.5)}, {"extra", zeros({1})}});
    ADD_FAILURE();
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing from the file: fc1.bias, fc2.weight, fc2.bias"));
    EXPECT_THAT(e.what(), HasSubstr("not in the model: extra"));
  }
  EXPECT_THROW(nn::load_state_dict(c, {{"fc1.weight", zeros({3, 4})}}, {.strict = false}), FileError);
  expect_close(c.fc1.weight.data(), full({4, 3}, 0.5), 0, 0);

  // A prefix loads one sub-module out of a whole model's file, from bytes in memory.
  const std::string path = temp_path("whole.safetensors");
  nn::save(a, path);
  const std::string bytes = read_bytes(path);
  nn::Linear part(4, 2);
  nn::load_from(part, parse_safetensors(bytes.data(), bytes.size()), "bytes", {.prefix = "fc2."});
  EXPECT_EQ(part.weight.data().to_vector<float>(), a.fc2.weight.data().to_vector<float>());
  EXPECT_EQ(part.bias.data().to_vector<float>(), a.fc2.bias.data().to_vector<float>());
}

TEST(Serialize, HeadersMustTileTheDataAndStayShallow) {
  TinyMLP m;
  const auto before = snapshot(m);
  const std::string bad = temp_path("tiling.safetensors");
  auto refused = [&](const std::string& content, const std::string& text) {
    SCOPED_TRACE(text);
    write_bytes(bad, content);
    try {
      nn::load(m, bad);
      ADD_FAILURE() << "loaded a bad file";
    } catch (const FileError& e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
    EXPECT_EQ(snapshot(m), before);
  };
  // two tensors sharing bytes, a hole before a tensor, bytes after the last one
  refused(with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                      std::string(12, '\0')), "the tensor before it ends");
  refused(with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", std::string(12, '\0')),
          "nothing is stored before");
  refused(with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", std::string(12, '\0')),
          "holds 12 data bytes but its tensors cover 8");
  // a header nested a million deep is refused while parsing, not by overflowing the stack
  refused(with_header(std::string(1000000, '[') + std::string(1000000, ']'), ""), "nests deeper");
  refused(with_header(R"({"a": {"dtype": [[[1]]], "shape": [], "data_offsets": [0, 4]}})", std::string(4, '\0')), "nests deeper");
  // a folder is not a file: a FileError, not std::ios_base::failure
  try {
    load_safetensors(fs::temp_directory_path().string());
    FAIL();
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a file"));
  }
  // names must be UTF-8 to be JSON: a ValueError, not nlohmann's exception
  EXPECT_THROW(save_safetensors(bad, {{std::string("w\xff"), zeros({1})}}), ValueError);
  // the same checks on bytes in memory
  EXPECT_THROW(parse_safetensors("12345678", 8), FileError);
  nn::save(m, temp_path("good.safetensors"));  // (this read another test's file before: a race)
  const std::string ok = read_bytes(temp_path("good.safetensors"));
  EXPECT_EQ(parse_safetensors(ok.data(), ok.size()).tensors.size(), 4u);
}

TEST(Serialize, SavesCleanUpAndRespectTheUmask) {
  TinyMLP m;
  const std::string path = temp_path("mode.safetensors");
  fs::remove(path);
  // what a save killed half way leaves: a temporary of a process that is gone (pid 0x7ffffffe)
  const std::string stale = path + ".tmp-2147483646-abcdef";
  write_bytes(stale, "half a file");
  const mode_t old_mask = ::umask(027);
  nn::save(m, path);
  ::umask(old_mask);
  EXPECT_FALSE(fs::exists(stale));  // removed by the next save of the same file
  // a new file gets what the umask leaves of rw-rw-rw- (it was always 0600 before)
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  // a file that exists keeps its mode
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  nn::save(m, path);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
}

TEST(Checkpoint, TamperedCheckpointsChangeNothing) {
  const std::string path = temp_path("tamper.safetensors"), bad = temp_path("tampered.safetensors");
  TinyMLP a;
  optim::AdamW opt_a(a.parameters());
  optim::WarmupCosineLR sched(opt_a, 1, 5);
  train(a, opt_a, sched, 2);
  optim::save_checkpoint(path, a, opt_a, 2);
  const SafeTensors good = load_safetensors(path);
  TinyMLP b;
  optim::AdamW opt_b(b.parameters(), {.lr = 0.5});
  const auto before = snapshot(b);
  auto refused = [&](std::vector<std::pair<std::string, Tensor>> tensors, std::map<std::string, std::string> meta,
                     const std::string& text) {
    SCOPED_TRACE(text);
    save_safetensors(bad, tensors, meta);
    try {
      optim::load_checkpoint(bad, b, opt_b);
      ADD_FAILURE() << "loaded a tampered checkpoint";
    } catch (const FileError& e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
    EXPECT_EQ(snapshot(b), before);
    EXPECT_FALSE(opt_b.has_state(b.fc1.weight));
    EXPECT_EQ(opt_b.groups()[0].lr, 0.5);
  };
  auto meta_with = [&](const std::string& k, const std::string& v) {
    auto m = good.metadata;
    m[k] = v;
    return m;
  };
  refused(good.tensors, meta_with("step", "-3"), "step \"-3\"");
  refused(good.tensors, meta_with("step", "12abc"), "step \"12abc\"");
  refused(good.tensors, meta_with("lr.0", "nan"), "lr.0 \"nan\"");
  refused(good.tensors, meta_with("lr.0", "1e-3garbage"), "lr.0 \"1e-3garbage\"");
  refused(good.tensors, meta_with("lr.1", "0.1"), "saved by an optimizer with 2 parameter group(s); this AdamW has 1");
  auto without = [&](const std::string& name) {
    std::vector<std::pair<std::string, Tensor>> out;
    for (auto& [n, t] : good.tensors)
      if (n != name) out.emplace_back(n, t);
    return out;
  };
  refused(without("optimizer.fc1.weight.exp_avg_sq"), good.metadata, "no \"optimizer.fc1.weight.exp_avg_sq\"");
  auto with = [&](const std::string& name, const Tensor& t) {
    auto out = without(name);
    out.emplace_back(name, t);
    return out;
  };
  refused(with("optimizer.fc1.weight.step", from_vector<int64_t>({-1}, {})), good.metadata, "= -1");
  refused(with("optimizer.fc1.weight.bogus", zeros({4, 3})), good.metadata, "which AdamW does not keep");
}

TEST(TextFile, ReplacedWholeOrNotAtAll) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "minigrad_test_text_file";
  fs::remove_all(dir);
  const std::string path = (dir / "sub" / "a.json").string();
  auto read = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  write_text_file(path, "first", "test");  // creates dir/sub
  write_text_file(path, "second", "test");
  EXPECT_EQ(read(path), "second");
  for (auto& e : fs::directory_iterator(dir / "sub")) EXPECT_EQ(e.path().filename(), "a.json");  // no temporary left
  // a folder where the file should go: the rename fails, named; no temporary is left behind
  fs::create_directories(dir / "taken");
  try {
    write_text_file((dir / "taken").string(), "x", "Telemetry::save");
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("Telemetry::save"));
    EXPECT_THAT(e.what(), testing::HasSubstr("taken"));
  }
  for (auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  // a parent that is a file: a FileError, and the file written before is untouched
  try {
    write_text_file((dir / "sub" / "a.json" / "b.json").string(), "x", "viz");
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("viz"));
  }
  EXPECT_EQ(read(path), "second");
  // a writer that fails half way (here: throws after some bytes) leaves the old file and no temporary
  EXPECT_THROW(write_file_atomic(path, "test", [](const ByteSink& write) {
                 write("half", 4);
                 throw ValueError("stopped");
               }),
               ValueError);
  EXPECT_EQ(read(path), "second");
  for (auto& e : fs::directory_iterator(dir / "sub")) EXPECT_EQ(e.path().filename(), "a.json");
  fs::remove_all(dir);
}
