#pragma once
// Pictures as SVG text: heatmaps (attention maps, weight matrices) and line charts (loss
// curves). SVG needs no library, scales without blur and keeps its text as text. viz/ reads
// plain Tensors and knows nothing of gradients.
#include <string>
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg::viz {

/// How to draw a heatmap.
struct HeatmapOptions {
  /// The picture's title.
  std::string title;
  /// One label per row / column (optional).
  std::vector<std::string> row_labels, col_labels;
  /// The axes' names, e.g. "query", "key".
  std::string row_title, col_title;
  /// Blue-white-red around 0 (weights); otherwise light-to-dark (0..max).
  bool diverging = false;
  /// The colour range; both 0: from the data (symmetric when diverging).
  double vmin = 0, vmax = 0;
  /// Write the values in the cells: 1 yes, 0 no, -1 when the map is small.
  int annotate = -1;
  /// Decimals written in cells; -1: 3 for values in [0, 1] (attention) when the cell has room, else 2.
  int decimals = -1;
  /// Cell size in pixels.
  int cell = 32;
};

/// A 2-D tensor as a heatmap with labels on both axes and a colour scale. -inf cells (masked
/// attention scores) are drawn hatched grey.
std::string heatmap_svg(const Tensor& matrix, const HeatmapOptions& options);

/// How to draw attention weights as a graph.
struct AttentionGraphOptions {
  /// The picture's title.
  std::string title;
  /// One label per token (empty: 0, 1, 2, ...).
  std::vector<std::string> labels;
  /// Edges with a smaller weight are left out (in (0, 1]).
  double min_weight = 0.05;
  /// Pixels between two tokens.
  int spacing = 64;
};

/// One head's attention weights (T, T), row i the weights of query i over the keys, as a graph:
/// the tokens are nodes on a line and each weight w[i][j] >= min_weight is an edge from key j to
/// query i (what query i reads), an arc above the line for an earlier key and below it for a later
/// one, a loop for i = j, its width and opacity growing with w. A self-attention layer is graph
/// attention on the complete graph over its tokens (the earlier tokens only, when causal), with
/// every edge's weight computed afresh for each input. Each edge carries its weight as a tooltip.
std::string attention_graph_svg(const Tensor& weights, const AttentionGraphOptions& options);

/// One curve of a line chart.
struct Series {
  std::string name;
  std::vector<double> x, y;
  /// Drawn dashed and thin: a guide (a slope, a bound), not data.
  bool dashed = false;
  /// y against the step number 1, 2, ..., y.size() (a training curve).
  static Series over_steps(std::string name, std::vector<double> y) {
    std::vector<double> x(y.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i + 1);
    return {std::move(name), std::move(x), std::move(y)};
  }
};

/// A vertical line across a chart at x, labelled (a phase change, an event).
struct Marker {
  double x;
  std::string label;
};

/// How to draw a line chart.
struct LineChartOptions {
  /// The chart's title.
  std::string title;
  /// The names of the axes.
  std::string x_label, y_label;
  /// A logarithmic y axis (values below 1e-12 are drawn at 1e-12).
  bool log_y = false;
  /// A logarithmic x axis (points at x <= 0 are left out).
  bool log_x = false;
  /// Vertical lines across the chart, labelled (a phase change, an event).
  std::vector<Marker> markers;
};

/// Curves on shared axes with a legend (e.g. train and validation loss against step):
/// line_chart_svg(series, {.title = "Loss", .x_label = "step", .y_label = "cross-entropy", .log_y = true}).
std::string line_chart_svg(const std::vector<Series>& series, const LineChartOptions& options);

/// A 2-D classifier's picture: `probs` (H, W) is P(class 1) over the square [-1, 1]^2 (row 0 at
/// the top), drawn as a background, with the points (N, 2) coloured by their labels (N) on top.
std::string decision_boundary_svg(const Tensor& probs, const Tensor& points, const Tensor& labels,
                                  const std::string& title);

/// Escape &, <, > and quotes for SVG and HTML text.
std::string escape(const std::string& text);

/// JSON text made safe inside an HTML <script> element: every '<' (which can only stand inside a
/// JSON string) written as "\u003c", the same character, so "</script" cannot end the element.
std::string json_in_script(const std::string& json);

}  // namespace mg::viz
