#pragma once
// minigrad: everything in one include.
#include "autograd/dot.h"
#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/variable.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"
