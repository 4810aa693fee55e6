#pragma once
// Drawing in the terminal: small heatmaps in Unicode blocks with 256-colour shading, and the
// progress bar every example's training loop shows.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg::viz {

/// A 2-D tensor as rows of Unicode blocks (coloured by value on a colour terminal, shaded
/// ░▒▓█ otherwise) next to each value, with labels and the range. Colour defaults to: stdout
/// is a terminal and NO_COLOR is unset.
std::string terminal_heatmap(const Tensor& matrix, const std::vector<std::string>& row_labels = {},
                             const std::vector<std::string>& col_labels = {}, int color = -1);

/// One status line for a training loop: step/total, loss, accuracy, tokens/s, ETA.
/// On a terminal it redraws in place; otherwise (logs, CI) it prints a line every `every` steps.
class ProgressBar {
 public:
  ProgressBar(int64_t total_steps, std::string label, int64_t every = 0);
  /// Report step `step` (1-based). accuracy < 0 hides it; tokens is the work done this step.
  void update(int64_t step, double loss, double accuracy = -1, int64_t tokens = 0);
  /// End the line.
  void finish();

 private:
  int64_t total_, every_;
  std::string label_;
  bool tty_;
  int64_t tokens_ = 0;
  std::chrono::steady_clock::time_point start_;
};

/// Whether stdout is a terminal that takes colour.
bool stdout_has_color();

}  // namespace mg::viz
