#pragma once
// Differentiable ops on Variables. One header per family: autograd/ops/<family>.h declares the
// ops and autograd/ops/<family>.cpp holds each one's derivative rule (the math in a comment above
// a short function that calls the kernels of tensor/ops/<family>.cpp and records a backward).
// docs/03-writing-an-op.md has the table of every op and where its pieces live.
#include "autograd/ops/activation.h"
#include "autograd/ops/attention.h"
#include "autograd/ops/conv.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/index.h"
#include "autograd/ops/loss.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/nn_functional.h"
#include "autograd/ops/pool.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/rnn.h"
#include "autograd/ops/shape.h"
#include "autograd/ops/sort.h"
#include "tensor/ops.h"
