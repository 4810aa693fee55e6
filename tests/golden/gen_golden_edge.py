#!/usr/bin/python3
"""Edge-value golden data for minigrad, computed by PyTorch (issue "hardening, second round").

Covers inputs where a naive kernel loses precision or produces NaN: logits of large magnitude
(up to +-1e30) fed to cross_entropy, log_softmax, softmax and logsumexp; std/var over rows with
zero deviation; and attention whose scores reach 1e4. Every case exists in float32 (`_f32`) and
float64 (`_f64`). The attention cases are the exception: they are always computed in float64;
`_f32_ref64` ones start from inputs rounded to float32.

Run with Debian's python3-torch (apt-get install python3-torch):
    /usr/bin/python3 tests/golden/gen_golden_edge.py > tests/golden/edge.txt
CI does not run this; it reads the committed edge.txt.

Same format as ops.txt: `case <name>`, then one tensor per line
`<key> <dtype> <ndim> <dims...> <values...>`, then `end`. Keys: inputs in0, in1, ...; the output
`out`; a fixed upstream gradient `gout` (1 for a scalar, else 1, -2, 3, -4, ...); and for each
floating input i, `grad<i>` = d sum(out * gout) / d in<i>. Float values are written with repr(),
which is exact for float32 values as well.
"""
import math

import torch
import torch.nn.functional as F

F32, F64 = torch.float32, torch.float64
DTYPES = [(F32, "f32"), (F64, "f64")]
MAGNITUDES = [1.0, 1e2, 1e4, 1e5, 1e7, 1e30, -1e30]
NAMES = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64"}


def tag(v):
    """1.0 -> '1', 1e5 -> '1e5', -1e30 -> 'm1e30'."""
    s = "1" if abs(v) == 1 else f"1e{round(math.log10(abs(v)))}"
    return ("m" if v < 0 else "") + s


def fmt_tensor(key, t):
    t = t.detach().contiguous()
    dtype = NAMES[t.dtype]
    vals = t.reshape(-1).tolist()
    if t.is_floating_point():
        body = " ".join(repr(float(v)) for v in vals)
    else:
        body = " ".join(str(int(v)) for v in vals)
    return f"{key} {dtype} {t.dim()} {' '.join(str(s) for s in t.shape)} {body}".replace("  ", " ")


def fixed_gout(out):
    """Deterministic, non-symmetric upstream gradient: 1 for a scalar, else 1, -2, 3, -4, ..."""
    n = out.numel()
    g = torch.tensor([(i + 1) * (-1) ** i for i in range(n)], dtype=out.dtype)
    return torch.ones_like(out) if out.dim() == 0 else g.reshape(out.shape)


def case(name, fn, *inputs):
    ins = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out = fn(*ins)
    gout = fixed_gout(out.detach())
    (out * gout).sum().backward()
    print(f"case {name}")
    for i, x in enumerate(ins):
        print(fmt_tensor(f"in{i}", x))
    print(fmt_tensor("out", out))
    print(fmt_tensor("gout", gout))
    for i, x in enumerate(ins):
        if x.is_floating_point():
            print(fmt_tensor(f"grad{i}", x.grad))
    print("end")


def spread(v, dt):
    """Two rows whose softmax is not uniform; built in float64, then rounded to dt (at 1e7 and up
    in float32, and at 1e30 in both dtypes, the offsets vanish and the rows become constant)."""
    return torch.tensor([[v, v - 1, v - 2.5], [v - 0.5, v, v + 0.25]], dtype=F64).to(dt)


def large_logits():
    targets = torch.tensor([2, 0])
    for v in MAGNITUDES:
        for dt, sfx in DTYPES:
            t = f"{tag(v)}_{sfx}"
            case(f"ce_const_{t}", F.cross_entropy, torch.full((1, 3), v, dtype=dt), torch.tensor([0]))
            case(f"ce_spread_{t}", F.cross_entropy, spread(v, dt), targets)
            case(f"log_softmax_{t}", lambda x: F.log_softmax(x, dim=-1), torch.full((3,), v, dtype=dt))
            case(f"log_softmax_spread_{t}", lambda x: F.log_softmax(x, dim=-1), spread(v, dt))
            case(f"softmax_spread_{t}", lambda x: F.softmax(x, dim=-1), spread(v, dt))
            # PyTorch's backward is gout * exp(x - out) with the rounded out, so these grad0 rows need
            # not sum to gout: at 1e7 in float32 they sum to 1.5 * gout, at +-1e30 to 3 * gout.
            case(f"logsumexp_spread_{t}", lambda x: torch.logsumexp(x, dim=-1), spread(v, dt))


def zero_deviation():
    for dt, sfx in DTYPES:
        case(f"std_zero_{sfx}", torch.std, torch.full((3,), 2.0, dtype=dt))
        case(f"std_zero_dim_{sfx}", lambda x: torch.std(x, dim=1), torch.tensor([[2.0, 2, 2], [1, 2, 4]], dtype=dt))
        case(f"var_zero_{sfx}", torch.var, torch.full((3,), 2.0, dtype=dt))


def attention(q, k, v):
    """softmax(q k^T / sqrt(d)) v, composed."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=-1) @ v


def large_attention():
    # values not exact in binary, so the float32 rounding of the inputs is visible
    base_q = torch.tensor([[0.317, -0.703], [0.911, 0.129], [-0.423, 0.651]], dtype=F64).reshape(1, 1, 3, 2)
    base_k = torch.tensor([[0.707, 0.213], [-0.331, 0.957], [0.619, -0.547]], dtype=F64).reshape(1, 1, 3, 2)
    val = torch.tensor([[1.1, -0.3], [0.2, 0.7], [-0.9, 0.4]], dtype=F64).reshape(1, 1, 3, 2)
    for v in [1.0, 1e2, 1e4]:
        q, k = base_q * math.sqrt(v), base_k * math.sqrt(v)  # scores of order v
        case(f"attention_large_{tag(v)}_f32_ref64", attention, *[x.to(F32).to(F64) for x in (q, k, val)])
        case(f"attention_large_{tag(v)}_f64", attention, q, k, val)


def main():
    large_logits()
    zero_deviation()
    large_attention()


if __name__ == "__main__":
    main()
