#!/usr/bin/env python3
"""Golden values for minigrad's bfloat16 elementwise ops: PyTorch's own results on bfloat16 tensors
(computed in float32, rounded to bfloat16 once) and its float32/bfloat16 promotion.

Run with PyTorch 2.x (from PyPI, in a venv under build/):
  build/torch2-venv/bin/python tests/golden/gen_golden_bf16_ops.py > tests/golden/bf16_ops.txt
Not Debian's 1.13: it rounds a float32 scalar to bfloat16 before multiplying or dividing a bfloat16
tensor by it (mul(m,s), div(m,s) and m*0.1 below differ); 2.x's mul and div kernels read their second
operand, when it is a 0-dim float32 or a number, as a float32, and so does minigrad. Everywhere else
(add, sub, comparisons, maximum, a 0-dim first operand) it is rounded to bfloat16 first.
CI does not run this; tests/test_bfloat16_ops.cpp reads the committed bf16_ops.txt.

Format: one tensor per line, `<case> <dtype> <ndim> <dims...> <values...>`, the values exact (every
bfloat16 and float32 value is a float64). The inputs are `x` (bfloat16, 48 values over [-4, 4]),
`p` (bfloat16, 48 positive values), `m` (bfloat16, 4 x 12, a matrix for broadcasting), `r`
(bfloat16, 12: its row), `f` (float32, 4 x 12) and `s` (float32, 0-dim).
"""
import torch

torch.manual_seed(11)


def emit(case, t):
    dtype = {torch.bfloat16: "bfloat16", torch.float32: "float32", torch.bool: "bool"}[t.dtype]
    v = t.detach().to(torch.float64).contiguous()
    vals = " ".join(repr(float(e)) for e in v.reshape(-1).tolist())
    print(f"{case} {dtype} {v.dim()} {' '.join(str(s) for s in v.shape)} {vals}".replace("  ", " "))


x = (torch.rand(48) * 8 - 4).to(torch.bfloat16)
x[0], x[1], x[2] = 0.0, -0.0, 1.0
p = (torch.rand(48) * 5 + 0.01).to(torch.bfloat16)
m = torch.randn(4, 12).to(torch.bfloat16)
m[0, 1] = 0.3  # bfloat16(0.3) = 0.30078125: equal to s once s is rounded as the comparison rounds it
r = torch.randn(12).to(torch.bfloat16)
f = torch.randn(4, 12)
s = torch.tensor(0.3)
for name, t in [("x", x), ("p", p), ("m", m), ("r", r), ("f", f), ("s", s)]:
    emit(name, t)

# unary ops on bfloat16 (x over [-4, 4]; p positive for log, sqrt, pow 0.5)
for name, fn in [("neg", torch.neg), ("abs", torch.abs), ("exp", torch.exp), ("tanh", torch.tanh),
                 ("sigmoid", torch.sigmoid), ("sin", torch.sin), ("cos", torch.cos), ("expm1", torch.expm1),
                 ("square", lambda t: t.pow(2)), ("relu", torch.relu)]:
    emit(f"{name}(x)", fn(x))
for name, fn in [("log", torch.log), ("sqrt", torch.sqrt), ("log1p", torch.log1p), ("pow_half", lambda t: t.pow(0.5))]:
    emit(f"{name}(p)", fn(p))

# arithmetic: bfloat16 with bfloat16 (broadcast row), float32 with bfloat16, a 0-dim float32 and numbers
for name, fn in [("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div),
                 ("maximum", torch.maximum), ("minimum", torch.minimum)]:
    emit(f"{name}(m,r)", fn(m, r))
    emit(f"{name}(f,m)", fn(f, m))
    emit(f"{name}(m,s)", fn(m, s))
emit("mul(s,m)", torch.mul(s, m))  # the 0-dim operand first: rounded
emit("div(s,m)", torch.div(s, m))
emit("eq(m,s)", torch.eq(m, s))
emit("m+0.3", m + 0.3)
emit("m*0.1", m * 0.1)
emit("0.1-m", 0.1 - m)
emit("m/3", m / 3)
emit("lt(m,r)", torch.lt(m, r))
emit("ge(f,m)", torch.ge(f, m))
mask = m > 0
emit("mask", mask)
emit("where(mask,m,f)", torch.where(mask, m, f))
emit("where(mask,m,r)", torch.where(mask, m, r))
emit("masked_fill(m,mask,0.1)", m.masked_fill(mask, 0.1))

# summed and normalised in float32, rounded once
emit("sum(m)", m.sum())
emit("sum(m,1)", m.sum(1))
emit("mean(m,0)", m.mean(0))
emit("softmax(m,1)", torch.softmax(m, 1))
emit("log_softmax(m,0)", torch.log_softmax(m, 0))
