#pragma once
// Differentiable ops on Variables. One header per family: autograd/ops/<family>.h declares the
// ops and autograd/ops/<family>.cpp holds each one's derivative rule (the math in a comment above
// a short function that calls the kernels of tensor/ops/<family>.cpp and records a backward).
// docs/03-writing-an-op.md has the table of every op and where its pieces live.
#include "minigrad/autograd/ops/activation.h"
#include "minigrad/autograd/ops/attention.h"
#include "minigrad/autograd/ops/conv.h"
#include "minigrad/autograd/ops/elementwise.h"
#include "minigrad/autograd/ops/index.h"
#include "minigrad/autograd/ops/loss.h"
#include "minigrad/autograd/ops/matmul.h"
#include "minigrad/autograd/ops/nn_functional.h"
#include "minigrad/autograd/ops/pool.h"
#include "minigrad/autograd/ops/reduce.h"
#include "minigrad/autograd/ops/rnn.h"
#include "minigrad/autograd/ops/shape.h"
#include "minigrad/autograd/ops/sort.h"
#include "minigrad/tensor/ops.h"
