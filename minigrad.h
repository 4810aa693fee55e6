#pragma once
// minigrad: everything in one include. The layers, each depending only on those above it here:
//   tensor/       numbers: Tensor, its views and kernels            (knows nothing of gradients)
//   autograd/     Variable, the tape, derivative rules, gradcheck
//   nn/           Module and layers, attention, Transformer layers, save/load
//   inspect/      looking into a running model: attention capture, head scores, telemetry
//   optim/        optimizers, schedules, clipping, checkpoints
//   data/         datasets, DataLoader, samplers, the WordPiece and GPT-2 tokenizers (needs only tensor/)
//   models/       whole architectures (models::GPT, Decoder, BertModel), Hugging Face checkpoints
//   distributed/  data-parallel training over processes on MPI (built when MPI is found)
// (viz/, pictures of plain tensors, is included separately: "viz/svg.h", "viz/report.h", ...)
#include "minigrad/tensor/atomic_file.h"
#include "minigrad/tensor/cpu.h"
#include "minigrad/tensor/ops.h"
#include "minigrad/tensor/parallel.h"
#include "minigrad/tensor/safetensors.h"
#include "minigrad/tensor/tensor.h"

#include "minigrad/autograd/autocast.h"
#include "minigrad/autograd/dot.h"
#include "minigrad/autograd/dual.h"
#include "minigrad/autograd/engine.h"
#include "minigrad/autograd/function.h"
#include "minigrad/autograd/functional.h"
#include "minigrad/autograd/grad_mode.h"
#include "minigrad/autograd/gradcheck.h"
#include "minigrad/autograd/observer.h"
#include "minigrad/autograd/ops.h"
#include "minigrad/autograd/variable.h"

#include "minigrad/inspect/backward_recorder.h"
#include "minigrad/inspect/capture.h"
#include "minigrad/inspect/head_scores.h"
#include "minigrad/inspect/telemetry.h"
#include "minigrad/nn/attention.h"
#include "minigrad/nn/container.h"
#include "minigrad/nn/conv.h"
#include "minigrad/nn/embedding.h"
#include "minigrad/nn/init.h"
#include "minigrad/nn/layers.h"
#include "minigrad/nn/linear.h"
#include "minigrad/nn/module.h"
#include "minigrad/nn/normalization.h"
#include "minigrad/nn/pooling.h"
#include "minigrad/nn/rnn.h"
#include "minigrad/nn/serialize.h"
#include "minigrad/nn/summary.h"
#include "minigrad/nn/transformer.h"

#include "minigrad/models/bert.h"
#include "minigrad/models/decoder.h"
#include "minigrad/models/gpt.h"
#include "minigrad/models/pretrained.h"
#include "minigrad/models/sentence.h"

#include "minigrad/data/auto_tokenizer.h"
#include "minigrad/data/bpe.h"
#include "minigrad/data/dataloader.h"
#include "minigrad/data/sampler.h"
#include "minigrad/data/wordpiece.h"

#include "minigrad/optim/adam.h"
#include "minigrad/optim/checkpoint.h"
#include "minigrad/optim/clip_grad.h"
#include "minigrad/optim/lbfgs.h"
#include "minigrad/optim/optimizer.h"
#include "minigrad/optim/rmsprop.h"
#include "minigrad/optim/scheduler.h"
#include "minigrad/optim/sgd.h"

// distributed/ (data parallelism on MPI) exists when MPI was found at build time.
#ifdef MG_HAVE_MPI
#include "minigrad/distributed/ddp.h"
#include "minigrad/distributed/process_group.h"
#include "minigrad/distributed/zero.h"
#endif
