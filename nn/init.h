#pragma once
// Weight initialisation, with PyTorch's formulas (torch.nn.init). Each fills a parameter's data
// in place from a Generator, so a seeded model starts from the same numbers every time.
#include <optional>
#include <string>

#include "minigrad/autograd/variable.h"

namespace mg::nn::init {

/// U(low, high).
void uniform_(const Variable& p, double low, double high, Generator& gen = default_generator());
/// N(mean, std^2).
void normal_(const Variable& p, double mean = 0, double std = 1, Generator& gen = default_generator());
/// All zeros.
void zeros_(const Variable& p);
/// All ones.
void ones_(const Variable& p);
/// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio 2010).
void xavier_uniform_(const Variable& p, double gain = 1, Generator& gen = default_generator());
/// U(-b, b) with b = sqrt(6 / ((1 + a^2) fan_in)) (He et al. 2015, leaky-ReLU slope a).
/// nn.Linear uses a = sqrt(5), which gives b = 1 / sqrt(fan_in).
void kaiming_uniform_(const Variable& p, double a = 0, Generator& gen = default_generator());
/// N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot & Bengio 2010).
void xavier_normal_(const Variable& p, double gain = 1, Generator& gen = default_generator());
/// The gain PyTorch recommends for a nonlinearity (torch.nn.init.calculate_gain): 1 for "linear",
/// "sigmoid" and convolutions, 5/3 for "tanh", sqrt(2) for "relu", sqrt(2 / (1 + param^2)) for
/// "leaky_relu" (param the negative slope, 0.01 when absent), 3/4 for "selu".
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);
/// N(0, std^2) with std = gain / sqrt(fan), fan = fan_in ("fan_in") or fan_out ("fan_out"), gain =
/// calculate_gain(nonlinearity, a) (He et al. 2015; torch.nn.init.kaiming_normal_).
void kaiming_normal_(const Variable& p, double a = 0, const std::string& mode = "fan_in",
                     const std::string& nonlinearity = "leaky_relu", Generator& gen = default_generator());
/// N(mean, std^2) restricted to [a, b] (torch.nn.init.trunc_normal_): a uniform draw pushed through
/// the normal's inverse CDF between CDF(a) and CDF(b), so nothing is redrawn however narrow [a, b].
void trunc_normal_(const Variable& p, double mean = 0, double std = 1, double a = -2, double b = 2,
                   Generator& gen = default_generator());
/// (fan_in, fan_out) of a weight: (in, out) for (out, in); receptive field sizes multiply in.
std::pair<int64_t, int64_t> fans(const Shape& shape);

}  // namespace mg::nn::init
