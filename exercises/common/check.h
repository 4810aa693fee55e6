#pragma once
// What the checks in exercises/checks/ share: comparing tensors with a message that says what
// differs (the checker prints the first one), and the hint each task's check carries.
#include <string>

#include <gtest/gtest.h>

#include "exercise.h"

namespace exercises {

/// The docs section a task relies on. Each check file holds one, `kHint`: scripts/exercises reads
/// it from the source to print beside the task, and HintNamesARealSection checks it exists.
struct Hint {
  const char* task;     // "02_gradient_check": the file's name in tasks/ and solutions/
  const char* doc;      // "docs/02-autograd.md"
  const char* section;  // "Checking gradients": a heading of that file, without the #s
};

/// A failure unless `doc` has a heading (#, ## or ###) whose text is exactly `section`, and the
/// reference solution's file repeats the section (so its comment points where the check does).
void expect_hint_is_real(const Hint& hint);

/// The largest |a - b| over all elements, both read as float64 (shapes must be equal).
double max_abs_diff(const mg::Tensor& a, const mg::Tensor& b);

/// A failure, naming `what`, unless `actual` is defined, has `expected`'s shape, and every element
/// is within `tol` of it. Returns whether it passed.
bool expect_close(const mg::Tensor& actual, const mg::Tensor& expected, double tol, const std::string& what);

/// A float64 tensor of `shape` with Normal(0, 1) entries from a generator seeded with `seed`.
mg::Tensor random64(const mg::Shape& shape, uint64_t seed);

}  // namespace exercises
