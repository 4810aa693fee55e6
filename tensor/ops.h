#pragma once
// Kernels on plain tensors: numbers in, numbers out, no gradients. One header per family, each
// with its tensor/ops/<family>.cpp; autograd/ops/<family>.cpp holds the derivative rules that
// call them (docs/03-writing-an-op.md has the table of every op and where its pieces live).
#include "tensor/ops/activation.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/conv.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/index.h"
#include "tensor/ops/loss.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/nn_functional.h"
#include "tensor/ops/optim.h"
#include "tensor/ops/pool.h"
#include "tensor/ops/random.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/rnn.h"
#include "tensor/ops/shape.h"
#include "tensor/ops/sort.h"
