#include "minigrad/viz/terminal.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <unistd.h>

#include <fmt/format.h>

namespace mg::viz {

bool stdout_has_color() { return ::isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr; }

std::string terminal_heatmap(const Tensor& m, const std::vector<std::string>& rows,
                             const std::vector<std::string>& cols, int color) {
  MG_CHECK(m.dim() == 2, ShapeError, "terminal_heatmap: expected a 2-D tensor, got shape {}", shape_str(m.shape()));
  const bool use_color = color == -1 ? stdout_has_color() : color == 1;
  const int64_t R = m.size(0), C = m.size(1);
  const std::vector<double> v = m.to_vector<double>();
  double lo = INFINITY, hi = -INFINITY;
  for (double x : v)
    if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (hi == lo) hi = lo + 1;
  size_t w = 0;
  for (auto& r : rows) w = std::max(w, r.size());
  std::string out;
  if (!cols.empty()) {
    out += std::string(w + 1, ' ');
    for (int64_t c = 0; c < C; ++c)
      out += fmt::format("{:>8}", c < static_cast<int64_t>(cols.size()) ? cols[c].substr(0, 5) : "");
    out += "\n";
  }
  for (int64_t r = 0; r < R; ++r) {
    out += fmt::format("{:>{}} ", r < static_cast<int64_t>(rows.size()) ? rows[r] : "", w);
    for (int64_t c = 0; c < C; ++c) {
      const double x = v[r * C + c];
      if (!std::isfinite(x)) {
        out += "       -";  // masked (-inf)
        continue;
      }
      // halves: hi - lo overflows for values near +-DBL_MAX; a NaN t would index out of the ramps
      const double span = hi / 2 - lo / 2, t0 = span > 0 ? (x / 2 - lo / 2) / span : 0.5;
      const double t = std::isfinite(t0) ? std::clamp(t0, 0.0, 1.0) : 0.5;
      const std::string text = std::abs(x) >= 9.995 ? fmt::format("{:.1f}", x) : fmt::format("{:.2f}", x);
      if (use_color) {
        // two full blocks in a yellow-to-red 256-colour ramp, then the value
        static const int ramp[] = {230, 229, 221, 214, 208, 202, 196, 160, 124, 88};
        out += fmt::format(" \033[38;5;{}m\u2588\u2588\033[0m{:>5}", ramp[std::lround(t * 9)], text);
      } else {
        static const char* shade[] = {"  ", "\u2591\u2591", "\u2592\u2592", "\u2593\u2593", "\u2588\u2588"};
        out += fmt::format(" {}{:>5}", shade[std::lround(t * 4)], text);
      }
    }
    out += "\n";
  }
  out += fmt::format("{:>{}} range [{:.3g}, {:.3g}]\n", "", w, lo, hi);
  return out;
}

ProgressBar::ProgressBar(int64_t total, std::string label, int64_t every)
    : total_(std::max<int64_t>(total, 1)),
      every_(every > 0 ? every : std::max<int64_t>(1, total / 10)),
      label_(std::move(label)),
      tty_(::isatty(STDOUT_FILENO)),
      start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(int64_t step, double loss, double accuracy, int64_t tokens) {
  tokens_ += tokens;
  if (!tty_ && step % every_ != 0 && step != total_ && step != 1) return;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = step > 0 ? secs / step * (total_ - step) : 0;
  const int width = 24, filled = static_cast<int>(width * step / total_);
  std::string bar;
  for (int i = 0; i < width; ++i) bar += i < filled ? "\u2588" : "\u2591";
  std::string line = fmt::format("{} {} {:>5}/{} loss {:.4f}", label_, bar, step, total_, loss);
  if (accuracy >= 0) line += fmt::format("  acc {:5.1f}%", 100 * accuracy);
  if (tokens_ > 0 && secs > 0) line += fmt::format("  {:.0f} tok/s", tokens_ / secs);
  line += fmt::format("  {:.1f}s, ETA {:.1f}s", secs, eta);
  if (tty_)
    std::printf("\r\033[K%s", line.c_str());
  else
    std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void ProgressBar::finish() {
  if (tty_) std::printf("\n");
  std::fflush(stdout);
}

}  // namespace mg::viz
