#!/usr/bin/env python3
"""Golden values for the parts of a LLaMA-style decoder, from PyTorch 2.x and transformers, and for
the ops of the same toolbox round (repeat, flip, lerp, addmm, normalize, ...).

PyTorch 1.13 (Debian's) has no RMSNorm, no enable_gqa and no scale argument in
scaled_dot_product_attention, so this runs in a virtual environment with PyTorch 2.x and
transformers from PyPI (make bench makes one under build/):
    build/torch2-venv/bin/python tests/golden/gen_golden_modern.py > tests/golden/modern.txt
CI reads the committed modern.txt. Same format as gen_golden.py (case/end frames, one tensor per
line), float64 throughout.

Rotary embeddings have no PyTorch op; their references are the two published formulations:
Hugging Face's LLaMA (half-split pairs, rotate_half) and Meta's LLaMA code (interleaved pairs, as
complex numbers multiplied by e^{i t theta}). The attention and MLP modules are transformers'
LlamaAttention and LlamaMLP themselves.
"""
import math

import torch
import torch.nn.functional as F
from gen_golden import fmt_tensor

torch.manual_seed(2025)
D = torch.float64


def r(*shape):
    return torch.randn(*shape, dtype=D)


def case(name, fn, inputs, grads=None, params=None):
    """inputs: tensors in0..; grads: which inputs get a gradient (default: the floating ones);
    params: {minigrad name: torch parameter} written as param:<name> and grad:<name>."""
    grads = grads if grads is not None else [x.is_floating_point() for x in inputs]
    ins = [x.clone().requires_grad_(g) for x, g in zip(inputs, grads)]
    out = fn(*ins)
    gout = torch.randn(out.shape, dtype=D)
    if out.requires_grad:
        (out * gout).sum().backward()
    print(f"case {name}")
    for k, p in (params or {}).items():
        print(fmt_tensor(f"param:{k}", p))
    for i, x in enumerate(ins):
        print(fmt_tensor(f"in{i}", x))
    print(fmt_tensor("out", out))
    print(fmt_tensor("gout", gout))
    for i, x in enumerate(ins):
        if grads[i]:
            print(fmt_tensor(f"grad{i}", x.grad))
    for k, p in (params or {}).items():
        print(fmt_tensor(f"grad:{k}", p.grad))
    print("end")


# ---- RMSNorm (torch.nn.functional.rms_norm, PyTorch 2.4+) ----
case("rms_norm_weight", lambda x, w: F.rms_norm(x, (8,), w), [r(3, 5, 8) * 3 + 1, r(8)])
case("rms_norm_no_weight_eps", lambda x: F.rms_norm(x, (8,), eps=1e-3), [r(4, 8) * 0.01])
case("rms_norm_two_dims", lambda x, w: F.rms_norm(x, (3, 4), w), [r(2, 5, 3, 4), r(3, 4)])
norm = torch.nn.RMSNorm(6, dtype=D)
with torch.no_grad():
    norm.weight.normal_(1, 0.3)
case("rms_norm_module", norm, [r(2, 3, 6)], params={"weight": norm.weight})


# ---- rotary position embedding ----
def tables(d, T, base=10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=D) / d))  # (d/2)
    angles = torch.outer(torch.arange(T, dtype=D), inv_freq)     # (T, d/2)
    return angles.cos(), angles.sin()


def rope_half_split(x, cos, sin):
    """Hugging Face's apply_rotary_pos_emb: pairs (i, i + d/2)."""
    c, s = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return x * c + torch.cat([-x2, x1], -1) * s


def rope_interleaved(x, cos, sin):
    """Meta's LLaMA apply_rotary_emb: pairs (2i, 2i+1) as complex numbers times e^{i angle}."""
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * torch.complex(cos, sin)).flatten(-2)


c6, s6 = tables(8, 6)
case("rope_tables", lambda c, s: torch.cat([c, s], -1), [c6, s6], grads=[False, False])
case("rope_half_split", rope_half_split, [r(2, 3, 6, 8), c6, s6], grads=[True, False, False])
case("rope_interleaved", rope_interleaved, [r(2, 3, 6, 8), c6, s6], grads=[True, False, False])
cb, sb = tables(4, 12, base=500.0)
# positions per batch row (left padding moves them): tables (B, 1, T, d/2) broadcast over the heads
pos = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
case("rope_positions", rope_half_split, [r(2, 3, 5, 4), cb[pos].unsqueeze(1), sb[pos].unsqueeze(1)],
     grads=[True, False, False])

# ---- scaled_dot_product_attention (PyTorch 2.x semantics) ----
sdpa = F.scaled_dot_product_attention
case("sdpa_plain", lambda q, k, v: sdpa(q, k, v), [r(2, 3, 5, 4), r(2, 3, 7, 4), r(2, 3, 7, 4)])
case("sdpa_causal_more_keys", lambda q, k, v: sdpa(q, k, v, is_causal=True), [r(2, 2, 5, 4), r(2, 2, 7, 4), r(2, 2, 7, 4)])
case("sdpa_causal_more_queries", lambda q, k, v: sdpa(q, k, v, is_causal=True), [r(1, 2, 7, 4), r(1, 2, 5, 4), r(1, 2, 5, 4)])
keep = torch.rand(2, 1, 5, 7) > 0.4
keep[0, 0, 2] = False  # a query with no key at all: output 0, gradient 0
case("sdpa_bool_mask", lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), [r(2, 3, 5, 4), r(2, 3, 7, 4), r(2, 3, 7, 4), keep])
bias = r(5, 7)
bias[1, 3] = -math.inf
case("sdpa_float_mask", lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), [r(2, 3, 5, 4), r(2, 3, 7, 4), r(2, 3, 7, 4), bias],
     grads=[True, True, True, False])
case("sdpa_scale", lambda q, k, v: sdpa(q, k, v, scale=0.3, is_causal=True), [r(2, 2, 6, 4), r(2, 2, 6, 4), r(2, 2, 6, 4)])
case("sdpa_gqa", lambda q, k, v: sdpa(q, k, v, is_causal=True, enable_gqa=True), [r(2, 6, 5, 4), r(2, 2, 5, 4), r(2, 2, 5, 4)])
case("sdpa_mqa_value_width", lambda q, k, v: sdpa(q, k, v, enable_gqa=True), [r(2, 4, 5, 4), r(2, 1, 6, 4), r(2, 1, 6, 3)])
case("sdpa_3d", lambda q, k, v: sdpa(q, k, v), [r(3, 5, 4), r(3, 6, 4), r(3, 6, 4)])

# ---- transformers' LLaMA modules ----
from transformers import LlamaConfig  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP, LlamaRotaryEmbedding  # noqa: E402

# attn_implementation="sdpa": the eager one takes its softmax in float32 even for a float64 model.
cfg = LlamaConfig(hidden_size=16, num_attention_heads=4, num_key_value_heads=2, intermediate_size=24,
                  attention_bias=True, mlp_bias=False, rope_theta=10000.0, attn_implementation="sdpa")
attn = LlamaAttention(cfg, layer_idx=0).to(D).eval()
with torch.no_grad():
    for n, p in attn.named_parameters():
        if "bias" in n:
            p.normal_(0, 0.5)
rot = LlamaRotaryEmbedding(cfg)


def llama_attention(x):
    # LlamaRotaryEmbedding computes its angles in float32 whatever the model's dtype; the tables
    # here are the same formula in float64 (checked against it to float32 precision), laid out as
    # transformers wants them: (B, T, d) with the d/2 angles twice.
    T = x.shape[1]
    c, s = tables(4, T)
    hf_cos, hf_sin = rot(x.float(), torch.arange(T).unsqueeze(0))
    assert torch.allclose(hf_cos.double(), torch.cat([c, c], -1), atol=1e-6)
    assert torch.allclose(hf_sin.double(), torch.cat([s, s], -1), atol=1e-6)
    cos, sin = torch.cat([c, c], -1).unsqueeze(0), torch.cat([s, s], -1).unsqueeze(0)
    causal = torch.full((T, T), -math.inf, dtype=D).triu(1)[None, None]
    return attn(x, position_embeddings=(cos, sin), attention_mask=causal)[0]


names = {"q_proj": "w_q", "k_proj": "w_k", "v_proj": "w_v", "o_proj": "w_o"}
case("llama_attention_gqa_rope", llama_attention, [r(2, 6, 16)],
     params={f"{names[n.split('.')[0]]}.{n.split('.')[1]}": p for n, p in attn.named_parameters()})
mlp = LlamaMLP(cfg).to(D)
case("llama_mlp_swiglu", mlp, [r(2, 3, 16)], params=dict(mlp.named_parameters()))


# ---- the toolbox round's ops (appended: the draws above stay the same) ----
case("repeat", lambda x: x.repeat(2, 1, 2), [r(2, 3)])
case("flip", lambda x: torch.flip(x, (0, 2)), [r(2, 3, 4)])
case("repeat_interleave_dim", lambda x: torch.repeat_interleave(x, 2, dim=1), [r(2, 3)])
case("repeat_interleave_flat", lambda x: torch.repeat_interleave(x, 3), [r(2, 2)])
case("repeat_interleave_counts", lambda x, n: torch.repeat_interleave(x, n, dim=0), [r(3, 2), torch.tensor([1, 0, 2])])
w = torch.tensor([0.1, 0.5, 0.9, -0.3], dtype=D)
case("lerp_tensor", lambda a, b, w: torch.lerp(a, b, w), [r(3, 4), r(3, 4), w])
case("lerp_scalar", lambda a, b: torch.lerp(a, b, 0.7), [r(3, 4), r(3, 4)])
case("addmm", lambda i, a, b: torch.addmm(i, a, b, beta=0.5, alpha=2.0), [r(3), r(2, 4), r(4, 3)])
case("baddbmm", lambda i, a, b: torch.baddbmm(i, a, b, beta=2.0, alpha=0.5), [r(2, 1, 3), r(2, 2, 4), r(2, 4, 3)])
xz = r(3, 4)
xz[1] = 0  # a row of zeros: output 0, gradient dy / eps
case("normalize_p2", lambda x: F.normalize(x, p=2.0, dim=1), [xz])
case("normalize_p1_dim0", lambda x: F.normalize(x, p=1.0, dim=0), [r(3, 4)])
case("normalize_p3", lambda x: F.normalize(x, p=3.0, dim=-1), [r(2, 5)])
case("cosine_similarity", lambda a, b: F.cosine_similarity(a, b, dim=1), [r(3, 5), r(1, 5)])
case("masked_select", lambda x, m: torch.masked_select(x, m), [r(3, 4), torch.tensor([True, False, True, True])])
case("pad_constant", lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), [r(2, 3, 4)])
case("pad_constant_crop", lambda x: F.pad(x, (-1, 2, 1, -1)), [r(3, 5)])
case("pad_reflect", lambda x: F.pad(x, (2, 1), mode="reflect"), [r(2, 3, 5)])
case("pad_reflect_2d", lambda x: F.pad(x, (1, 2, 3, 1), mode="reflect"), [r(1, 2, 4, 5)])
case("pad_replicate", lambda x: F.pad(x, (2, 1, 1, 2), mode="replicate"), [r(1, 2, 3, 4)])
case("pad_circular", lambda x: F.pad(x, (4, 2, 1, 3), mode="circular"), [r(1, 1, 3, 4)])
I = F.interpolate
case("interp_nearest_size", lambda x: I(x, size=(5, 7), mode="nearest"), [r(1, 2, 3, 4)])
case("interp_nearest_scale", lambda x: I(x, scale_factor=1.7, mode="nearest"), [r(1, 1, 3, 5)])
case("interp_nearest_down_1d", lambda x: I(x, size=3, mode="nearest"), [r(2, 3, 7)])
case("interp_nearest_3d", lambda x: I(x, size=(3, 4, 5), mode="nearest"), [r(1, 1, 2, 3, 4)])
case("interp_linear", lambda x: I(x, size=8, mode="linear", align_corners=False), [r(2, 3, 5)])
case("interp_linear_align", lambda x: I(x, size=8, mode="linear", align_corners=True), [r(2, 3, 5)])
case("interp_bilinear", lambda x: I(x, size=(5, 6), mode="bilinear", align_corners=False), [r(1, 2, 3, 4)])
case("interp_bilinear_align", lambda x: I(x, size=(5, 6), mode="bilinear", align_corners=True), [r(1, 2, 3, 4)])
case("interp_bilinear_scale", lambda x: I(x, scale_factor=(1.5, 2.5), mode="bilinear"), [r(1, 1, 4, 5)])
case("interp_bilinear_down", lambda x: I(x, size=(2, 3), mode="bilinear"), [r(2, 1, 5, 7)])
nn = torch.nn
ct = nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1, output_padding=1, groups=2).to(D)
case("conv_transpose2d", ct, [r(2, 4, 3, 4)], params=dict(ct.named_parameters()))
ctd = nn.ConvTranspose2d(3, 2, 3, stride=(1, 2), padding=(0, 1), dilation=2, bias=False).to(D)
case("conv_transpose2d_dilation", ctd, [r(1, 3, 4, 3)], params=dict(ctd.named_parameters()))
ct1 = nn.ConvTranspose1d(2, 4, 3, stride=3, padding=1, output_padding=2).to(D)
case("conv_transpose1d", ct1, [r(2, 2, 5)], params=dict(ct1.named_parameters()))

# ---- einsum, diagonal, scatter, scatter_reduce, advanced indexing ----
E = torch.einsum
case("einsum_matmul", lambda a, b: E("ij,jk->ik", a, b), [r(2, 3), r(3, 4)])
case("einsum_bmm", lambda a, b: E("bij,bjk->bik", a, b), [r(2, 3, 4), r(2, 4, 5)])
case("einsum_attention_scores", lambda q, k: E("bhqd,bhkd->bhqk", q, k), [r(2, 2, 3, 4), r(2, 2, 5, 4)])
case("einsum_diagonal", lambda a: E("ii->i", a), [r(3, 3)])
case("einsum_trace", lambda a: E("ii", a), [r(4, 4)])
case("einsum_repeated_with_others", lambda a: E("iji->j", a), [r(3, 2, 3)])
case("einsum_triple_diagonal", lambda a: E("iii->i", a), [r(3, 3, 3)])
case("einsum_outer", lambda a, b: E("i,j->ij", a, b), [r(3), r(4)])
case("einsum_ellipsis_broadcast", lambda a, b: E("...ij,...jk", a, b), [r(2, 1, 3, 4), r(5, 4, 6)])
case("einsum_ellipsis_summed", lambda a: E("...ij->j", a), [r(5, 2, 3)])
case("einsum_ellipsis_middle", lambda a: E("i...j->j...i", a), [r(2, 3, 4, 5)])
case("einsum_dot_all", lambda a, b: E("ij,ij->", a, b), [r(3, 4), r(3, 4)])
case("einsum_chain", lambda a, b, c: E("ij,jk,kl->il", a, b, c), [r(2, 3), r(3, 4), r(4, 5)])
case("einsum_three_way", lambda a, b, c: E("i,i,i->i", a, b, c), [r(4), r(4), r(4)])
case("einsum_uppercase_implicit", lambda a, b: E("bA,Ab", a, b), [r(2, 3), r(3, 2)])
case("einsum_size_one_broadcast", lambda a, b: E("ij,jk->ik", a, b), [r(2, 1), r(3, 4)])
case("einsum_scalar_operand", lambda a, b: E("i,->i", a, b), [r(3), torch.randn((), dtype=D)])
case("einsum_own_sums", lambda a, b: E("ab,cd->", a, b), [r(2, 3), r(4, 5)])
case("einsum_permuted_contraction", lambda a, b: E("ijk,jil->kl", a, b), [r(2, 3, 4), r(3, 2, 5)])
case("einsum_later_operand_needs", lambda a, b, c: E("ia,jb,ab->ij", a, b, c), [r(2, 3), r(4, 5), r(3, 5)])
case("einsum_spaces", lambda a, b: E(" i j , j k -> k i ", a, b), [r(2, 3), r(3, 4)])
case("diagonal_offset", lambda a: torch.diagonal(a, 1, 0, 2), [r(3, 2, 4)])
case("diagonal_negative_offset", lambda a: torch.diagonal(a, -1, 2, 1), [r(2, 4, 3)])
idx = torch.tensor([[0, 2, 1], [2, 0, 0]])
case("scatter", lambda b, i, s: torch.scatter(b, 0, i, s), [r(3, 4), torch.tensor([[0, 2, 1], [1, 0, 2]]), r(2, 3)])
case("scatter_value", lambda b, i: torch.scatter(b, 1, i, 2.5), [r(2, 4), torch.tensor([[3, 0], [1, 1]])])
case("scatter_add", lambda b, i, s: torch.scatter_add(b, 0, i, s), [r(3, 4), idx, r(2, 3)])
# ties for amax/amin and zeros for prod: small integers as floats
ties = torch.tensor([[1., 3., 0.], [3., 3., 2.], [0., 1., 2.]], dtype=D)
tbase = torch.tensor([[3., 0., 1., 2.], [1., 2., 3., 0.], [2., 2., 0., 1.]], dtype=D)
tidx = torch.tensor([[0, 2, 1], [0, 2, 1], [1, 0, 1]])
for red in ["sum", "prod", "mean", "amax", "amin"]:
    for inc in [True, False]:
        case(f"scatter_reduce_{red}_{'self' if inc else 'noself'}",
             lambda b, i, s, red=red, inc=inc: torch.scatter_reduce(b, 0, i, s, red, include_self=inc),
             [tbase, tidx, ties])
case("scatter_reduce_prod_random", lambda b, i, s: torch.scatter_reduce(b, 1, i, s, "prod"),
     [r(2, 4), torch.tensor([[0, 3, 0], [1, 1, 2]]), r(2, 3)])
case("index_get", lambda x, i, j: x[i, j], [r(4, 5, 2), torch.tensor([[0, 3], [-1, 1]]), torch.tensor([1, -2])])
case("index_get_mask", lambda x, m: x[m], [r(3, 4, 2), torch.tensor([[True, False, True, False], [False, False, True, True], [True, False, False, False]])])
case("index_put", lambda x, i, v: torch.index_put(x, (i,), v), [r(5, 3), torch.tensor([4, 0, 2]), r(3, 3)])
case("index_put_broadcast_values", lambda x, i, j, v: torch.index_put(x, (i, j), v), [r(4, 3, 2), torch.tensor([0, 3]), torch.tensor([2, 0]), r(2)])
case("index_put_accumulate", lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True), [r(4, 3), torch.tensor([1, 3, 1, 1]), r(4, 3)])

# ---- L-BFGS: the parameters after every step(), and the closure evaluations so far ----
def lbfgs_case(name, params, loss_fn, steps, **kw):
    opt = torch.optim.LBFGS(params, **kw)
    xs, evals, losses = [], [], []
    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss
    for _ in range(steps):
        losses.append(float(opt.step(closure).detach()))
        xs.append(torch.cat([p.detach().flatten() for p in params]))
        evals.append(opt.state[opt._params[0]]["func_evals"])
    print(f"case {name}")
    for i, s in enumerate(starts):  # the parameters' starting values, then any data
        print(fmt_tensor(f"start{i}", s))
    print(fmt_tensor("xs", torch.stack(xs)))
    print(fmt_tensor("losses", torch.tensor(losses, dtype=D)))
    print(fmt_tensor("evals", torch.tensor(evals, dtype=D)))
    print("end")


def rosenbrock(xy):
    return (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2


for name, steps, kw in [("lbfgs_rosenbrock", 30, dict(lr=0.1)),
                        ("lbfgs_rosenbrock_strong_wolfe", 6, dict(lr=1, line_search_fn="strong_wolfe")),
                        ("lbfgs_rosenbrock_short_history", 8, dict(lr=1, history_size=3, max_iter=7,
                                                                   line_search_fn="strong_wolfe"))]:
    xy = torch.tensor([-1.5, 2.0], dtype=D, requires_grad=True)
    starts = [xy.detach().clone()]
    lbfgs_case(name, [xy], lambda: rosenbrock(xy), steps, **kw)

# several parameters, flattened in order: a small logistic regression with an L4 penalty
torch.manual_seed(11)
Xl, Yl = torch.randn(8, 3, dtype=D), (torch.rand(8, dtype=D) > 0.5).to(D)
W, b = r(1, 3), r(1)
starts = [W.clone(), b.clone(), Xl, Yl]
W.requires_grad_(), b.requires_grad_()
lbfgs_case("lbfgs_logistic_two_params", [W, b],
           lambda: F.binary_cross_entropy_with_logits((Xl @ W.T + b).flatten(), Yl) + 0.1 * (W ** 4).sum(), 3,
           lr=0.5, max_iter=10, history_size=4, line_search_fn="strong_wolfe")

# ---- PyTorch's own state_dict layout (in_proj_weight, out_proj): its entries in order
# ("sd:<index>:<name>"), an input, and the module's output ----
def layout_case(name, module, inputs, call):
    torch.manual_seed(99)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, dtype=D) * 0.3)
    module.eval()
    print(f"case {name}")
    for i, (k, v) in enumerate(module.state_dict().items()):
        print(fmt_tensor(f"sd:{i:02d}:{k}", v))
    for i, x in enumerate(inputs):
        print(fmt_tensor(f"in{i}", x))
    with torch.no_grad():
        print(fmt_tensor("out", call(module, *inputs)))
    print("end")


layout_case("torch_layout_mha", nn.MultiheadAttention(8, 2, batch_first=True, dtype=D), [r(2, 3, 8), r(2, 4, 8)],
            lambda m, q, kv: m(q, kv, kv, need_weights=False)[0])
layout_case("torch_layout_mha_no_bias", nn.MultiheadAttention(8, 4, bias=False, batch_first=True, dtype=D),
            [r(1, 5, 8)], lambda m, x: m(x, x, x, need_weights=False)[0])
layout_case("torch_layout_encoder_layer",
            nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, dtype=D),
            [r(2, 4, 8)], lambda m, x: m(x))
layout_case("torch_layout_decoder_layer",
            nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, dtype=D),
            [r(2, 3, 8), r(2, 5, 8)], lambda m, x, mem: m(x, mem))


# ---- interpolate's other modes (issue 49): bicubic, nearest-exact, area, recompute_scale_factor ----
# (appended last, so that every case above draws the same inputs as before)
case("interp_bicubic", lambda x: I(x, size=(5, 7), mode="bicubic", align_corners=False), [r(1, 2, 3, 4)])
case("interp_bicubic_align", lambda x: I(x, size=(6, 3), mode="bicubic", align_corners=True), [r(1, 1, 4, 5)])
case("interp_bicubic_scale", lambda x: I(x, scale_factor=(1.5, 0.6), mode="bicubic"), [r(2, 1, 4, 5)])
case("interp_nearest_exact", lambda x: I(x, size=(5, 3), mode="nearest-exact"), [r(1, 2, 3, 7)])
case("interp_nearest_exact_scale", lambda x: I(x, scale_factor=1.7, mode="nearest-exact"), [r(2, 1, 6)])
case("interp_area", lambda x: I(x, size=(2, 3), mode="area"), [r(1, 2, 5, 7)])
case("interp_area_1d_up", lambda x: I(x, size=9, mode="area"), [r(2, 1, 4)])
case("interp_nearest_recompute", lambda x: I(x, scale_factor=1.7, mode="nearest", recompute_scale_factor=True),
     [r(1, 1, 3, 5)])
case("interp_bilinear_recompute",
     lambda x: I(x, scale_factor=(1.5, 2.3), mode="bilinear", recompute_scale_factor=True), [r(1, 1, 4, 5)])
