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

    # the model-writer's toolbox: elementwise and activations
    case("sin", torch.sin, r(3, 4) * 2)
    case("cos", torch.cos, r(3, 4) * 2)
    case("log1p", torch.log1p, r(3, 4, positive=True) - 0.4)
    case("expm1", torch.expm1, r(3, 4))
    case("clamp", lambda a: torch.clamp(a, -0.5, 0.7), r(4, 5))
    case("clamp_min", lambda a: torch.clamp(a, min=0.1), r(4, 5))
    case("clamp_max", lambda a: torch.clamp(a, max=-0.2), r(4, 5))
    ties = torch.tensor([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]], dtype=D)
    case("maximum_ties", torch.maximum, ties, torch.tensor([[1.0, 2.0, 0.25], [3.0, -1.0, -1.0]], dtype=D))
    case("minimum_ties", torch.minimum, ties, torch.tensor([[1.0, 2.0, 0.25], [3.0, -1.0, -1.0]], dtype=D))
    case("silu", F.silu, r(3, 4) * 2)
    case("softplus_beta2_threshold1", lambda a: F.softplus(a, beta=2, threshold=1), r(3, 4))
    case("leaky_relu", lambda a: F.leaky_relu(a, 0.2), r(3, 4))
    case("elu", lambda a: F.elu(a, 1.5), r(3, 4))

    # reductions and statistics
    case("min_dim1", lambda a: a.min(dim=1).values, r(3, 5))
    case("min_all", lambda a: a.min(), r(4, 3))
    case("var_dim1", lambda a: a.var(dim=1), r(3, 5))
    case("var_all_population", lambda a: a.var(dim=(0, 1), unbiased=False, keepdim=True), r(4, 3))
    case("std_dims02", lambda a: a.std(dim=(0, 2)), r(2, 3, 4))
    case("prod_dim1", lambda a: a.prod(dim=1), r(3, 4))
    case("prod_all_one_zero", lambda a: a.prod(), torch.tensor([[1.5, -2.0], [0.0, 0.5]], dtype=D))
    case("prod_dim0_keepdim", lambda a: a.prod(dim=0, keepdim=True), r(3, 2))
    case("cumsum_dim1", lambda a: a.cumsum(dim=1), r(3, 5))
    case("logsumexp_dims12", lambda a: torch.logsumexp(a, dim=(1, 2)), r(2, 3, 4))
    case("topk_k3", lambda a: a.topk(3, dim=1).values, r(4, 6))
    case("topk_smallest_dim0", lambda a: a.topk(2, dim=0, largest=False).values, r(5, 3))
    case("sort_descending", lambda a: a.sort(dim=-1, descending=True).values, r(3, 5))
    case("stack_dim1", lambda a, b: torch.stack([a, b * 2], dim=1), r(3, 4), r(3, 4))
    case("unflatten", lambda a: a.unflatten(1, (2, 3)) * 1.0, r(4, 6))
    case("chunk3", lambda a: torch.cat([c * (i + 1) for i, c in enumerate(a.chunk(3, dim=1))], dim=1), r(2, 7))

    # losses
    w5 = torch.tensor([0.5, 2.0, 1.0, 0.25, 1.5], dtype=D)
    t_ign = torch.tensor([1, -100, 4, 2, 0, 3])
    case("nll_weighted_ignore", lambda x, t: F.nll_loss(torch.log_softmax(x, 1), t, weight=w5), r(6, 5), t_ign)
    case("nll_sum", lambda x, t: F.nll_loss(x, t, reduction="sum"), r(6, 5), targets)
    case("cross_entropy_weight_smoothing", lambda x, t: F.cross_entropy(x, t, weight=w5, label_smoothing=0.2), r(6, 5), t_ign)
    case("cross_entropy_smoothing_ignore", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.3), r(6, 5), t_ign)
    case("cross_entropy_smoothing_none", lambda x, t: F.cross_entropy(x, t, weight=w5, label_smoothing=0.1, reduction="none"),
         r(6, 5), t_ign)
    probs = lambda *s: torch.rand(*s, dtype=D) * 0.9 + 0.05
    case("bce_weighted", lambda x, t: F.binary_cross_entropy(x, t, weight=torch.tensor([1.0, 2.0, 0.5, 1.0], dtype=D)),
         probs(3, 4), probs(3, 4))
    case("bce_with_logits_pos_weight", lambda x, t: F.binary_cross_entropy_with_logits(
        x, t, weight=torch.tensor([[1.0], [0.5], [2.0]], dtype=D), pos_weight=torch.tensor([1.0, 3.0, 0.5, 2.0], dtype=D)),
         r(3, 4) * 3, probs(3, 4))
    case("bce_with_logits_sum", lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="sum"), r(3, 4) * 20, probs(3, 4))
    case("kl_div_batchmean", lambda x, t: F.kl_div(x, t, reduction="batchmean"), torch.log_softmax(r(3, 4), 1),
         torch.softmax(r(3, 4), 1))
    case("kl_div_log_target", lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True), torch.log_softmax(r(3, 4), 1),
         torch.log_softmax(r(3, 4), 1))
    case("l1_loss", lambda x, t: F.l1_loss(x, t), r(3, 4), r(3, 4))
    case("smooth_l1_beta", lambda x, t: F.smooth_l1_loss(x, t, beta=0.5), r(3, 4), r(3, 4))
    case("huber_delta", lambda x, t: F.huber_loss(x, t, delta=0.7, reduction="sum"), r(3, 4), r(3, 4))

    # ---- convolution, pooling, batch and group norm (issue 10, layers) ----
    case("conv2d_bias", lambda x, w, b: F.conv2d(x, w, b), r(2, 3, 5, 6), r(4, 3, 3, 2), r(4))
    case("conv2d_stride_pad_dilation", lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
         r(2, 2, 7, 6), r(3, 2, 3, 3))
    case("conv2d_groups", lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2), r(2, 4, 5, 5), r(6, 2, 3, 3), r(6))
    case("conv2d_same_even_kernel", lambda x, w: F.conv2d(x, w, padding="same"), r(1, 2, 5, 6), r(3, 2, 2, 4))
    case("conv2d_pointwise", lambda x, w, b: F.conv2d(x, w, b), r(3, 4, 3, 5), r(2, 4, 1, 1), r(2))
    case("conv1d_pad_stride", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), r(2, 3, 9), r(5, 3, 3), r(5))
    case("conv1d_groups_dilation", lambda x, w: F.conv1d(x, w, padding="same", dilation=2, groups=3), r(2, 6, 8), r(3, 2, 3))
    case("max_pool2d", lambda x: F.max_pool2d(x, 2), r(2, 3, 6, 7))
    case("max_pool2d_overlap_pad_ceil", lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), r(2, 2, 6, 7))
    case("max_pool2d_dilation", lambda x: F.max_pool2d(x, (2, 3), stride=1, dilation=(2, 1)), r(1, 2, 6, 6))
    case("avg_pool2d", lambda x: F.avg_pool2d(x, 2), r(2, 3, 6, 7))
    case("avg_pool2d_pad_exclude_ceil", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
         r(2, 2, 6, 7))
    case("avg_pool2d_pad_include", lambda x: F.avg_pool2d(x, (3, 2), stride=(2, 1), padding=(1, 1)), r(1, 2, 5, 6))
    case("avg_pool2d_divisor", lambda x: F.avg_pool2d(x, 2, divisor_override=3), r(1, 2, 4, 4))
    case("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 4)), r(2, 3, 7, 5))
    case("adaptive_avg_pool2d_global", lambda x: F.adaptive_avg_pool2d(x, 1), r(2, 3, 4, 5))
    case("batch_norm_train_affine", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), r(4, 3, 2, 5) * 2 + 1,
         r(3), r(3))
    case("batch_norm_train_1d", lambda x: F.batch_norm(x, None, None, training=True, eps=1e-3), r(6, 4) * 3 - 1)
    case("batch_norm_eval", lambda x, w, b: F.batch_norm(x, torch.tensor([0.5, -1.0, 2.0], dtype=D),
                                                         torch.tensor([1.5, 0.25, 4.0], dtype=D), w, b), r(2, 3, 4), r(3), r(3))
    case("group_norm_affine", lambda x, w, b: F.group_norm(x, 2, w, b), r(3, 4, 5) * 2 + 0.5, r(4), r(4))
    case("group_norm_plain_4d", lambda x: F.group_norm(x, 3, eps=1e-3), r(2, 6, 3, 2))


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
