#pragma once
// Training checkpoints: the model's weights, the optimizer's state and the step counter in one
// safetensors file, so an interrupted run resumes exactly where it stopped.
//
// Inside the file: each parameter under its dotted name ("fc1.weight", as nn::save writes it,
// so the file still opens in PyTorch), each optimizer state tensor as
// "optimizer.<param name>.<state>" (e.g. "optimizer.fc1.weight.exp_avg"), and in the metadata
// the optimizer's name, its hyper-parameters ("optimizer.beta2"), the step, and for each group g
// its size ("group.g.params"), learning rate ("lr.g") and weight decay ("weight_decay.g"); with a
// learning-rate scheduler, its name, settings, step and base rates ("scheduler.*").
//
// Loading checks that the optimizer is the same kind with the same groups and settings (a
// mismatch is a FileError naming both values) and restores its learning rates and, when given,
// the scheduler's position: the resumed run takes the steps the uninterrupted one would have.
//
// Randomness resumes too: the state of every generator the run draws from (dropout masks,
// sampling, shuffles; by default mg::default_generator()) is saved in the metadata as
// "rng.<name>" and restored on load, so a run with dropout continues with the masks it would have
// drawn. A generator asked for that the file does not hold is a FileError.
#include <string>
#include <utility>
#include <vector>

#include "minigrad/nn/module.h"
#include "minigrad/optim/optimizer.h"
#include "minigrad/optim/scheduler.h"
#include "minigrad/tensor/generator.h"
#include "minigrad/tensor/safetensors.h"

namespace mg::optim {

/// The random number generators a run draws from, each under a name ("default", "dropout",
/// "batches"): save_checkpoint writes their states, load_checkpoint sets them back.
using NamedGenerators = std::vector<std::pair<std::string, Generator*>>;

/// Write model + optimizer (+ scheduler) + step + the generators' states to `path`, atomically.
void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer& optimizer, int64_t step,
                     const LRScheduler* scheduler = nullptr,
                     const NamedGenerators& generators = {{"default", &default_generator()}});

/// Restore model + optimizer (+ scheduler) from `path` and return the step. Everything is
/// validated first (file format, parameter names and shapes, optimizer type, groups and
/// hyper-parameters, state names and shapes, the scheduler's kind and settings); on any error a
/// FileError explains it and nothing is changed. A file saved with a scheduler needs one to
/// load into, and a scheduler needs a file that has its state.
int64_t load_checkpoint(const std::string& path, nn::Module& model, Optimizer& optimizer,
                        LRScheduler* scheduler = nullptr,
                        const NamedGenerators& generators = {{"default", &default_generator()}});

/// load_checkpoint on a file already read (parse_safetensors, for bytes in memory); `name` names it
/// in errors.
int64_t load_checkpoint_from(const SafeTensors& file, const std::string& name, nn::Module& model, Optimizer& optimizer,
                             LRScheduler* scheduler = nullptr,
                             const NamedGenerators& generators = {{"default", &default_generator()}});

}  // namespace mg::optim
