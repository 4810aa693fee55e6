#!/usr/bin/python3
"""PyTorch timings of the kernels in bench/micro/main.cpp, same shapes, one JSON object per line:
{"name": "BM_linear_fwd_bwd/0", "ms": ...}.  Usage: torch_micro.py --threads 2"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

CONFIGS = [dict(B=32, T=64, d=128, H=4), dict(B=8, T=256, d=384, H=6)]


def timeit(fn, min_time=0.5):
    fn()  # warm-up
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_time or n < 3:
        fn()
        n += 1
    return (time.perf_counter() - start) / n * 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    out = []
    n = 1024
    A, B = torch.randn(n, n), torch.randn(n, n)
    out.append(("BM_sgemm_minigrad/1024", timeit(lambda: A @ B)))
    for i, c in enumerate(CONFIGS):
        N, d, T, H = c["B"] * c["T"], c["d"], c["T"], c["H"]
        x, w, b = (torch.randn(N, d, requires_grad=True), torch.randn(4 * d, d, requires_grad=True),
                   torch.randn(4 * d, requires_grad=True))
        g = torch.randn(N, 4 * d)
        out.append((f"BM_linear_fwd_bwd/{i}", timeit(lambda: F.linear(x, w, b).backward(g))))
        h = torch.randn(N, 4 * d, requires_grad=True)
        out.append((f"BM_gelu_fwd_bwd/{i}", timeit(lambda: F.gelu(h).backward(g))))
        xl, wl, bl = torch.randn(N, d, requires_grad=True), torch.ones(d, requires_grad=True), torch.zeros(d, requires_grad=True)
        gl = torch.randn(N, d)
        out.append((f"BM_layer_norm_fwd_bwd/{i}", timeit(lambda: F.layer_norm(xl, (d,), wl, bl).backward(gl))))
        s = torch.randn(c["B"] * H * T, T, requires_grad=True)
        gs = torch.randn(c["B"] * H * T, T)
        out.append((f"BM_softmax_fwd_bwd/{i}", timeit(lambda: torch.softmax(s, -1).backward(gs))))
        lo, t = torch.randn(N, 65, requires_grad=True), torch.randint(0, 65, (N,))
        out.append((f"BM_cross_entropy_fwd_bwd/{i}", timeit(lambda: F.cross_entropy(lo, t).backward())))
        dh = d // H
        q, k, v = (torch.randn(c["B"], H, T, dh, requires_grad=True) for _ in range(3))
        go = torch.randn(c["B"], H, T, dh)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)

        def attn():
            att = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
            (att.masked_fill(mask, float("-inf")).softmax(-1) @ v).backward(go)
        out.append((f"BM_attention_composed_fwd_bwd/{i}", timeit(attn)))
    for name, ms in out:
        print(json.dumps({"name": name, "ms": ms}))


if __name__ == "__main__":
    main()
