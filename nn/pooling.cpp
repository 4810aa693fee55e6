#include "minigrad/nn/pooling.h"

#include <cmath>

namespace mg::nn {

MaxPool2d::MaxPool2d(Size2 kernel_size, MaxPool2dOptions options) : kernel_size(kernel_size), options(options) {}

AvgPool2d::AvgPool2d(Size2 kernel_size, AvgPool2dOptions options) : kernel_size(kernel_size), options(options) {}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 output_size) : output_size(output_size) {
  MG_CHECK(output_size.h >= 1 && output_size.w >= 1, ValueError,
           "AdaptiveAvgPool2d: output_size must be >= 1, got ({}, {})", output_size.h, output_size.w);
}

Upsample::Upsample(InterpolateOptions o) : options(std::move(o)) {
  // what can be checked without an input; interpolate checks the rest against each input
  const InterpolateMode m = options.mode;
  MG_CHECK(options.size.empty() != options.scale_factor.empty(), ValueError,
           "Upsample: give either size or scale_factor, not {}", options.size.empty() ? "neither" : "both");
  for (int64_t v : options.size) MG_CHECK(v > 0, ValueError, "Upsample: sizes must be positive, got {}", v);
  for (double f : options.scale_factor)
    MG_CHECK(std::isfinite(f) && f > 0, ValueError, "Upsample: scale factors must be finite and positive, got {}", f);
  MG_CHECK(!options.align_corners ||
               (m == InterpolateMode::Linear || m == InterpolateMode::Bilinear || m == InterpolateMode::Bicubic),
           ValueError, "Upsample: align_corners only applies to linear, bilinear and bicubic, not \"{}\"",
           interpolate_mode_name(m));
  MG_CHECK(!options.recompute_scale_factor.value_or(false) || options.size.empty(), ValueError,
           "Upsample: recompute_scale_factor applies to a scale_factor, not to an explicit size");
}

std::string Upsample::extra_repr() const {
  auto list = [](const auto& v) {
    if (v.size() == 1) return fmt::format("{}", v[0]);
    std::string s = "(";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fmt::format("{}", v[i]);
    return s + ")";
  };
  std::string r = options.size.empty() ? "scale_factor=" + list(options.scale_factor) : "size=" + list(options.size);
  r += fmt::format(", mode='{}'", interpolate_mode_name(options.mode));
  if (options.align_corners) r += *options.align_corners ? ", align_corners=True" : ", align_corners=False";
  return r;
}

}  // namespace mg::nn
