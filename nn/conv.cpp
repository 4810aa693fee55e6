#include "minigrad/nn/conv.h"

#include <cmath>

#include "minigrad/nn/init.h"

namespace mg::nn {
namespace {
void check_channels(int64_t in, int64_t out, int64_t groups, const char* layer) {
  MG_CHECK(in > 0 && out > 0, ValueError, "{}: channel counts must be positive, got in_channels={} out_channels={}",
           layer, in, out);
  MG_CHECK(groups >= 1 && in % groups == 0 && out % groups == 0, ValueError,
           "{}: groups={} must be >= 1 and divide in_channels={} and out_channels={}", layer, groups, in, out);
}
// weight ~ kaiming_uniform(a = sqrt 5) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)); bias the same bound
void reset_conv(const Variable& weight, const Variable& bias, Generator& gen) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), gen);
  if (bias.defined()) {
    const double b = 1 / std::sqrt(static_cast<double>(init::fans(weight.shape()).first));
    init::uniform_(bias, -b, b, gen);
  }
}
std::string padding_repr(const ConvPadding& p, bool two_d) {
  if (p.mode) return *p.mode == PaddingMode::Same ? "'same'" : "'valid'";
  return two_d ? fmt::format("({}, {})", p.h, p.w) : fmt::format("({},)", p.w);
}
}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Conv2dOptions o, Generator& gen)
    : in_channels(in), out_channels(out), kernel_size(k), options(std::move(o)) {
  check_channels(in, out, options.groups, "Conv2d");
  MG_CHECK(k.h > 0 && k.w > 0, ValueError, "Conv2d: kernel_size must be positive, got ({}, {})", k.h, k.w);
  conv2d_args(k.h, k.w, {options.stride, options.padding, options.dilation, options.groups},
              "Conv2d");  // padding's checks
  checked_numel({out, in / options.groups, k.h, k.w}, "Conv2d", 4);
  register_parameter("weight", weight, empty({out, in / options.groups, k.h, k.w}));
  if (options.bias) register_parameter("bias", bias, empty({out}));
  reset_parameters(gen);
}

void Conv2d::reset_parameters(Generator& gen) { reset_conv(weight, bias, gen); }

Variable Conv2d::forward(const Variable& x) const {
  return conv2d(x, weight, bias, {options.stride, options.padding, options.dilation, options.groups});
}

std::string Conv2d::extra_repr() const {
  std::string s = fmt::format("{}, {}, kernel_size=({}, {}), stride=({}, {})", in_channels, out_channels, kernel_size.h,
                              kernel_size.w, options.stride.h, options.stride.w);
  if (options.padding.mode.has_value() || options.padding.h || options.padding.w)
    s += ", padding=" + padding_repr(options.padding, true);
  if (options.dilation.h != 1 || options.dilation.w != 1)
    s += fmt::format(", dilation=({}, {})", options.dilation.h, options.dilation.w);
  if (options.groups != 1) s += fmt::format(", groups={}", options.groups);
  if (!options.bias) s += ", bias=false";
  return s;
}

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, Conv1dOptions o, Generator& gen)
    : in_channels(in), out_channels(out), kernel_size(k), options(std::move(o)) {
  check_channels(in, out, options.groups, "Conv1d");
  MG_CHECK(k > 0, ValueError, "Conv1d: kernel_size must be positive, got {}", k);
  MG_CHECK(options.padding.mode.has_value() || options.padding.h == options.padding.w, ValueError,
           "Conv1d: padding is one number, got ({}, {})", options.padding.h, options.padding.w);
  conv2d_args(1, k, {{1, options.stride}, options.padding, {1, options.dilation}, options.groups}, "Conv1d");
  checked_numel({out, in / options.groups, k}, "Conv1d", 4);
  register_parameter("weight", weight, empty({out, in / options.groups, k}));
  if (options.bias) register_parameter("bias", bias, empty({out}));
  reset_parameters(gen);
}

void Conv1d::reset_parameters(Generator& gen) { reset_conv(weight, bias, gen); }

Variable Conv1d::forward(const Variable& x) const {
  return conv1d(x, weight, bias, {options.stride, options.padding, options.dilation, options.groups});
}

std::string Conv1d::extra_repr() const {
  std::string s =
      fmt::format("{}, {}, kernel_size=({},), stride=({},)", in_channels, out_channels, kernel_size, options.stride);
  if (options.padding.mode.has_value() || options.padding.w) s += ", padding=" + padding_repr(options.padding, false);
  if (options.dilation != 1) s += fmt::format(", dilation=({},)", options.dilation);
  if (options.groups != 1) s += fmt::format(", groups={}", options.groups);
  if (!options.bias) s += ", bias=false";
  return s;
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, Size2 k, ConvTranspose2dOptions o, Generator& gen)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  check_channels(in, out, o.groups, "ConvTranspose2d");
  MG_CHECK(k.h > 0 && k.w > 0, ValueError, "ConvTranspose2d: kernel_size must be positive, got ({}, {})", k.h, k.w);
  checked_numel({in, out / o.groups, k.h, k.w}, "ConvTranspose2d", 4);
  register_parameter("weight", weight, empty({in, out / o.groups, k.h, k.w}));
  if (o.bias) register_parameter("bias", bias, empty({out}));
  reset_conv(weight, bias, gen);
}

Variable ConvTranspose2d::forward(const Variable& x) const {
  return conv_transpose2d(x, weight, bias,
                          {options.stride, options.padding, options.output_padding, options.groups, options.dilation});
}

std::string ConvTranspose2d::extra_repr() const {
  std::string s = fmt::format("{}, {}, kernel_size=({}, {}), stride=({}, {})", in_channels, out_channels, kernel_size.h,
                              kernel_size.w, options.stride.h, options.stride.w);
  if (options.padding.h || options.padding.w)
    s += fmt::format(", padding=({}, {})", options.padding.h, options.padding.w);
  if (options.output_padding.h || options.output_padding.w)
    s += fmt::format(", output_padding=({}, {})", options.output_padding.h, options.output_padding.w);
  if (options.dilation.h != 1 || options.dilation.w != 1)
    s += fmt::format(", dilation=({}, {})", options.dilation.h, options.dilation.w);
  if (options.groups != 1) s += fmt::format(", groups={}", options.groups);
  if (!options.bias) s += ", bias=False";
  return s;
}

ConvTranspose1d::ConvTranspose1d(int64_t in, int64_t out, int64_t k, ConvTranspose1dOptions o, Generator& gen)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  check_channels(in, out, o.groups, "ConvTranspose1d");
  MG_CHECK(k > 0, ValueError, "ConvTranspose1d: kernel_size must be positive, got {}", k);
  checked_numel({in, out / o.groups, k}, "ConvTranspose1d", 3);
  register_parameter("weight", weight, empty({in, out / o.groups, k}));
  if (o.bias) register_parameter("bias", bias, empty({out}));
  reset_conv(weight, bias, gen);
}

Variable ConvTranspose1d::forward(const Variable& x) const {
  return conv_transpose1d(x, weight, bias,
                          {options.stride, options.padding, options.output_padding, options.groups, options.dilation});
}

std::string ConvTranspose1d::extra_repr() const {
  std::string s =
      fmt::format("{}, {}, kernel_size=({},), stride=({},)", in_channels, out_channels, kernel_size, options.stride);
  if (options.padding) s += fmt::format(", padding=({},)", options.padding);
  if (options.output_padding) s += fmt::format(", output_padding=({},)", options.output_padding);
  if (options.dilation != 1) s += fmt::format(", dilation=({},)", options.dilation);
  if (options.groups != 1) s += fmt::format(", groups={}", options.groups);
  if (!options.bias) s += ", bias=False";
  return s;
}

}  // namespace mg::nn
