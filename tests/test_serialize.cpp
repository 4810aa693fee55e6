// safetensors files and nn::save/load: round trips, a file written from PyTorch, bad files refused
// with the model unchanged, atomic writes. Optimizer checkpoints: test_checkpoint.cpp.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>

#include "file_helpers.h"

using namespace mg;
using namespace mgtest;
using testing::HasSubstr;

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
  save_safetensors(path, {{"f32", f32}, {"f64", f64}, {"i64", i64}, {"b", b}, {"scalar", scalar}, {"empty", empty_t}},
                   {{"k", "v"}});
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
  Variable y = m(Variable(c.at("x").to(DType::Float32)));
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
  expect_refused(with_header(R"({"fc1.weight": {"dtype": "F16", "shape": [4, 3], "data_offsets": [0, 24]}})",
                             std::string(24, '\0')),
                 "unsupported dtype");
  expect_refused(with_header(R"({"fc1.weight": {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 40]}})",
                             std::string(40, '\0')),
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
  struct Wide : nn::Callable<Wide> {
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
  const nn::LoadResult r = nn::load_state_dict(
      c, {{"fc1.weight", full({4, 3}, 0.5)}, {"fc1.bias", zeros({4})}, {"extra", zeros({1})}}, {.strict = false});
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
  refused(
      with_header(
          R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
          std::string(12, '\0')),
      "the tensor before it ends");
  refused(with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", std::string(12, '\0')),
          "nothing is stored before");
  refused(with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", std::string(12, '\0')),
          "holds 12 data bytes but its tensors cover 8");
  // a header nested a million deep is refused while parsing, not by overflowing the stack
  refused(with_header(std::string(1000000, '[') + std::string(1000000, ']'), ""), "nests deeper");
  refused(with_header(R"({"a": {"dtype": [[[1]]], "shape": [], "data_offsets": [0, 4]}})", std::string(4, '\0')),
          "nests deeper");
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
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  // a file that exists keeps its mode
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  nn::save(m, path);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
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
  for (auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  // a parent that is a file: a FileError, and the file written before is untouched
  try {
    write_text_file((dir / "sub" / "a.json" / "b.json").string(), "x", "viz");
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("viz"));
  }
  EXPECT_EQ(read(path), "second");
  // a writer that fails half way (here: throws after some bytes) leaves the old file and no temporary
  EXPECT_THROW(write_file_atomic(path, "test",
                                 [](const ByteSink& write) {
                                   write("half", 4);
                                   throw ValueError("stopped");
                                 }),
               ValueError);
  EXPECT_EQ(read(path), "second");
  for (auto& e : fs::directory_iterator(dir / "sub")) EXPECT_EQ(e.path().filename(), "a.json");
  fs::remove_all(dir);
}
