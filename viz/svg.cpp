#include "minigrad/viz/svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace mg::viz {
namespace {

struct Rgb {
  double r, g, b;
};

// Piecewise-linear colour scales through a few anchor colours.
Rgb interpolate(const std::vector<Rgb>& anchors, double t) {
  if (!std::isfinite(t)) t = 0.5;  // NaN (a flat or overflowing range): the middle colour, never an out-of-range cast
  t = std::clamp(t, 0.0, 1.0) * static_cast<double>(anchors.size() - 1);
  const size_t i = std::min(static_cast<size_t>(t), anchors.size() - 2);
  const double f = t - static_cast<double>(i);
  const Rgb& a = anchors[i];
  const Rgb& b = anchors[i + 1];
  return {a.r + (b.r - a.r) * f, a.g + (b.g - a.g) * f, a.b + (b.b - a.b) * f};
}
const std::vector<Rgb> kSequential = {{255, 255, 229}, {254, 217, 118}, {253, 141, 60}, {227, 26, 28}, {128, 0, 38}};
const std::vector<Rgb> kDiverging = {{33, 102, 172}, {146, 197, 222}, {247, 247, 247}, {244, 165, 130}, {178, 24, 43}};

std::string hex(const Rgb& c) {
  return fmt::format("#{:02x}{:02x}{:02x}", static_cast<int>(c.r), static_cast<int>(c.g), static_cast<int>(c.b));
}
double luminance(const Rgb& c) { return (0.299 * c.r + 0.587 * c.g + 0.114 * c.b) / 255; }
std::string num(double v, int decimals = 2) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (std::abs(v) >= 100) return fmt::format("{:.0f}", v);
  if (std::abs(v) >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.{}f}", v, decimals);
}
const char* kFont = "font-family=\"Helvetica, Arial, sans-serif\"";

}  // namespace

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string json_in_script(const std::string& json) {
  std::string data;
  data.reserve(json.size());
  for (const char c : json) {
    if (c == '<')
      data += "\\u003c";
    else
      data += c;
  }
  return data;
}

std::string attention_graph_svg(const Tensor& w, const AttentionGraphOptions& o) {
  MG_CHECK(w.dim() == 2 && w.size(0) == w.size(1), ShapeError,
           "attention_graph_svg: expected the (T, T) weights of one head, got shape {}", shape_str(w.shape()));
  const int64_t T = w.size(0);
  MG_CHECK(T <= 512, ValueError,
           "attention_graph_svg: {} tokens; a graph of up to 512 (T^2 edges) is drawn, a heatmap reads better beyond",
           T);
  MG_CHECK(o.labels.empty() || static_cast<int64_t>(o.labels.size()) == T, ShapeError,
           "attention_graph_svg: {} labels for {} tokens", o.labels.size(), T);
  MG_CHECK(o.min_weight > 0 && o.min_weight <= 1, ValueError,
           "attention_graph_svg: min_weight must be in (0, 1], got {}", o.min_weight);
  MG_CHECK(o.spacing >= 8 && o.spacing <= 1000, ValueError,
           "attention_graph_svg: spacing must be 8 to 1000 pixels, got {}", o.spacing);
  const std::vector<double> v = w.to_vector<double>();
  for (size_t k = 0; k < v.size(); ++k)
    MG_CHECK(v[k] >= 0 && v[k] <= 1, ValueError,
             "attention_graph_svg: weights must be in [0, 1] (a softmax's output), got {} at ({}, {})", v[k],
             static_cast<int64_t>(k) / T, static_cast<int64_t>(k) % T);
  auto label = [&](int64_t i) { return o.labels.empty() ? std::to_string(i) : o.labels[static_cast<size_t>(i)]; };
  // Arcs rise (earlier keys) or fall (later keys) in proportion to the distance they span; the
  // picture has room above and below for the longest of each that is drawn.
  auto arc_height = [&](int64_t i, int64_t j) { return static_cast<int>(std::abs(i - j)) * o.spacing / 2 + 10; };
  int up = 24, down = 0;  // 24: a loop's room
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (i != j && v[static_cast<size_t>(i * T + j)] >= o.min_weight)
        (j < i ? up : down) = std::max(j < i ? up : down, arc_height(i, j));
  const int sp = o.spacing, left = 40, span = static_cast<int>(std::max<int64_t>(T - 1, 0));
  const int base = 40 + up, labels_y = base + 22, below = labels_y + 8, height = below + down + 30;
  const int width = std::max(2 * left + span * sp, 40 + 52 * 9);
  std::string s = fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" {} font-size="12">)",
                              width, height, kFont) +
                  "\n";
  s += R"(<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" )"
       R"(markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#b2182b"/>)"
       R"(</marker></defs>)"
       "\n";
  s += fmt::format(R"(<text x="10" y="20" font-size="15" font-weight="bold">{}</text>)", escape(o.title)) + "\n";
  auto x_of = [&](int64_t i) { return left + static_cast<int>(i) * sp; };
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      const double wij = v[static_cast<size_t>(i * T + j)];
      if (wij < o.min_weight) continue;
      const std::string tip =
          fmt::format("<title>{} reads {}: {}</title>", escape(label(i)), escape(label(j)), num(wij, 3));
      const double stroke = 0.5 + 4.5 * wij, opacity = 0.25 + 0.75 * wij;
      if (i == j) {  // a loop above the node
        s += fmt::format(R"(<circle cx="{}" cy="{}" r="8" fill="none" stroke="#b2182b" stroke-width="{:.2f}" )"
                         R"(stroke-opacity="{:.2f}">{}</circle>)",
                         x_of(i), base - 15, stroke, opacity, tip) +
             "\n";
        continue;
      }
      // from key j to query i: above the nodes for an earlier key, below the labels for a later one
      const int h = arc_height(i, j), y0 = j < i ? base - 7 : below, y1 = j < i ? y0 - h : y0 + h;
      s += fmt::format(R"(<path d="M{},{} C{},{} {},{} {},{}" fill="none" stroke="#b2182b" stroke-width="{:.2f}" )"
                       R"svg(stroke-opacity="{:.2f}" marker-end="url(#head)">{}</path>)svg",
                       x_of(j), y0, x_of(j), y1, x_of(i), y1, x_of(i), y0, stroke, opacity, tip) +
           "\n";
    }
  for (int64_t i = 0; i < T; ++i) {
    s += fmt::format(R"(<circle cx="{}" cy="{}" r="5" fill="#444"/>)", x_of(i), base) + "\n";
    s += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", x_of(i), labels_y, escape(label(i))) +
         "\n";
  }
  s += fmt::format(R"(<text x="10" y="{}" fill="#444" font-size="11">an edge runs from a key to the query that )"
                   R"(reads it, as wide as the weight (under {} left out)</text>)",
                   height - 8, num(o.min_weight, 2)) +
       "\n";
  return s + "</svg>\n";
}

std::string heatmap_svg(const Tensor& m, const HeatmapOptions& o) {
  MG_CHECK(m.dim() == 2, ShapeError, "heatmap_svg: expected a 2-D tensor, got shape {}", shape_str(m.shape()));
  const int64_t R = m.size(0), C = m.size(1);
  const std::vector<double> v = m.to_vector<double>();
  double lo = o.vmin, hi = o.vmax;
  if (lo == 0 && hi == 0) {
    lo = INFINITY, hi = -INFINITY;
    for (double x : v)
      if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
    if (!std::isfinite(lo)) lo = 0, hi = 1;
    if (o.diverging)
      hi = std::max(std::abs(lo), std::abs(hi)), lo = -hi;
    else
      lo = std::min(lo, 0.0);
    if (hi == lo) hi = lo + 1;
  }
  const bool annotate = o.annotate == 1 || (o.annotate == -1 && R <= 16 && C <= 16);
  int decimals = o.decimals;
  if (decimals < 0) {  // attention weights (all in [0, 1]) get 3 decimals when "0.997" fits in a cell
    bool unit = true;
    for (double x : v) unit = unit && (!std::isfinite(x) || (x >= 0 && x <= 1));
    decimals = unit && o.cell >= 32 ? 3 : 2;
  }
  size_t label_len = 0, col_len = 0;
  for (auto& l : o.row_labels) label_len = std::max(label_len, l.size());
  for (auto& l : o.col_labels) col_len = std::max(col_len, l.size());
  // column labels wider than a cell are written upwards, and the map moves down to make room
  const bool upright = static_cast<int>(col_len) * 8 >= o.cell;
  const int cell = o.cell, left = 30 + static_cast<int>(label_len) * 8,
            top = upright ? 56 + static_cast<int>(col_len) * 7 : 70;
  const int width = std::max(left + static_cast<int>(C) * cell + 90, 20 + static_cast<int>(o.title.size()) * 9),
            height = top + static_cast<int>(R) * cell + 50;
  std::string s =
      fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" {} font-size=\"12\">\n", width,
                  height, kFont);
  s +=
      "<defs><pattern id=\"masked\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\"><rect width=\"6\" height=\"6\" "
      "fill=\"#dddddd\"/><path d=\"M0,6 L6,0\" stroke=\"#999\" stroke-width=\"1\"/></pattern></defs>\n";
  s += fmt::format("<text x=\"{}\" y=\"20\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", 10, escape(o.title));
  if (!o.col_title.empty())
    s += fmt::format("<text x=\"{}\" y=\"38\" text-anchor=\"middle\" fill=\"#444\">{} &#8594;</text>\n",
                     left + C * cell / 2, escape(o.col_title));
  if (!o.row_title.empty())
    s += fmt::format(
        "<text x=\"12\" y=\"{}\" text-anchor=\"middle\" fill=\"#444\" transform=\"rotate(-90 12 {})\">{} &#8594;</text>\n",
        top + R * cell / 2, top + R * cell / 2, escape(o.row_title));
  for (int64_t c = 0; c < C && c < static_cast<int64_t>(o.col_labels.size()); ++c) {
    const int64_t x = left + c * cell + cell / 2 + (upright ? 4 : 0);
    s += upright ? fmt::format(
                       "<text x=\"{0}\" y=\"{1}\" text-anchor=\"start\" transform=\"rotate(-90 {0} {1})\">{2}</text>\n",
                       x, top - 6, escape(o.col_labels[c]))
                 : fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x, top - 6,
                               escape(o.col_labels[c]));
  }
  for (int64_t r = 0; r < R && r < static_cast<int64_t>(o.row_labels.size()); ++r)
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6, top + r * cell + cell / 2 + 4,
                     escape(o.row_labels[r]));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const double x = v[r * C + c];
      const int px = left + static_cast<int>(c) * cell, py = top + static_cast<int>(r) * cell;
      if (!std::isfinite(x)) {
        s += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"url(#masked)\"><title>masked</title></rect>\n",
            px, py, cell, cell);
        continue;
      }
      const Rgb col = interpolate(o.diverging ? kDiverging : kSequential, (x - lo) / (hi - lo));
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n", px,
                       py, cell, cell, hex(col), num(x, std::max(decimals, 3)));
      if (annotate)
        s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{}\" fill=\"{}\">{}</text>\n",
                         px + cell / 2, py + cell / 2 + 4, cell >= 32 ? 10 : 8,
                         luminance(col) < 0.5 ? "white" : "black", num(x, decimals));
    }
  // Colour scale on the right.
  const int sx = left + static_cast<int>(C) * cell + 20, sh = static_cast<int>(R) * cell;
  for (int i = 0; i < 40; ++i) {
    const Rgb col = interpolate(o.diverging ? kDiverging : kSequential, 1.0 - i / 39.0);
    s += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"14\" height=\"{:.1f}\" fill=\"{}\"/>\n", sx,
                     top + sh * i / 40.0, sh / 40.0 + 0.5, hex(col));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n<text x=\"{}\" y=\"{}\">{}</text>\n", sx + 18, top + 10,
                   num(hi, decimals), sx + 18, top + sh, num(lo, decimals));
  return s + "</svg>\n";
}

namespace {

// Round tick positions for an axis over [lo, hi]: multiples of 1, 2 or 5 x 10^k, at most about
// `count` of them, covering the range.
std::vector<double> linear_ticks(double lo, double hi, int count) {
  const double raw = (hi - lo) / count, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 5.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  // the multiples k * step inside [lo, hi], counted in integers (adding a step to x could leave x
  // unchanged when the step is below x's precision)
  const double first = std::ceil(lo / step - 1e-9), last = std::floor(hi / step + 1e-9);
  std::vector<double> t;
  for (int64_t i = 0; i <= static_cast<int64_t>(last - first); ++i) {
    const double x = (first + static_cast<double>(i)) * step;
    t.push_back(std::abs(x) < 1e-12 * step ? 0.0 : x);
  }
  return t;
}

// Widen [lo, hi] when it is empty or too narrow to draw: under a billionth of the values' size,
// or so small (near the smallest doubles) that its round tick steps would underflow.
void widen_if_flat(double& lo, double& hi) {
  if (hi - lo <= std::max(1e-9 * std::max(std::abs(lo), std::abs(hi)), 1e-290)) hi = lo + std::max(1.0, std::abs(lo));
}

// A tick label: short and exact for round values ("0.001", "2e-05" written "2e-5", "400").
std::string tick_label(double v) {
  std::string s = fmt::format("{:g}", v);
  const size_t e = s.find('e');
  if (e != std::string::npos) {
    size_t d = e + 1;
    if (s[d] == '-' || s[d] == '+') ++d;
    while (d + 1 < s.size() && s[d] == '0') s.erase(d, 1);
    if (s[e + 1] == '+') s.erase(e + 1, 1);
  }
  return s;
}

}  // namespace

namespace {
// A chart's value in axis units: log10 of it on a log axis.
double axis_units(double v, bool log) { return log ? std::log10(v) : v; }
double y_axis_units(double v, bool log) { return log ? std::log10(std::max(v, 1e-12)) : v; }

// Whether point i of s is drawn: finite, and positive on a log x axis.
bool drawn(const Series& s, size_t i, bool log_x) {
  return std::isfinite(s.y[i]) && std::isfinite(s.x[i]) && (!log_x || s.x[i] > 0);
}

// The y ticks on round values, in axis units, with [y0, y1] widened to the outermost ones: decades
// (thinned to at most 7) on a log axis, 1/2/5 x 10^k steps on a linear one.
std::vector<double> y_axis_ticks(double& y0, double& y1, bool log_y) {
  std::vector<double> yticks;
  if (log_y) {
    y0 = std::floor(y0 + 1e-9), y1 = std::ceil(y1 - 1e-9);
    if (y1 == y0) y1 = y0 + 1;
    const int every = static_cast<int>(std::ceil((y1 - y0) / 7));
    y1 = y0 + every * std::ceil((y1 - y0) / every);  // the top tick at or above the data
    for (double d = y0; d <= y1 + 1e-9; d += every) yticks.push_back(d);
  } else {
    yticks = linear_ticks(y0, y1, 5);
    const double step = yticks.size() > 1 ? yticks[1] - yticks[0] : 1;
    if (yticks.front() > y0 + 1e-9 * step) yticks.insert(yticks.begin(), yticks.front() - step);
    if (yticks.back() < y1 - 1e-9 * step) yticks.push_back(yticks.back() + step);
    y0 = yticks.front(), y1 = yticks.back();
  }
  return yticks;
}

// The x ticks, in axis units: round values on a linear axis; on a log axis 1, 2 and 5 x 10^k
// inside the range (only the powers of ten when that would be more than 8).
std::vector<double> x_axis_ticks(double x0, double x1, bool log_x) {
  if (!log_x) return linear_ticks(x0, x1, 5);
  std::vector<double> xticks;
  for (int pass = 0; pass < 2 && (xticks.empty() || xticks.size() > 8); ++pass) {
    xticks.clear();
    for (double k = std::floor(x0); k <= std::ceil(x1); ++k)
      for (double m : pass == 0 ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
        const double t = k + std::log10(m);
        if (t >= x0 - 1e-9 && t <= x1 + 1e-9) xticks.push_back(t);
      }
  }
  return xticks;
}
}  // namespace

std::string line_chart_svg(const std::vector<Series>& series, const LineChartOptions& options) {
  const std::string &title = options.title, &x_label = options.x_label, &y_label = options.y_label;
  const bool log_y = options.log_y, log_x = options.log_x;
  size_t longest = 0;
  for (auto& se : series) longest = std::max(longest, se.name.size());
  auto fy = [&](double y) { return y_axis_units(y, log_y); };
  auto fx = [&](double x) { return axis_units(x, log_x); };
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;  // the data's range, in axis units
  for (auto& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (drawn(s, i, log_x))
        x0 = std::min(x0, fx(s.x[i])), x1 = std::max(x1, fx(s.x[i])), y0 = std::min(y0, fy(s.y[i])),
        y1 = std::max(y1, fy(s.y[i]));
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  widen_if_flat(x0, x1);
  widen_if_flat(y0, y1);
  if (!log_y && y0 > 0 && y0 < 0.5 * y1) y0 = 0;
  const std::vector<double> yticks = y_axis_ticks(y0, y1, log_y), xticks = x_axis_ticks(x0, x1, log_x);
  size_t widest = 0;  // the widest y tick label sets the left margin, so the axis title clears it
  for (double t : yticks) widest = std::max(widest, tick_label(log_y ? std::pow(10.0, t) : t).size());
  // font 14 (titles 16): about 8 px per character, which sets the margins
  const int L = 40 + static_cast<int>(widest) * 8, R = 44 + static_cast<int>(longest) * 8, W = 560 + R, H = 400, T = 40,
            B = 54;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double a) { return T + (1 - (a - y0) / (y1 - y0)) * (H - T - B); };  // a in axis units
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" {} font-size=\"14\">\n", W, H, kFont);
  s += fmt::format("<text x=\"10\" y=\"24\" font-size=\"16\" font-weight=\"bold\">{}</text>\n", escape(title));
  for (double t : yticks) {
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>\n", L, W - R, py(t),
                     py(t));
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", L - 6, py(t) + 4,
                     tick_label(log_y ? std::pow(10.0, t) : t));
  }
  for (double t : xticks) {
    if (log_x)
      s +=
          fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#eee\"/>\n", px(t), T, H - B);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(t), H - B + 18,
                     tick_label(log_x ? std::pow(10.0, t) : t));
  }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", L, T,
                   W - L - R, H - T - B);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (L + W - R) / 2, H - 12,
                   escape(x_label));
  s += fmt::format("<text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{}</text>\n",
                   (T + H - B) / 2, (T + H - B) / 2, escape(y_label));
  size_t guides = 0;
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& se = series[k];
    std::string pts;
    for (size_t i = 0; i < se.x.size() && i < se.y.size(); ++i)
      if (drawn(se, i, log_x)) pts += fmt::format("{:.1f},{:.1f} ", px(fx(se.x[i])), py(fy(se.y[i])));
    // guides: grey, each with its own dash pattern so that the legend tells them apart
    const char* dashes[] = {"6,4", "2,3", "10,3,2,3"};
    const std::string color = se.dashed ? "#777" : colors[k % 6];
    const std::string style = se.dashed
                                  ? fmt::format("stroke-width=\"1.2\" stroke-dasharray=\"{}\"", dashes[guides++ % 3])
                                  : std::string("stroke-width=\"1.8\"");
    s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" {}/>\n", pts, color, style);
    s += fmt::format(
        "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" {4}/><text x=\"{5}\" y=\"{6}\">{7}</text>\n",
        W - R + 12, W - R + 26, T + 11 + 22 * k, color, style, W - R + 32, T + 16 + 22 * k, escape(se.name));
  }
  for (const Marker& m : options.markers) {
    if (!std::isfinite(m.x) || (log_x && m.x <= 0) || fx(m.x) < x0 || fx(m.x) > x1) continue;
    s += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#555\" stroke-dasharray=\"5,4\"/>\n"
        "<text x=\"{3:.1f}\" y=\"{4}\" fill=\"#555\">{5}</text>\n",
        px(fx(m.x)), T, H - B, px(fx(m.x)) + 4, T + 14, escape(m.label));
  }
  return s + "</svg>\n";
}

std::string decision_boundary_svg(const Tensor& probs, const Tensor& points, const Tensor& labels,
                                  const std::string& title) {
  MG_CHECK(probs.dim() == 2 && points.dim() == 2 && points.size(1) == 2 && labels.numel() == points.size(0), ShapeError,
           "decision_boundary_svg: expected probs (H, W), points (N, 2), labels (N,), got {}, {}, {}",
           shape_str(probs.shape()), shape_str(points.shape()), shape_str(labels.shape()));
  const int S = 480, pad = 40;
  const int64_t H = probs.size(0), W = probs.size(1);
  const std::vector<double> p = probs.to_vector<double>(), xy = points.to_vector<double>(),
                            lab = labels.to_vector<double>();
  std::string s =
      fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" {} font-size=\"12\">\n",
                  S + 2 * pad, S + 2 * pad, kFont);
  s += fmt::format("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", escape(title));
  const double cw = static_cast<double>(S) / W, ch = static_cast<double>(S) / H;
  for (int64_t r = 0; r < H; ++r)
    for (int64_t c = 0; c < W; ++c)
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n",
                       pad + c * cw, pad + r * ch, cw + 0.5, ch + 0.5,
                       hex(interpolate(kDiverging, 0.2 + 0.6 * p[r * W + c])));
  for (int64_t i = 0; i < points.size(0); ++i)
    s += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\" stroke=\"white\" stroke-width=\"0.7\"/>\n",
        pad + (xy[2 * i] + 1) / 2 * S, pad + (1 - xy[2 * i + 1]) / 2 * S, lab[i] > 0.5 ? "#b2182b" : "#2166ac");
  return s + "</svg>\n";
}

}  // namespace mg::viz
