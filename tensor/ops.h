#pragma once
// Kernels on plain tensors: numbers in, numbers out, no gradients. One header per family, each
// with its tensor/ops/<family>.cpp; autograd/ops/<family>.cpp holds the derivative rules that
// call them (docs/03-writing-an-op.md has the table of every op and where its pieces live).
#include "minigrad/tensor/ops/activation.h"
#include "minigrad/tensor/ops/attention.h"
#include "minigrad/tensor/ops/conv.h"
#include "minigrad/tensor/ops/einsum.h"
#include "minigrad/tensor/ops/elementwise.h"
#include "minigrad/tensor/ops/index.h"
#include "minigrad/tensor/ops/loss.h"
#include "minigrad/tensor/ops/matmul.h"
#include "minigrad/tensor/ops/nn_functional.h"
#include "minigrad/tensor/ops/optim.h"
#include "minigrad/tensor/ops/pool.h"
#include "minigrad/tensor/ops/random.h"
#include "minigrad/tensor/ops/reduce.h"
#include "minigrad/tensor/ops/rnn.h"
#include "minigrad/tensor/ops/shape.h"
#include "minigrad/tensor/ops/sort.h"
