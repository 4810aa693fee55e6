#pragma once
// What every exercise file includes: minigrad, and the error an unfinished task throws.
//
// A task in exercises/tasks/ starts as a function whose body is one line,
//   throw exercises::NotDone("02_gradient_check", "docs/02-autograd.md, section \"Checking gradients\"");
// so that it compiles and the checker (make exercises) can say "not started" instead of failing to
// build. Replace that line with your code.
#include <stdexcept>
#include <string>

#include <minigrad/minigrad.h>

namespace exercises {

/// Whether any NotDone was thrown in this process: the checker then reports "not started".
inline bool& not_done_was_thrown() {
  static bool thrown = false;
  return thrown;
}

/// The error of a task whose body is still to be written: names the task and where to read.
class NotDone : public std::logic_error {
 public:
  /// task: the file's name without ".h"; hint: the docs section that explains what to write.
  NotDone(const std::string& task, const std::string& hint)
      : std::logic_error(task + " is not done yet: replace the throw with your code (hint: " + hint + ")") {
    not_done_was_thrown() = true;
  }
};

}  // namespace exercises
