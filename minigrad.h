#pragma once
// minigrad: everything in one include. The layers, each depending only on those above it here:
//   tensor/    numbers: Tensor, its views and kernels              (knows nothing of gradients)
//   autograd/  Variable, the tape, derivative rules, gradcheck
//   nn/        Module and layers, attention, GPT, save/load
//   optim/     optimizers, schedules, clipping, checkpoints
// (viz/, pictures of plain tensors, is included separately: "viz/svg.h", "viz/report.h", ...)
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tensor/safetensors.h"
#include "tensor/tensor.h"

#include "autograd/dot.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/variable.h"

#include "nn/attention.h"
#include "nn/capture.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/embedding.h"
#include "nn/gpt.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/normalization.h"
#include "nn/pooling.h"
#include "nn/rnn.h"
#include "nn/serialize.h"
#include "nn/transformer.h"

#include "optim/adam.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"
#include "optim/scheduler.h"
#include "optim/sgd.h"
