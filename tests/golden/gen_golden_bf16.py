#!/usr/bin/python3
"""Golden values for minigrad's autocast tests: PyTorch's own outputs under
torch.autocast("cpu", dtype=torch.bfloat16), and the gradients its backward gives the float32 leaves.

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_golden_bf16.py > tests/golden/bf16.txt
CI does not run this; tests/test_autocast.cpp reads the committed bf16.txt.

Format: one tensor per line, `<case>.<key> <ndim> <dims...> <values...>` (float32 values written
exactly as float64 decimals). PyTorch's autocast products write bfloat16 outputs (and bfloat16
gradients, widened to float32 for float32 leaves); minigrad's write float32 by default. So the
comparison allows one bfloat16 rounding of the result: relative 2^-8, plus summation-order
differences. Under AutocastOptions::bfloat16_outputs minigrad's write bfloat16 too, and the test
asks for PyTorch's bits or one bfloat16 step.
"""
import math
import torch
import torch.nn.functional as F

torch.manual_seed(7)


def emit(case, key, t):
    t = t.detach().to(torch.float64).contiguous()
    vals = " ".join(repr(float(v)) for v in t.reshape(-1).tolist())
    print(f"{case}.{key} {t.dim()} {' '.join(str(s) for s in t.shape)} {vals}".replace("  ", " "))


def leaf(*shape):
    return torch.randn(*shape, dtype=torch.float32, requires_grad=True)


def run(case, inputs, fn):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fn(*inputs)
    gout = torch.randn(out.shape, dtype=torch.float32)
    (out.float() * gout).sum().backward()
    for i, x in enumerate(inputs):
        emit(case, f"in{i}", x)
    emit(case, "out", out.float())
    emit(case, "gout", gout)
    for i, x in enumerate(inputs):
        emit(case, f"grad{i}", x.grad)


run("linear", [leaf(6, 16), leaf(5, 16), leaf(5)], lambda x, w, b: F.linear(x, w, b))
run("bmm", [leaf(2, 3, 4, 8), leaf(2, 3, 8, 5)], lambda a, b: a @ b)


def attention(q, k, v):
    # the textbook composed attention, as PyTorch 1.13 runs it (no fused CPU kernel)
    T, d = q.shape[-2], q.shape[-1]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(-1)
    return att @ v


run("attention", [leaf(1, 2, 6, 8), leaf(1, 2, 6, 8), leaf(1, 2, 6, 8)], attention)
