#pragma once
// The backward pass, stepped through: one self-contained HTML page (script and data inline, no
// network) made from a recording (inspect::BackwardRecorder::json, format "minigrad-backward-1").
// In it a learner
//   - sees the graph with the loss at the top and the leaves (the parameters) at the bottom;
//   - steps with Next / Back / Play (or the arrow keys) through the nodes in the order the engine
//     ran them: the current node is outlined, the gradients it received come in on blue edges, the
//     ones its rule sends go out on red edges, each edge labelled with the gradient's norm;
//   - reads, for that node, the derivative rule (as docs/03-writing-an-op.md's table points at it),
//     every contribution that arrived and their sum, what the rule returned for each input
//     (before and after the engine summed away a broadcast), a leaf's .grad, the forward's values,
//     and the finite-difference check of one entry where the recording has one;
//   - clicks any node (a parameter, say) to list every path from the loss that reached it and
//     how the paths added up where they met.
// The page checks itself when opened as backward.html#selftest: it steps through every node and
// writes what it showed into <pre id="selftest"> (tests/browser/test_backward_page.sh).
#include <string>

namespace mg::viz {

/// The page for `recording_json` (the text inspect::BackwardRecorder::json returns), titled
/// `title`. A ValueError if the text is not a recording (it must start with '{' and name the format).
std::string backward_html(const std::string& title, const std::string& recording_json);

/// Write backward_html(title, recording_json) to `path` (atomically); returns the path.
std::string write_backward_page(const std::string& path, const std::string& title, const std::string& recording_json);

}  // namespace mg::viz
