#pragma once
// Training checkpoints: the model's weights, the optimizer's state and the step counter in one
// safetensors file, so an interrupted run resumes exactly where it stopped.
//
// Inside the file: each parameter under its dotted name ("fc1.weight", as nn::save writes it,
// so the file still opens in PyTorch), each optimizer state tensor as
// "optimizer.<param name>.<state>" (e.g. "optimizer.fc1.weight.exp_avg"), and in the metadata
// the optimizer's name, the step and each group's learning rate.
#include <string>

#include "minigrad/nn/module.h"
#include "minigrad/optim/optimizer.h"
#include "minigrad/tensor/safetensors.h"

namespace mg::optim {

/// Write model + optimizer + step to `path`, atomically.
void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer& optimizer, int64_t step);

/// Restore model + optimizer from `path` and return the step. Everything is validated first
/// (file format, parameter names and shapes, optimizer type, state names and shapes); on any
/// error a FileError explains it and neither the model nor the optimizer is changed.
int64_t load_checkpoint(const std::string& path, nn::Module& model, Optimizer& optimizer);

/// load_checkpoint on a file already read (parse_safetensors, for bytes in memory); `name` names it
/// in errors.
int64_t load_checkpoint_from(const SafeTensors& file, const std::string& name, nn::Module& model, Optimizer& optimizer);

}  // namespace mg::optim
