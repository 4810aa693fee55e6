// viz/: what the pictures promise a reader. Cell annotations show enough decimals to tell 0.997
// from 1, chart ticks sit on round values and leave room for the axis title, and the index page
// scales wide pictures (the autograd graph) to the page.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "helpers.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"

using namespace mg;

namespace {

// The text of every <text> element, in order.
std::vector<std::string> texts(const std::string& svg) {
  std::vector<std::string> out;
  const std::regex re("<text[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

// The y tick labels of a line chart: right-aligned text at the left margin, with their x.
std::vector<std::pair<double, std::string>> y_ticks(const std::string& svg) {
  std::vector<std::pair<double, std::string>> out;
  const std::regex re("<text x=\"([0-9.]+)\" y=\"[0-9.]+\" text-anchor=\"end\">([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.emplace_back(std::stod((*it)[1]), (*it)[2]);
  return out;
}

}  // namespace

TEST(Heatmap, AttentionCellsShowThreeDecimals) {
  // 0.997 must not print as 1.00: weights in [0, 1] get three decimals in 32-pixel cells
  const std::string svg = viz::heatmap_svg(tensor({0.997f, 0.001f, 0.5f, 0.5f}, {2, 2}), {.title = "attention"});
  const std::vector<std::string> t = texts(svg);
  EXPECT_NE(std::find(t.begin(), t.end(), "0.997"), t.end());
  EXPECT_EQ(std::find(t.begin(), t.end(), "1.00"), t.end());
  // weights outside [0, 1] keep two; an explicit choice wins
  const std::vector<std::string> w = texts(viz::heatmap_svg(tensor({-1.234f, 2.5f}, {1, 2}), {.diverging = true}));
  EXPECT_NE(std::find(w.begin(), w.end(), "-1.23"), w.end());
  const std::vector<std::string> e = texts(viz::heatmap_svg(tensor({0.25f}, {1, 1}), {.decimals = 1}));
  EXPECT_NE(std::find(e.begin(), e.end(), "0.2"), e.end());
  // small cells have no room for three
  const std::vector<std::string> s = texts(viz::heatmap_svg(tensor({0.997f}, {1, 1}), {.annotate = 1, .cell = 18}));
  EXPECT_NE(std::find(s.begin(), s.end(), "1.00"), s.end());
}

TEST(LineChart, LogTicksAreRoundDecadesAndClearTheAxisTitle) {
  // a loss falling from 2.3 to 3e-5: ticks at powers of ten covering the range
  std::vector<double> y;
  for (int i = 0; i < 100; ++i) y.push_back(2.3 * std::pow(10.0, -5.0 * i / 99));
  const std::string svg =
      viz::line_chart_svg({viz::Series::over_steps("loss", y)},
                          {.title = "t", .x_label = "step", .y_label = "cross-entropy", .log_y = true});
  const auto ticks = y_ticks(svg);
  ASSERT_GE(ticks.size(), 3u);
  for (auto& [x, label] : ticks) {
    const double v = std::stod(label);
    EXPECT_NEAR(std::log10(v), std::round(std::log10(v)), 1e-12) << label;  // 1e-5, 0.0001, ..., 10
  }
  EXPECT_EQ(ticks.front().second, "1e-5");
  EXPECT_EQ(ticks.back().second, "10");
  // the rotated axis title sits left of the widest tick label (at least 7 px per character)
  const std::smatch m = [&] {
    std::smatch r;
    std::regex_search(svg, r, std::regex("rotate\\(-90 ([0-9.]+) "));
    return r;
  }();
  const double title_x = std::stod(m[1]);
  for (auto& [x, label] : ticks) EXPECT_LT(title_x + 8, x - 7.0 * static_cast<double>(label.size())) << label;
}

TEST(LineChart, LinearTicksAreOneTwoOrFiveTimesAPowerOfTen) {
  const std::string svg = viz::line_chart_svg({viz::Series::over_steps("gap", {3.1, 7.7, 12.4, 14.36})},
                                              {.title = "t", .x_label = "step", .y_label = "gap"});
  std::vector<double> v;
  for (auto& [x, label] : y_ticks(svg)) v.push_back(std::stod(label));
  ASSERT_GE(v.size(), 3u);
  const double step = v[1] - v[0];
  for (size_t i = 1; i < v.size(); ++i) EXPECT_NEAR(v[i] - v[i - 1], step, 1e-9);
  const double mant = step / std::pow(10.0, std::floor(std::log10(step)));
  EXPECT_TRUE(std::abs(mant - 1) < 1e-9 || std::abs(mant - 2) < 1e-9 || std::abs(mant - 5) < 1e-9) << step;
  EXPECT_LE(v.front(), 3.1);  // the axis covers the data
  EXPECT_GE(v.back(), 14.36);
}

TEST(LineChart, LogAxisCoversDataOverManyDecades) {
  // 2.3 down to 1e-7: nine decades, ticks thinned to every second one. The top tick must still
  // be at or above the data (it was 0.1, with the curve drawn above the frame).
  std::vector<double> y;
  for (int i = 0; i < 100; ++i) y.push_back(2.3 * std::pow(10.0, -7.4 * i / 99));
  const auto ticks = y_ticks(viz::line_chart_svg({viz::Series::over_steps("loss", y)},
                                                 {.title = "t", .x_label = "step", .y_label = "loss", .log_y = true}));
  ASSERT_GE(ticks.size(), 2u);
  EXPECT_LE(std::stod(ticks.front().second), 1e-7 * 0.5);
  EXPECT_GE(std::stod(ticks.back().second), 2.3);
}

TEST(LineChart, LogXAxisHasRoundTicksAndPlacesPointsByTheirLogarithm) {
  // d_k = 2 ... 1024 against sqrt(d_k): on log-log axes a straight line
  std::vector<double> x, y;
  for (double d = 2; d <= 1024; d *= 2) x.push_back(d), y.push_back(std::sqrt(d));
  viz::Series guide{"slope 1/2", x, y, true};
  x.insert(x.begin(), 0.0), y.insert(y.begin(), 1.0);  // x = 0 has no place on a log axis: left out
  const std::string svg = viz::line_chart_svg(
      {{"std of q.k", x, y}, guide}, {.title = "t", .x_label = "d_k", .y_label = "std", .log_y = true, .log_x = true});
  // x tick labels: the text under the frame (400 - 54 + 18)
  std::vector<std::pair<double, std::string>> xt;
  const std::regex re("<text x=\"([0-9.]+)\" y=\"364\" text-anchor=\"middle\">([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    xt.emplace_back(std::stod((*it)[1]), (*it)[2]);
  ASSERT_EQ(xt.size(), 3u);  // 2, 5, 10, ..., 1000 would be 9: only the powers of ten
  EXPECT_EQ(xt[0].second, "10");
  EXPECT_EQ(xt[1].second, "100");
  EXPECT_EQ(xt[2].second, "1000");
  EXPECT_NEAR(xt[1].first - xt[0].first, xt[2].first - xt[1].first, 0.2);  // decades equally spaced
  // the data line has 10 points (x = 0 dropped) and lies straight: equal steps in both directions
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("<polyline points=\"([^\"]*)\" fill=\"none\" stroke=\"#1f77b4\"")));
  std::vector<double> px, py;
  std::istringstream pts(m[1].str());
  for (std::string p; pts >> p;)
    px.push_back(std::stod(p.substr(0, p.find(',')))), py.push_back(std::stod(p.substr(p.find(',') + 1)));
  ASSERT_EQ(px.size(), 10u);
  for (size_t i = 2; i < px.size(); ++i) {
    EXPECT_NEAR(px[i] - px[i - 1], px[1] - px[0], 0.15);
    EXPECT_NEAR(py[i] - py[i - 1], py[1] - py[0], 0.15);
  }
  // the guide is dashed, in its legend too
  size_t dashes = 0;
  for (size_t at = svg.find("stroke-dasharray=\"6,4\""); at != std::string::npos;
       at = svg.find("stroke-dasharray=\"6,4\"", at + 1))
    ++dashes;
  EXPECT_EQ(dashes, 2u);
}

TEST(LineChart, SeveralGuidesEachHaveTheirOwnDashPattern) {
  // three dashed guides beside a curve: the legend can only tell them apart by their dashes
  const std::vector<double> x = {1, 2};
  const std::string svg = viz::line_chart_svg(
      {{"data", x, {1, 2}}, {"unigram", x, {3, 3}, true}, {"bigram", x, {2, 2}, true}, {"slope", x, {1, 3}, true}},
      {.title = "t", .x_label = "x", .y_label = "y"});
  std::set<std::string> patterns;
  const std::regex re("stroke=\"#777\" stroke-width=\"1.2\" stroke-dasharray=\"([0-9,]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    patterns.insert((*it)[1]);
  EXPECT_EQ(patterns.size(), 3u) << svg;  // each used twice: the line and its legend
  EXPECT_EQ(svg.find("stroke=\"#777\" stroke-width=\"1.8\""), std::string::npos);  // no guide drawn as data
}

TEST(LineChart, NearlyConstantSeriesEndsWithTicksAroundIt) {
  // values one rounding step apart: a tick step that small could not advance (it hung, growing
  // memory); now the flat range is widened as for a constant series
  for (double v : {1.0, 1e20, -3e-8, 0.0}) {
    const double next = std::nextafter(v, INFINITY);
    const auto ticks = y_ticks(viz::line_chart_svg({viz::Series::over_steps("flat", {v, next, v})},
                                                   {.title = "t", .x_label = "step", .y_label = "y"}));
    ASSERT_GE(ticks.size(), 2u) << v;
    EXPECT_LE(ticks.size(), 12u) << v;
    EXPECT_LE(std::stod(ticks.front().second), v + 1e-6 * std::abs(v)) << v;  // labels have 6 digits
    EXPECT_GE(std::stod(ticks.back().second), next - 1e-6 * std::abs(v)) << v;
  }
}

TEST(Report, IndexScalesPicturesToThePage) {
  const std::string dir = testing::TempDir() + "/viz_report";
  {
    viz::Report rep(dir, "t");
    rep.add_svg("a.svg", viz::heatmap_svg(tensor({1.f}, {1, 1}), {}), "a");
  }
  std::ifstream in(dir + "/index.html");
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(html, testing::HasSubstr("img{max-width:100%;height:auto}"));
  EXPECT_THAT(html, testing::HasSubstr("<img src=\"a.svg\""));
}

TEST(AttentionGraph, OneEdgePerWeightAboveTheThresholdAndTypedErrors) {
  // causal weights over 3 tokens: row i is query i. Arcs: (1 reads 0) 0.9, (2 reads 0) 0.5,
  // (2 reads 1) 0.46; loops: 0 reads 0 (1.0), 1 reads 1 (0.1); 2 reads 2 (0.04) is under 0.05.
  const Tensor w = from_vector<double>({1.0, 0, 0, 0.9, 0.1, 0, 0.5, 0.46, 0.04}, {3, 3});
  const std::string svg = viz::attention_graph_svg(w, {.title = "g", .labels = {"a", "b", "c"}});
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("marker-end"), 3u);                 // the three arcs, each ending in an arrowhead
  EXPECT_EQ(count("fill=\"none\" stroke"), 3u + 2u);  // arcs and loops
  EXPECT_NE(svg.find("<title>b reads a: 0.900</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>c reads b: 0.460</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>a reads a: 1.000</title>"), std::string::npos);
  EXPECT_EQ(svg.find("c reads c"), std::string::npos);
  // a higher threshold drops the small ones
  const std::string few = viz::attention_graph_svg(w, {.min_weight = 0.5});
  EXPECT_EQ(few.find("reads 1"), std::string::npos);
  EXPECT_NE(few.find("<title>2 reads 0: 0.500</title>"), std::string::npos);
  // a later key is drawn below the line: its arc's control points lie under the nodes
  const std::string later = viz::attention_graph_svg(from_vector<double>({0, 1, 1, 0}, {2, 2}), {});
  EXPECT_NE(later.find("<title>0 reads 1: 1.000</title>"), std::string::npos);
  EXPECT_NE(later.find("<title>1 reads 0: 1.000</title>"), std::string::npos);
  EXPECT_THROW(viz::attention_graph_svg(zeros({2, 3}), {}), ShapeError);
  EXPECT_THROW(viz::attention_graph_svg(zeros({2, 2}), {.labels = {"a"}}), ShapeError);
  EXPECT_THROW(viz::attention_graph_svg(zeros({2, 2}), {.min_weight = 0}), ValueError);
  EXPECT_THROW(viz::attention_graph_svg(full({2, 2}, 1.5), {}), ValueError);
  EXPECT_THROW(viz::attention_graph_svg(full({2, 2}, NAN), {}), ValueError);
  EXPECT_THROW(viz::attention_graph_svg(zeros({513, 513}), {}), ValueError);  // T^2 edges, pixel sizes in int
  EXPECT_NO_THROW(viz::attention_graph_svg(zeros({0, 0}), {}));               // no tokens: an empty picture
}

TEST(AttentionGraph, TheSamePictureForEveryLayoutOfTheSameWeights) {
  // the weights as a transposed view, a strided slice and an offset narrow give the contiguous
  // weights' picture; float32 gives its float64 copy's; an expanded (stride 0) row its copy's
  const Tensor w = from_vector<double>({1.0, 0, 0, 0.9, 0.1, 0, 0.5, 0.46, 0.04}, {3, 3});
  const std::string ref = viz::attention_graph_svg(w, {.labels = {"a", "b", "c"}});
  const Tensor transposed = w.transpose(0, 1).contiguous().transpose(0, 1);  // non-contiguous, same values
  ASSERT_FALSE(transposed.is_contiguous());
  EXPECT_EQ(viz::attention_graph_svg(transposed, {.labels = {"a", "b", "c"}}), ref);
  Tensor wide = zeros({3, 6}, DType::Float64);  // every other column: stride 2
  for (int64_t k = 0; k < 3; ++k) wide.narrow(1, 2 * k, 1).copy_(w.narrow(1, k, 1));
  EXPECT_EQ(viz::attention_graph_svg(wide.slice(1, 0, 6, 2), {.labels = {"a", "b", "c"}}), ref);
  const Tensor padded = concat({zeros({1, 3}, DType::Float64), w}, 0);  // offset 3
  EXPECT_EQ(viz::attention_graph_svg(padded.narrow(0, 1, 3), {.labels = {"a", "b", "c"}}), ref);
  EXPECT_EQ(viz::attention_graph_svg(w.to(DType::Float32), {.labels = {"a", "b", "c"}}),
            viz::attention_graph_svg(w.to(DType::Float32).to(DType::Float64), {.labels = {"a", "b", "c"}}));
  const Tensor row = from_vector<double>({0.25, 0.75}, {1, 2});
  EXPECT_EQ(viz::attention_graph_svg(row.expand({2, 2}), {}),
            viz::attention_graph_svg(row.expand({2, 2}).contiguous(), {}));
}
