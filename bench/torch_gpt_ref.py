"""PyTorch CPU reference for bench/gpt: training-step time of the same GPT (models::GPT's layout), same shapes.
Run by bench/run.py (`make bench`) beside bench_gpt, in the same sitting.
Usage: torch_gpt_ref.py --vocab 65 --ctx 64 --d 128 --heads 4 --layers 4 --batch 32 --steps 20 --threads 2 [--bf16 1]
  [--sdpa 0|1] [--compile 0|1]
--bf16 1 runs the forward and the loss under torch.autocast("cpu", dtype=torch.bfloat16), as PyTorch's
documentation recommends (the backward outside it, float32 parameters and AdamW as always).
--sdpa: attention by F.scaled_dot_product_attention (PyTorch 2's fused kernel; the default where the
version has it) or, with 0, composed from matmul, masked_fill and softmax (the only way in 1.13).
--compile 1 wraps the model in torch.compile (PyTorch 2; compiled in the warm-up steps).
Prints one line: tokens/s and ms/step (median over steps after warm-up)."""
import argparse, math, statistics, time
import torch, torch.nn as nn, torch.nn.functional as F

class Block(nn.Module):
    def __init__(s, d, h, sdpa=False):
        super().__init__()
        s.h, s.sdpa = h, sdpa
        s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        s.fc, s.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, s.h, C // s.h).transpose(1, 2) for t in (q, k, v))
        if s.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // s.h)
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float('-inf')).softmax(-1)
            y = att @ v
        y = y.transpose(1, 2).reshape(B, T, C)
        x = x + s.proj(y)
        return x + s.out(F.gelu(s.fc(s.ln2(x))))

class GPT(nn.Module):
    def __init__(s, vocab, ctx, d, h, L, sdpa=False):
        super().__init__()
        s.tok, s.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        s.blocks = nn.ModuleList(Block(d, h, sdpa) for _ in range(L))
        s.ln, s.head = nn.LayerNorm(d), nn.Linear(d, vocab)
    def forward(s, idx):
        x = s.tok(idx) + s.pos(torch.arange(idx.shape[1]))
        for b in s.blocks: x = b(x)
        return s.head(s.ln(x))

def main():
    p = argparse.ArgumentParser()
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    for k, v in dict(vocab=65, ctx=64, d=128, heads=4, layers=4, batch=32, steps=20, threads=2, warmup=3, bf16=0,
                     sdpa=int(has_sdpa), compile=0).items():
        p.add_argument('--' + k, type=int, default=v)
    a = p.parse_args()
    if a.sdpa and not has_sdpa: p.error(f"--sdpa 1: torch {torch.__version__} has no scaled_dot_product_attention")
    if a.compile and not hasattr(torch, "compile"): p.error(f"--compile 1: torch {torch.__version__} has no torch.compile")
    torch.manual_seed(0); torch.set_num_threads(a.threads)
    m = GPT(a.vocab, a.ctx, a.d, a.heads, a.layers, bool(a.sdpa))
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    model = torch.compile(m) if a.compile else m
    x = torch.randint(0, a.vocab, (a.batch, a.ctx)); y = torch.randint(0, a.vocab, (a.batch, a.ctx))
    times = []
    for i in range(a.warmup + a.steps):
        t = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(a.bf16)):
            loss = F.cross_entropy(model(x).view(-1, a.vocab), y.view(-1))
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        if i >= a.warmup: times.append(time.perf_counter() - t)
    ms = statistics.median(times) * 1e3
    print(f"torch {torch.__version__} threads={a.threads} bf16={a.bf16} sdpa={a.sdpa} compile={a.compile} params={sum(p.numel() for p in m.parameters())} "
          f"ms/step={ms:.2f} tokens/s={a.batch * a.ctx / ms * 1e3:.0f} loss={loss.item():.4f}")

if __name__ == '__main__': main()
