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


def load_reference_gpt():
    """bench/torch_gpt_ref.py as a module (its GPT class)."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_gpt_ref.py")
    spec = importlib.util.spec_from_file_location("torch_gpt_ref", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
        # The LLaMA-style parts (bench/micro: BM_rms_norm_fwd_bwd ... BM_gqa_attention_fwd_bwd). Where
        # this PyTorch has no op (1.13: rms_norm, enable_gqa), the composed form its users write.
        xr, wr = torch.randn(N, d, requires_grad=True), torch.ones(d, requires_grad=True)
        if hasattr(F, "rms_norm"):
            out.append((f"BM_rms_norm_fwd_bwd/{i}", timeit(lambda: F.rms_norm(xr, (d,), wr, 1e-6).backward(gl))))
        else:
            out.append((f"BM_rms_norm_fwd_bwd/{i}", timeit(
                lambda: (xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr).backward(gl))))
        inv = 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh))
        ang = torch.outer(torch.arange(T).float(), inv)
        cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)

        def rope():  # Hugging Face's apply_rotary_pos_emb (rotate_half)
            q1, q2 = q[..., : dh // 2], q[..., dh // 2:]
            (q * cos + torch.cat([-q2, q1], -1) * sin).backward(go)
        out.append((f"BM_rotary_fwd_bwd/{i}", timeit(rope)))
        hid = 8 * d // 3
        gate, up, down = torch.nn.Linear(d, hid, bias=False), torch.nn.Linear(d, hid, bias=False), torch.nn.Linear(hid, d, bias=False)
        xs2 = torch.randn(N, d, requires_grad=True)
        out.append((f"BM_swiglu_fwd_bwd/{i}", timeit(lambda: down(F.silu(gate(xs2)) * up(xs2)).backward(gl))))
        kg, vg = (torch.randn(c["B"], H // 2, T, dh, requires_grad=True) for _ in range(2))
        sdpa = getattr(F, "scaled_dot_product_attention", None)
        try:
            sdpa(q, kg, vg, is_causal=True, enable_gqa=True)
            gqa = lambda: sdpa(q, kg, vg, is_causal=True, enable_gqa=True).backward(go)  # noqa: E731
        except (TypeError, RuntimeError):  # no enable_gqa: repeat the key/value heads, as LLaMA's code does

            def gqa():
                k2, v2 = kg.repeat_interleave(2, 1), vg.repeat_interleave(2, 1)
                att = (q @ k2.transpose(-2, -1)) / math.sqrt(dh)
                (att.masked_fill(mask, float("-inf")).softmax(-1) @ v2).backward(go)
        out.append((f"BM_gqa_attention_fwd_bwd/{i}", timeit(gqa)))
    # The examples' layers (bench/micro: BM_conv2d_fwd_bwd, BM_lstm_fwd_bwd).
    conv = torch.nn.Conv2d(16, 32, 3, padding=1)
    xc, gc = torch.randn(32, 16, 8, 8, requires_grad=True), torch.randn(32, 32, 8, 8)
    out.append(("BM_conv2d_fwd_bwd", timeit(lambda: conv(xc).backward(gc))))
    lstm = torch.nn.LSTM(64, 256, num_layers=2, batch_first=True)
    xl2, gl2 = torch.randn(32, 64, 64, requires_grad=True), torch.randn(32, 64, 256)
    out.append(("BM_lstm_fwd_bwd", timeit(lambda: lstm(xl2)[0].backward(gl2))))
    # Second order (BM_second_order_mlp): gradient, gradient with create_graph, Hessian-vector product.
    xs, ys = torch.randn(1024, 64), torch.randn(1024, 1)
    ps = [torch.randn(256, 64) * 0.125, torch.zeros(256), torch.randn(256, 256) * 0.0625, torch.zeros(256),
          torch.randn(1, 256) * 0.0625, torch.zeros(1)]
    ps = [q.requires_grad_(True) for q in ps]
    vs = [torch.ones_like(q) for q in ps]

    def mlp_loss(*q):
        h = torch.tanh(F.linear(torch.tanh(F.linear(xs, q[0], q[1])), q[2], q[3]))
        return ((F.linear(h, q[4], q[5]) - ys) ** 2).mean()
    out.append(("BM_second_order_mlp/0", timeit(lambda: torch.autograd.grad(mlp_loss(*ps), ps))))
    out.append(("BM_second_order_mlp/1", timeit(lambda: torch.autograd.grad(mlp_loss(*ps), ps, create_graph=True))))
    # vhp is reverse over reverse, as mg::hvp (functional.hvp takes a third backward: the double-backward trick)
    out.append(("BM_second_order_mlp/2", timeit(lambda: torch.autograd.functional.vhp(mlp_loss, tuple(ps), tuple(vs)))))
    # Generation (BM_generate_500/0): PyTorch has no key/value cache in nn.MultiheadAttention, so its
    # twin is the uncached loop of nanoGPT's generate on the reference GPT (bench/torch_gpt_ref.py).
    ref = load_reference_gpt()
    gpt = ref.GPT(65, 512, 128, 4, 4).eval()

    def generate():
        with torch.no_grad():
            idx = torch.zeros(1, 1, dtype=torch.long)
            for _ in range(500):
                probs = torch.softmax(gpt(idx[:, -512:])[:, -1, :], -1)
                idx = torch.cat([idx, torch.multinomial(probs, 1)], 1)
    out.append(("BM_generate_500/0", timeit(generate, min_time=0.1)))
    for name, ms in out:
        print(json.dumps({"name": name, "ms": ms}))


if __name__ == "__main__":
    main()
