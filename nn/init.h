#pragma once
// Weight initialisation, with PyTorch's formulas (torch.nn.init). Each fills a parameter's data
// in place from a Generator, so a seeded model starts from the same numbers every time.
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
/// (fan_in, fan_out) of a weight: (in, out) for (out, in); receptive field sizes multiply in.
std::pair<int64_t, int64_t> fans(const Shape& shape);

}  // namespace mg::nn::init
