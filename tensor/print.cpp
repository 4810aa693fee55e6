// Printing tensors the way PyTorch 1.13 does (torch/_tensor_str.py), so that a printout here and
// one from PyTorch can be compared by eye:
//   - one format for all elements, chosen from the nonzero finite values: integers-valued floats
//     as "3.", others with 4 decimals, and scientific notation ("5.0000e-05") when the largest is
//     over 1000 times the smallest, or above 1e8, or (non-integers) the smallest below 1e-4;
//   - every element right-aligned to the widest; nan, inf, -inf as such;
//   - past 1000 elements, only the first and last 3 of each dim, with "..." between;
//   - rows wrapped at 80 columns; the dtype named unless it is float32, int64 or bool; an empty
//     tensor shows its size (unless it is (0,)) and any dtype but float32.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "minigrad/tensor/tensor.h"

namespace mg {
namespace {

constexpr int64_t kThreshold = 1000;  // summarise past this many elements
constexpr int64_t kEdgeItems = 3;     // shown at each end of a summarised dim
constexpr int64_t kLineWidth = 80;

// t[i] along dim 0, a view
Tensor row(const Tensor& t, int64_t i) { return t.narrow(0, i, 1).squeeze(0); }

// The elements a printout shows, in order (all of them, or the edges of each dim when summarised).
void shown_elements(const Tensor& t, bool summarize, std::vector<Tensor>& out) {
  if (t.dim() == 0) {
    out.push_back(t);
    return;
  }
  const int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    shown_elements(row(t, i), summarize, out);
  }
}

// One format for every element of a tensor, as PyTorch's _Formatter chooses it.
struct Formatter {
  bool floating = false, int_mode = true, sci_mode = false;
  bool boolean = false;
  size_t width = 1;

  Formatter(DType dtype, const std::vector<Tensor>& shown)
      : floating(is_floating_point(dtype)), boolean(dtype == DType::Bool) {
    if (!floating) {
      for (const Tensor& e : shown) width = std::max(width, plain(e).size());
      return;
    }
    std::vector<double> finite;  // the nonzero finite values
    for (const Tensor& e : shown) {
      const double v = e.item();
      if (std::isfinite(v) && v != 0) finite.push_back(v);
    }
    if (finite.empty()) return;
    double lo = INFINITY, hi = 0;
    for (double v : finite) {
      lo = std::min(lo, std::abs(v)), hi = std::max(hi, std::abs(v));
      if (v != std::ceil(v)) int_mode = false;
    }
    sci_mode = hi / lo > 1000.0 || hi > 1e8 || (!int_mode && lo < 1e-4);
    for (double v : finite)
      width = std::max(width, sci_mode   ? fmt::format("{:.4e}", v).size()
                              : int_mode ? fmt::format("{:.0f}", v).size() + 1
                                         : fmt::format("{:.4f}", v).size());
  }

  // An integer or bool element as PyTorch writes it.
  std::string plain(const Tensor& e) const {
    if (boolean) return e.item() != 0 ? "True" : "False";
    return fmt::format("{}", e.to_vector<int64_t>()[0]);  // from int64: a double holds only 53 bits
  }

  std::string format(const Tensor& e) const {
    std::string s;
    if (!floating) {
      s = plain(e);
    } else {
      const double v = e.item();
      if (std::isnan(v))
        s = "nan";
      else if (std::isinf(v))
        s = v > 0 ? "inf" : "-inf";
      else if (sci_mode)
        s = fmt::format("{:.4e}", v);
      else if (int_mode)
        s = fmt::format("{:.0f}.", v);
      else
        s = fmt::format("{:.4f}", v);
    }
    return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
  }
};

std::string body(const Tensor& t, int64_t indent, bool summarize, const Formatter& f) {
  if (t.dim() == 0) return f.format(t);
  const int64_t n = t.size(0);
  const bool cut = summarize && n > 2 * kEdgeItems;
  if (t.dim() == 1) {
    const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / static_cast<int64_t>(f.width + 2));
    std::vector<std::string> items;
    for (int64_t i = 0; i < n; ++i) {
      if (cut && i == kEdgeItems) {
        items.push_back(" ...");
        i = n - kEdgeItems;
      }
      items.push_back(f.format(row(t, i)));
    }
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += i % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
      out += items[i];
    }
    return out + "]";
  }
  // rows of a matrix on lines of their own; blocks of higher dims apart by dim - 1 newlines
  const std::string between = "," + std::string(t.dim() - 1, '\n') + std::string(indent + 1, ' ');
  std::string out = "[";
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) out += between;
    if (cut && i == kEdgeItems) {
      out += "..." + between;
      i = n - kEdgeItems;
    }
    out += body(row(t, i), indent + 1, summarize, f);
  }
  return out + "]";
}

}  // namespace

std::string format_tensor(const Tensor& t, const std::vector<std::string>& suffixes_in) {
  if (!t.defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int64_t indent = static_cast<int64_t>(prefix.size());
  std::vector<std::string> suffixes;
  std::string values;
  if (t.numel() == 0) {
    values = "[]";
    if (t.dim() != 1) suffixes.push_back("size=" + shape_str(t.shape()));
    if (t.dtype() != DType::Float32) suffixes.push_back(fmt::format("dtype={}", dtype_name(t.dtype())));
  } else {
    const bool summarize = t.numel() > kThreshold;
    std::vector<Tensor> shown;
    shown_elements(t, summarize, shown);
    values = body(t, indent, summarize, Formatter(t.dtype(), shown));
    if (t.dtype() != DType::Float32 && t.dtype() != DType::Int64 && t.dtype() != DType::Bool)
      suffixes.push_back(fmt::format("dtype={}", dtype_name(t.dtype())));
  }
  suffixes.insert(suffixes.end(), suffixes_in.begin(), suffixes_in.end());
  std::string out = prefix + values;
  const size_t last_newline = out.rfind('\n');
  int64_t last_line =
      static_cast<int64_t>(last_newline == std::string::npos ? out.size() + 1 : out.size() - last_newline + 1);
  for (const std::string& s : suffixes) {
    const int64_t len = static_cast<int64_t>(s.size());
    if (last_line + len + 2 > kLineWidth) {
      out += ",\n" + std::string(indent, ' ') + s;
      last_line = indent + len;
    } else {
      out += ", " + s;
      last_line += len + 2;
    }
  }
  return out + ")";
}

std::string Tensor::str() const { return format_tensor(*this, {}); }

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace mg
