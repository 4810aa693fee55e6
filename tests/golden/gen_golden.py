#!/usr/bin/python3
"""Golden values for minigrad's op tests, computed by PyTorch in float64.

Run with Debian's python3-torch (apt-get install python3-torch):
    /usr/bin/python3 tests/golden/gen_golden.py > tests/golden/ops.txt
CI does not run this; it reads the committed ops.txt.

For each case: the inputs in0, in1, ... ; the output `out`; a random upstream gradient `gout`;
and for each floating input i, `grad<i>` = d sum(out * gout) / d in<i>.

File format, one tensor per line:  <key> <dtype> <ndim> <dims...> <values...>
framed by `case <name>` and `end` lines.
"""
import math

import torch
import torch.nn.functional as F

torch.manual_seed(1234)
D = torch.float64


def r(*shape, positive=False):
    x = torch.randn(*shape, dtype=D)
    return x.abs() + 0.5 if positive else x


def fmt_tensor(key, t):
    t = t.detach().contiguous()
    dtype = {torch.float64: "float64", torch.int64: "int64", torch.bool: "bool"}[t.dtype]
    vals = t.reshape(-1).tolist()
    if dtype == "float64":
        body = " ".join(repr(float(v)) for v in vals)
    else:
        body = " ".join(str(int(v)) for v in vals)
    return f"{key} {dtype} {t.dim()} {' '.join(str(s) for s in t.shape)} {body}".replace("  ", " ")


def case(name, fn, *inputs):
    ins = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out = fn(*ins)
    gout = torch.randn(out.shape, dtype=D)
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


def main():
    # elementwise (with broadcasting)
    case("add_broadcast", lambda a, b: a + b, r(3, 1, 4), r(2, 4))
    case("sub_broadcast", lambda a, b: a - b, r(2, 3), r(3))
    case("mul_broadcast", lambda a, b: a * b, r(4, 1), r(1, 5))
    case("div", lambda a, b: a / b, r(3, 4), r(3, 4, positive=True))
    case("neg", lambda a: -a, r(5))
    case("pow3", lambda a: a ** 3, r(2, 3))
    case("pow_half", lambda a: a ** 0.5, r(2, 3, positive=True))
    case("exp", torch.exp, r(2, 3))
    case("log", torch.log, r(2, 3, positive=True))
    case("sqrt", torch.sqrt, r(2, 3, positive=True))
    case("abs", torch.abs, r(2, 3))
    case("tanh", torch.tanh, r(2, 3))
    case("sigmoid", torch.sigmoid, r(2, 3))
    case("relu", torch.relu, r(3, 4))
    case("gelu", lambda a: F.gelu(a), r(3, 4) * 2)
    case("gelu_tanh", lambda a: F.gelu(a, approximate="tanh"), r(3, 4) * 2)
    mask = torch.tensor([[True, False, False, True]])
    case("masked_fill", lambda a, m: a.masked_fill(m, -7.5), r(3, 4), mask)
    cond = torch.tensor([[True, False, True], [False, False, True]])
    case("where", lambda c, a, b: torch.where(c, a, b), cond, r(2, 3), r(3))

    # reductions
    case("sum_all", lambda a: a.sum(), r(3, 4))
    case("sum_dim1_keepdim", lambda a: a.sum(dim=1, keepdim=True), r(2, 3, 4))
    case("sum_dims02", lambda a: a.sum(dim=(0, 2)), r(2, 3, 4))
    case("mean_dim0", lambda a: a.mean(dim=0), r(4, 3))
    case("mean_all", lambda a: a.mean(), r(3, 5))
    case("max_dim1", lambda a: a.max(dim=1).values, r(3, 5))
    case("max_all", lambda a: a.max(), r(4, 3))

    # matmul
    case("matmul_2d", torch.matmul, r(3, 4), r(4, 5))
    case("matmul_batched_broadcast", torch.matmul, r(2, 1, 3, 4), r(5, 4, 2))
    case("matmul_vec_mat", torch.matmul, r(4), r(4, 3))
    case("matmul_mat_vec", torch.matmul, r(3, 4), r(4))
    case("linear", lambda x, w, b: F.linear(x, w, b), r(2, 3, 4), r(5, 4), r(5))

    # shape
    case("reshape", lambda a: a.reshape(4, 6) * 1.0, r(2, 3, 4))
    case("transpose", lambda a: a.transpose(0, 2), r(2, 3, 4))
    case("permute", lambda a: a.permute(2, 0, 1), r(2, 3, 4))
    case("slice_step2", lambda a: a[:, 1:6:2], r(3, 7))
    case("concat_dim1", lambda a, b: torch.cat([a, b], dim=1), r(2, 3), r(2, 2))
    case("split_weighted", lambda a: torch.cat([p * (i + 1) for i, p in enumerate(torch.split(a, 2, dim=0))]), r(5, 3))
    case("expand", lambda a: a.expand(3, 4, 2) * 1.0, r(4, 1))

    # nn functions
    case("softmax_dim1", lambda a: torch.softmax(a, dim=1), r(3, 5))
    case("softmax_dim0", lambda a: torch.softmax(a, dim=0), r(4, 3))
    case("log_softmax_last", lambda a: torch.log_softmax(a, dim=-1), r(2, 3, 5))
    targets = torch.tensor([1, 0, 4, 2, 3, 4])
    case("cross_entropy_mean", lambda x, t: F.cross_entropy(x, t), r(6, 5), targets)
    case("cross_entropy_sum", lambda x, t: F.cross_entropy(x, t, reduction="sum"), r(6, 5), targets)
    case("cross_entropy_none", lambda x, t: F.cross_entropy(x, t, reduction="none"), r(6, 5), targets)
    targets_ign = torch.tensor([1, -100, 4, 2, -100, 0])
    case("cross_entropy_ignore", lambda x, t: F.cross_entropy(x, t, ignore_index=-100), r(6, 5), targets_ign)
    case("mse_loss", lambda x, y: F.mse_loss(x, y), r(3, 4), r(3, 4))
    case("mse_loss_sum", lambda x, y: F.mse_loss(x, y, reduction="sum"), r(3, 4), r(3, 4))
    case("layer_norm_affine", lambda x, w, b: F.layer_norm(x, (6,), w, b, 1e-5), r(2, 3, 6) * 3 + 1, r(6), r(6))
    case("layer_norm_2d_plain", lambda x: F.layer_norm(x, (3, 4), None, None, 1e-5), r(2, 3, 4))
    ids = torch.tensor([[0, 3, 3], [5, 1, 0]])
    case("embedding", lambda i, w: F.embedding(i, w), ids, r(6, 4))
    gidx = torch.tensor([[0, 2], [1, 1], [3, 0]])
    case("gather_dim1", lambda a, i: torch.gather(a, 1, i), r(3, 4), gidx)
    sidx = torch.tensor([2, 0, 2])
    case("index_select_dim0", lambda a, i: torch.index_select(a, 0, i), r(4, 3), sidx)

    # added with the ops table (docs/03-writing-an-op.md); appended so the cases above keep their values
    case("view", lambda a: a.view(6, 4) * 1.0, r(2, 3, 4))
    case("flatten_1_2", lambda a: torch.flatten(a, 1, 2) * 1.0, r(2, 3, 4))
    case("narrow", lambda a: torch.narrow(a, 1, 1, 3) * 1.0, r(2, 5))
    case("squeeze_dim", lambda a: a.squeeze(1) * 1.0, r(3, 1, 4))
    case("squeeze_all", lambda a: a.squeeze() * 1.0, r(1, 3, 1, 2))
    case("unsqueeze", lambda a: a.unsqueeze(1) * 1.0, r(3, 4))
    case("embedding_padding", lambda i, w: F.embedding(i, w, padding_idx=3), ids, r(6, 4))
    case("sdpa_causal", lambda q, k, v: attention(q, k, v, True), r(2, 2, 5, 3), r(2, 2, 5, 3), r(2, 2, 5, 3))
    case("sdpa_cross", lambda q, k, v: attention(q, k, v, False), r(1, 2, 3, 4), r(1, 2, 6, 4), r(1, 2, 6, 4))
    case("self_attention_qkv_causal", lambda x: attention(*split_qkv(x, 2), True), r(2, 4, 12))


def attention(q, k, v, causal):
    """softmax(q k^T / sqrt(d) [+ causal mask]) v, composed (PyTorch 1.13 has no fused op)."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def split_qkv(x, heads):
    """(B, T, 3E) -> q, k, v as (B, H, T, E/H), the layout of minigrad's self_attention_qkv."""
    B, T, E3 = x.shape
    return [p.view(B, T, heads, E3 // 3 // heads).transpose(1, 2) for p in x.split(E3 // 3, dim=2)]


if __name__ == "__main__":
    main()
