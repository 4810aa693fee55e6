#pragma once
// What the example tests share: a fixture that runs on one thread (the models are tiny), and the
// check of what an example that records telemetry leaves behind.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "minigrad/minigrad.h"
#include "minigrad/tensor/blas.h"
namespace example_tests {

/// The fixture of every example test: one thread (the models are tiny: it is fastest), and the
/// products on the portable kernel as the examples' own programs run them (examples/common/gemm.h),
/// so what a test asserts a seed learns, it learns on every CPU.
class Examples : public testing::Test {
 protected:
  void SetUp() override {
    mg::set_num_threads(1);
    mg::blas::set_portable(true);
  }
  void TearDown() override { mg::blas::set_portable(false); }
};

/// Whether this build runs under AddressSanitizer (make test's third run). That run is there for
/// memory and undefined behaviour, and is ten times slower: a test of what a model learns on several
/// seeds runs its first seed there, and the release run checks all of them.
constexpr bool kSanitized =
#if defined(__SANITIZE_ADDRESS__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

/// Whether this is make test's run with OpenBLAS on another CPU's kernel (the Makefile sets
/// MG_TEST_OTHER_KERNEL=1). The example tests run every product on the portable kernel, which never
/// calls OpenBLAS, so their seeds compute the same bits there as in the release run: one is enough.
inline bool other_kernel_run() {
  const char* v = std::getenv("MG_TEST_OTHER_KERNEL");
  return v != nullptr && std::string(v) == "1";
}

/// Whether a test of learned behaviour runs its first seed only: under the sanitizers, and in the
/// other-kernel run (above). The release run checks every seed.
inline bool first_seed_only() { return kSanitized || other_kernel_run(); }

/// The seeds a test of learned behaviour runs: `all`, or (first_seed_only) only the first.
inline std::vector<uint64_t> seeds(std::initializer_list<uint64_t> all) {
  return first_seed_only() ? std::vector<uint64_t>{*all.begin()} : std::vector<uint64_t>(all);
}

/// For a test whose claim needs all its seeds together (a seed table): skipped where
/// first_seed_only() (under the sanitizers, and in the other-kernel run).
#define MG_SKIP_SEED_TABLE_WHERE_FIRST_SEED_ONLY() \
  if (example_tests::first_seed_only()) GTEST_SKIP() << "a claim over several seeds: the release run checks it"

/// For a test that trains for minutes even on its first seed under the sanitizers (over 100 s
/// there, ten times its release time): skipped under them, naming the test that runs the same
/// example's code (`covered_by`). The release run and the other-kernel run check its claim.
#define MG_SKIP_LONG_TRAINING_UNDER_SANITIZERS(covered_by) \
  if (example_tests::kSanitized)                           \
  GTEST_SKIP() << "trains for minutes under ASan; the release run checks it, and " covered_by " runs it under ASan"

/// A text of `sentence` written `times` times, in temp/minigrad_test_<name>/text.txt (the folder
/// is made): the training text of a small character model. Returns the folder.
inline std::filesystem::path repeated_text(const std::string& name, const std::string& sentence, int times) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("minigrad_test_" + name);
  std::filesystem::create_directories(dir);
  std::ofstream text(dir / "text.txt");
  for (int i = 0; i < times; ++i) text << sentence;
  return dir;
}

/// The whole file at p, as bytes.
inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// What an example that records telemetry leaves behind: `n` records, each with one score per
/// head of every attention layer (`heads`: the layers' head counts, in model order), the same in
/// the JSON (format "minigrad-telemetry-1"), and an explorer page at `page` that holds that JSON
/// (with "</" written "<\/", as a <script> needs).
inline void expect_telemetry(const std::vector<mg::inspect::TelemetryRecord>& records, const std::string& json,
                             const std::string& page, size_t n, const std::vector<int64_t>& heads) {
  const size_t total = static_cast<size_t>(std::accumulate(heads.begin(), heads.end(), int64_t{0}));
  ASSERT_EQ(records.size(), n);
  for (const mg::inspect::TelemetryRecord& r : records) {
    EXPECT_EQ(r.heads.size(), total) << "step " << r.step;
    EXPECT_EQ(r.patterns.size(), heads.size()) << "step " << r.step;
  }
  const nlohmann::json j = nlohmann::json::parse(json);
  EXPECT_EQ(j["format"], "minigrad-telemetry-1");
  ASSERT_EQ(j["layers"].size(), heads.size());
  for (size_t l = 0; l < heads.size(); ++l) EXPECT_EQ(j["layers"][l]["heads"], heads[l]);
  ASSERT_EQ(j["records"].size(), n);
  for (const auto& r : j["records"]) EXPECT_EQ(r["heads"].size(), total);
  ASSERT_TRUE(std::filesystem::exists(page));
  std::string embedded;
  for (const char c : json)
    embedded += c == '<' ? std::string("\\u003c") : std::string(1, c);  // as explorer_html embeds it
  EXPECT_NE(read_text(page).find(embedded), std::string::npos) << page << " does not hold the run's JSON";
}
}  // namespace example_tests
