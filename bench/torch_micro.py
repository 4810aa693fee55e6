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


def digits_cnn_step():
    """examples/digits_cnn's model on 32 8x8 images: one AdamW step."""
    nn = torch.nn
    m = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                      nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(512, 64), nn.ReLU(), nn.Dropout(0.25), nn.Linear(64, 10))
    opt = torch.optim.AdamW(m.parameters(), lr=2e-3, weight_decay=1e-4)
    x, y = torch.randn(32, 1, 8, 8), torch.randint(0, 10, (32,))

    def step():
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
    return step


class RMSNorm(torch.nn.Module):
    """torch.nn.RMSNorm where this PyTorch has it (2.4+), else the formula LLaMA's code writes."""

    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-5)  # models::Decoder's eps
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class LlamaBlock(torch.nn.Module):
    """models::Decoder's LLaMA-style block: RMSNorm, rotary positions (rotate_half), grouped-query
    attention with H/2 key/value heads, SwiGLU, no biases."""

    def __init__(self, d, H, hidden):
        super().__init__()
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.H, self.n1, self.n2 = H, RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v, self.o = lin(d, d), lin(d, d // 2), lin(d, d // 2), lin(d, d)
        self.gate, self.up, self.down = lin(d, hidden), lin(d, hidden), lin(hidden, d)

    def forward(self, x, cos, sin):
        B, T, d = x.shape
        H, dh = self.H, d // self.H
        h = self.n1(x)
        q = self.q(h).view(B, T, H, dh).transpose(1, 2)
        k = self.k(h).view(B, T, H // 2, dh).transpose(1, 2)
        v = self.v(h).view(B, T, H // 2, dh).transpose(1, 2)

        def rope(t):
            t1, t2 = t[..., : dh // 2], t[..., dh // 2:]
            return t * cos + torch.cat([-t2, t1], -1) * sin
        q, k = rope(q), rope(k)
        sdpa = getattr(F, "scaled_dot_product_attention", None)
        try:
            a = sdpa(q, k, v, is_causal=True, enable_gqa=True)
        except (TypeError, RuntimeError):  # 1.13: no SDPA; 2.x before 2.5: no enable_gqa
            k, v = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
            if sdpa is not None:
                a = sdpa(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
                mask = torch.ones(T, T, dtype=torch.bool).triu(1)
                a = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(B, T, d))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def llama_step(c, layers, vocab=65):
    """bench/micro's BM_llama_step: the LLaMA-style decoder at a GPT step's size, one AdamW step."""
    d, H, T, B = c["d"], c["H"], c["T"], c["B"]
    hidden, dh = (8 * d // 3 + 7) // 8 * 8, d // H
    tok, blocks = torch.nn.Embedding(vocab, d), torch.nn.ModuleList(LlamaBlock(d, H, hidden) for _ in range(layers))
    norm, head = RMSNorm(d), torch.nn.Linear(d, vocab, bias=False)
    params = [p for mod in (tok, blocks, norm, head) for p in mod.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-3)
    inv = 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh))
    ang = torch.outer(torch.arange(T).float(), inv)
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    x, y = torch.randint(0, vocab, (B, T)), torch.randint(0, vocab, (B * T,))

    def step():
        opt.zero_grad()
        h = tok(x)
        for b in blocks:
            h = b(h, cos, sin)
        F.cross_entropy(head(norm(h)).view(-1, vocab), y).backward()
        opt.step()
    return step


def minilm_encode():
    """BM_minilm_encode: all-MiniLM-L6-v2's encoder (BERT: embeddings, 6 post-norm layers of d 384,
    12 heads, MLP 1536 with GELU, the pooler) on 32 sentences of 64 tokens, in inference mode, where
    nn.TransformerEncoder takes its fused fast path. Random weights: the time does not depend on them."""
    nn = torch.nn
    word, pos, typ, ln = nn.Embedding(30522, 384), nn.Embedding(512, 384), nn.Embedding(2, 384), nn.LayerNorm(384, eps=1e-12)
    layer = nn.TransformerEncoderLayer(384, 12, 1536, activation="gelu", batch_first=True, layer_norm_eps=1e-12)
    enc, pool = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).eval(), nn.Linear(384, 384)
    ids, mask = torch.randint(0, 30522, (32, 64)), torch.zeros(32, 64, dtype=torch.bool)  # True: padding
    positions = torch.arange(64)

    def encode():
        with torch.inference_mode():
            h = enc(ln(word(ids) + pos(positions) + typ(torch.zeros_like(ids))), src_key_padding_mask=mask)
            return h, torch.tanh(pool(h[:, 0]))
    return encode


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
    # Whole steps (BM_digits_cnn_step, BM_llama_step) and MiniLM's inference (BM_minilm_encode).
    out.append(("BM_digits_cnn_step", timeit(digits_cnn_step())))
    for i, c in enumerate(CONFIGS):
        out.append((f"BM_llama_step/{i}", timeit(llama_step(c, 4 if i == 0 else 6))))
    out.append(("BM_minilm_encode", timeit(minilm_encode())))
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
