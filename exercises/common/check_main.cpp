// The main of every check program. It runs the GoogleTest checks, then prints one line that
// scripts/exercises reads:
//   exercise: passes
//   exercise: not started              (the task's body still throws exercises::NotDone)
//   exercise: fails: <first failure>   (the first line of the first failure's message, and its test)
// The exit status is 0 only when every check passed.
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "exercise.h"

namespace {

// Keeps the first failure's test name and message.
class FirstFailure : public testing::EmptyTestEventListener {
 public:
  void OnTestStart(const testing::TestInfo& info) override {
    test_ = std::string(info.test_suite_name()) + "." + info.name();
  }
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed() || !first_.empty()) return;
    std::string message = result.message();
    const size_t start = message.find_first_not_of(" \n");
    message = start == std::string::npos ? "" : message.substr(start);
    // GoogleTest's own text comes first ("Value of: ...", "Expected equality of ..."); the words
    // a check adds with << come last, and say more.
    // ADD_FAILURE's message starts with a line "Failed".
    if (message.rfind("Failed\n", 0) == 0) message = message.substr(7);
    std::string line = message.substr(0, message.find('\n'));
    if (line.rfind("Value of:", 0) == 0 || line.rfind("Expected", 0) == 0) {
      const size_t end = message.find_last_not_of(" \n");
      line = message.substr(message.rfind('\n', end) + 1, end - message.rfind('\n', end));
    }
    first_ = line + " (" + test_ + ")";
  }
  const std::string& first() const { return first_; }

 private:
  std::string test_, first_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  auto* failure = new FirstFailure;  // the listener list owns it
  testing::UnitTest::GetInstance()->listeners().Append(failure);
  const int status = RUN_ALL_TESTS();
#ifdef GTEST_FLAG_GET
  const bool listing = GTEST_FLAG_GET(list_tests);
#else
  const bool listing = testing::GTEST_FLAG(list_tests);
#endif
  if (listing)  // (ctest's discovery reads the list: nothing else may be printed)
    return status;
  if (exercises::not_done_was_thrown())
    std::cout << "exercise: not started\n";
  else if (status == 0)
    std::cout << "exercise: passes\n";
  else
    std::cout << "exercise: fails: " << (failure->first().empty() ? "see the output above" : failure->first()) << "\n";
  return status;
}
