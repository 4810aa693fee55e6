#pragma once
// The attention explorer: one self-contained HTML page (script and data inline, no network) made
// from a run's telemetry JSON (inspect::Telemetry, format "minigrad-telemetry-1"). In it a learner
//   - sees the layers x heads grid of attention maps, each captioned with its label and scores;
//   - clicks a head to see its map large, tokens on both axes, the exact value under the pointer;
//   - moves a slider over the recorded training steps and watches maps, scores and curves change;
//   - switches between scores before softmax and weights after.
// The page checks itself when opened as explorer.html#selftest (it moves its own slider and
// writes what it saw into <pre id="selftest">); tests/browser/test_explorer.sh runs that in
// headless Chromium.
#include <string>

namespace mg::viz {

/// The explorer page for `telemetry_json` (the text inspect::Telemetry::json returns), titled `title`.
/// A ValueError if the text is not telemetry (it must start with '{' and name the format).
std::string explorer_html(const std::string& title, const std::string& telemetry_json);

/// Write explorer_html(title, telemetry_json) to `path` (atomically); returns the path.
std::string write_explorer(const std::string& path, const std::string& title, const std::string& telemetry_json);

}  // namespace mg::viz
