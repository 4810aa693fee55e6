#!/usr/bin/python3
"""Golden values for minigrad's nn modules and optimizers, computed by PyTorch.

Run with Debian's python3-torch:
    /usr/bin/python3 tests/golden/gen_golden_nn.py > tests/golden/nn.txt
Same file format as gen_golden.py. Module cases (float64) hold each parameter under
"param:<minigrad name>", the inputs in0.., the outputs ("out", and "weights" for attention), the
upstream gradient "gout", the input gradients grad0.. and each parameter's gradient under
"grad:<minigrad name>". torch's MultiheadAttention keeps W_Q, W_K, W_V stacked in one
in_proj_weight (3E, E); its three row blocks are minigrad's w_q, w_k, w_v.
Optimizer cases (float32) hold the parameters after a few steps of torch.optim.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from gen_golden import fmt_tensor

torch.manual_seed(4321)
D = torch.float64


def mha_params(prefix, m, out):
    E = m.embed_dim
    for i, w in enumerate(["w_q", "w_k", "w_v"]):
        out[f"{prefix}{w}.weight"] = (m.in_proj_weight, i, E, "w")
        out[f"{prefix}{w}.bias"] = (m.in_proj_bias, i, E, "b")
    out[f"{prefix}w_o.weight"] = (m.out_proj.weight, None, None, None)
    out[f"{prefix}w_o.bias"] = (m.out_proj.bias, None, None, None)


def param_map(module):
    """minigrad name -> (torch tensor, chunk index or None, chunk size)."""
    out = {}
    mhas = {n: m for n, m in module.named_modules() if isinstance(m, nn.MultiheadAttention)}
    for n, m in mhas.items():
        mha_params(n + "." if n else "", m, out)
    for n, p in module.named_parameters():
        owner = n.rsplit(".", 2)[0] if n.count(".") >= 1 else ""
        if any(n.startswith((k + "." if k else "")) and ("in_proj" in n or "out_proj" in n) for k in mhas):
            continue
        out[n] = (p, None, None, None)
    return out


def get(entry, grad=False):
    t, i, E, _ = entry
    t = t.grad if grad else t
    return t if i is None else t[i * E:(i + 1) * E]


def module_case(name, module, fn, inputs, extra_out=None, buffers=False):
    module = module.to(D)
    with torch.no_grad():  # random biases make the test stronger than torch's zero init
        for n, p in module.named_parameters():
            if "bias" in n:
                p.normal_(0, 0.5)
    ins = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    before = {n: b.clone() for n, b in module.named_buffers()} if buffers else {}
    outs = fn(module, *ins)
    out, weights = outs if isinstance(outs, tuple) else (outs, None)
    gout = torch.randn(out.shape, dtype=D)
    (out * gout).sum().backward()
    pm = param_map(module)
    print(f"case {name}")
    for k, e in pm.items():
        print(fmt_tensor(f"param:{k}", get(e)))
    for i, x in enumerate(ins):
        print(fmt_tensor(f"in{i}", x))
    print(fmt_tensor("out", out))
    if weights is not None:
        print(fmt_tensor("weights", weights))
    print(fmt_tensor("gout", gout))
    for i, x in enumerate(ins):
        if x.is_floating_point():
            print(fmt_tensor(f"grad{i}", x.grad))
    for k, e in pm.items():
        print(fmt_tensor(f"grad:{k}", get(e, grad=True)))
    for k, b in before.items():  # the buffers before the forward, and after it
        print(fmt_tensor(f"state:{k}", b.double() if b.is_floating_point() else b))
    if buffers:
        for k, b in module.named_buffers():
            print(fmt_tensor(f"buffer:{k}", b.double() if b.is_floating_point() else b))
    print("end")


def r(*s):
    return torch.randn(*s, dtype=D)


module_case("module_linear", nn.Linear(4, 3), lambda m, x: m(x), [r(2, 5, 4)])
module_case("module_embedding", nn.Embedding(7, 4), lambda m, i: m(i), [torch.tensor([[0, 3, 3], [6, 1, 0]])])
module_case("module_layer_norm", nn.LayerNorm(6), lambda m, x: m(x), [r(2, 3, 6) * 2 + 1])

causal = torch.ones(5, 5, dtype=torch.bool).triu(1)  # True = may not attend (torch's convention)
module_case("mha_self_causal", nn.MultiheadAttention(8, 2, batch_first=True),
            lambda m, x: m(x, x, x, attn_mask=causal, need_weights=True, average_attn_weights=False),
            [r(2, 5, 8)])
pad = torch.tensor([[False, False, False, False, True, True], [False, False, False, False, False, True]])
module_case("mha_cross_padding", nn.MultiheadAttention(8, 4, batch_first=True),
            lambda m, q, k, v, p: m(q, k, v, key_padding_mask=p, need_weights=True, average_attn_weights=False),
            [r(2, 3, 8), r(2, 6, 8), r(2, 6, 8), pad])
module_case("encoder_post_ln_relu",
            nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True),
            lambda m, x: m(x), [r(2, 4, 8)])
module_case("encoder_pre_ln_gelu",
            nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True),
            lambda m, x: m(x, src_mask=torch.ones(4, 4, dtype=torch.bool).triu(1)), [r(2, 4, 8)])
module_case("decoder_post_ln",
            nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True),
            lambda m, t, mem: m(t, mem, tgt_mask=torch.ones(3, 3, dtype=torch.bool).triu(1)),
            [r(2, 3, 8), r(2, 5, 8)])
module_case("decoder_pre_ln_gelu",
            nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True),
            lambda m, t, mem: m(t, mem, tgt_mask=torch.ones(3, 3, dtype=torch.bool).triu(1)),
            [r(2, 3, 8), r(2, 5, 8)])

# ---- optimizers: 5 steps on mean((x W^T + b - y)^2), float32 like a real run ----
X = torch.randn(8, 4)
Y = torch.randn(8, 3)
W0 = torch.randn(3, 4) * 0.5
B0 = torch.randn(3) * 0.5
print("case optim_problem")
print(fmt_tensor("x", X.double()))
print(fmt_tensor("y", Y.double()))
print(fmt_tensor("w0", W0.double()))
print(fmt_tensor("b0", B0.double()))
print("end")


def optim_case(name, make, steps=5, clip=None):
    W = W0.clone().requires_grad_(True)
    b = B0.clone().requires_grad_(True)
    opt = make(W, b)
    norms = []
    for _ in range(steps):
        loss = F.mse_loss(F.linear(X, W, b), Y)
        opt.zero_grad()
        loss.backward()
        if clip is not None:
            norms.append(float(torch.nn.utils.clip_grad_norm_([W, b], clip)))
        opt.step()
    print(f"case {name}")
    print(fmt_tensor("w", W.detach().double()))
    print(fmt_tensor("b", b.detach().double()))
    if norms:
        print(fmt_tensor("norms", torch.tensor(norms, dtype=D)))
    print("end")


O = torch.optim
optim_case("sgd_plain", lambda W, b: O.SGD([W, b], lr=0.1))
optim_case("sgd_momentum_dampening_wd", lambda W, b: O.SGD([W, b], lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01))
optim_case("sgd_nesterov", lambda W, b: O.SGD([W, b], lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01))
optim_case("adam", lambda W, b: O.Adam([W, b], lr=0.01))
optim_case("adam_wd", lambda W, b: O.Adam([W, b], lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1))
optim_case("adamw", lambda W, b: O.AdamW([W, b], lr=0.01, weight_decay=0.1))
optim_case("adamw_groups", lambda W, b: O.AdamW([{"params": [W]}, {"params": [b], "weight_decay": 0.0, "lr": 0.02}],
                                                lr=0.01, weight_decay=0.1))
optim_case("sgd_clipped", lambda W, b: O.SGD([W, b], lr=0.1), clip=0.5)


# ---- convolution, normalization and recurrent layers (appended: the draws above stay the same) ----
def randomize(module, names=("weight",)):
    """Random values for parameters torch starts at ones (norm weights), for a stronger test."""
    with torch.no_grad():
        for n, p in module.named_parameters():
            if n.split(".")[-1] in names:
                p.normal_(1, 0.5)
    return module


module_case("module_conv2d", nn.Conv2d(3, 4, 3, stride=2, padding=1), lambda m, x: m(x), [r(2, 3, 7, 6)])
module_case("module_conv2d_groups_same", nn.Conv2d(4, 6, (2, 3), padding="same", groups=2, bias=False), lambda m, x: m(x),
            [r(2, 4, 5, 5)])
module_case("module_conv1d", nn.Conv1d(3, 5, 3, padding=2, dilation=2), lambda m, x: m(x), [r(2, 3, 8)])
module_case("module_batch_norm2d_train", randomize(nn.BatchNorm2d(3, momentum=0.3)), lambda m, x: m(x), [r(4, 3, 2, 3) * 2 + 1],
            buffers=True)
bn_eval = randomize(nn.BatchNorm1d(4))
with torch.no_grad():
    bn_eval.running_mean.normal_(0, 1)
    bn_eval.running_var.uniform_(0.5, 2)
    bn_eval.num_batches_tracked.fill_(7)
bn_eval.eval()
module_case("module_batch_norm1d_eval", bn_eval, lambda m, x: m(x), [r(5, 4, 3)], buffers=True)
module_case("module_batch_norm1d_cumulative", randomize(nn.BatchNorm1d(3, momentum=None)), lambda m, x: m(x), [r(6, 3) + 2],
            buffers=True)
module_case("module_group_norm", randomize(nn.GroupNorm(2, 4)), lambda m, x: m(x), [r(3, 4, 5)])
module_case("rnn_cell_relu", nn.RNNCell(4, 3, nonlinearity="relu"), lambda m, x, h: m(x, h), [r(2, 4), r(2, 3)])
module_case("gru_cell", nn.GRUCell(4, 3), lambda m, x, h: m(x, h), [r(2, 4), r(2, 3)])
module_case("lstm_cell", nn.LSTMCell(4, 3), lambda m, x, h, c: torch.cat([t.flatten() for t in m(x, (h, c))]),
            [r(2, 4), r(2, 3), r(2, 3)])
module_case("rnn_tanh_2layer", nn.RNN(4, 3, num_layers=2), lambda m, x, h: torch.cat([t.flatten() for t in m(x, h)]),
            [r(5, 2, 4), r(2, 2, 3)])
module_case("gru_batch_first_bidirectional", nn.GRU(4, 3, batch_first=True, bidirectional=True),
            lambda m, x: torch.cat([t.flatten() for t in m(x)]), [r(2, 5, 4)])
module_case("lstm_2layer_bidirectional", nn.LSTM(3, 4, num_layers=2, bidirectional=True),
            lambda m, x, h, c: torch.cat([m(x, (h, c))[0].flatten()] + [t.flatten() for t in m(x, (h, c))[1]]),
            [r(6, 2, 3), r(4, 2, 4), r(4, 2, 4)])
module_case("lstm_unbatched_no_bias", nn.LSTM(3, 2, bias=False), lambda m, x: torch.cat([m(x)[0].flatten()] + [t.flatten() for t in m(x)[1]]),
            [r(4, 3)])

# ---- RMSprop and Adagrad (appended: the draws above stay the same) ----
optim_case("rmsprop", lambda W, b: O.RMSprop([W, b], lr=0.01))
optim_case("rmsprop_centered_momentum_wd", lambda W, b: O.RMSprop([W, b], lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1,
                                                                   momentum=0.8, centered=True))
optim_case("adagrad", lambda W, b: O.Adagrad([W, b], lr=0.1))
optim_case("adagrad_decay_init_wd", lambda W, b: O.Adagrad([W, b], lr=0.1, lr_decay=0.05, weight_decay=0.1,
                                                            initial_accumulator_value=0.5, eps=1e-6))

# ---- learning-rate schedules: the lr of group 0 after each of 12 steps (appended) ----
def schedule_case(name, make, steps=12):
    w = torch.zeros(1, requires_grad=True)
    opt = O.SGD([w], lr=0.1)
    sched = make(opt)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    print(f"case {name}")
    print(fmt_tensor("lrs", torch.tensor(lrs, dtype=D)))
    print("end")


S = O.lr_scheduler
schedule_case("sched_lambda", lambda o: S.LambdaLR(o, lambda t: 0.9 ** t))
schedule_case("sched_linear", lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=4))
schedule_case("sched_linear_down", lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=6))
schedule_case("sched_sequential", lambda o: S.SequentialLR(
    o, [S.LinearLR(o, start_factor=0.1, total_iters=3), S.StepLR(o, step_size=2, gamma=0.5)], milestones=[3]))


# ---- OneCycleLR (rates and the momentum it cycles) and ReduceLROnPlateau (appended) ----
def one_cycle_case(name, make_opt, make, key, steps=12):
    w = torch.zeros(1, requires_grad=True)
    opt = make_opt([w])
    sched = make(opt)
    mom = (lambda g: g["betas"][0]) if key == "beta1" else (lambda g: g["momentum"])
    lrs, moms = [opt.param_groups[0]["lr"]], [mom(opt.param_groups[0])]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(mom(opt.param_groups[0]))
    print(f"case {name}")
    print(fmt_tensor("lrs", torch.tensor(lrs, dtype=D)))
    print(fmt_tensor("momenta", torch.tensor(moms, dtype=D)))
    print("end")


one_cycle_case("sched_one_cycle", lambda p: O.SGD(p, lr=0.1, momentum=0.9),
               lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=12), "momentum")
one_cycle_case("sched_one_cycle_linear_three_phase_adam", lambda p: O.Adam(p, lr=0.1),
               lambda o: S.OneCycleLR(o, max_lr=0.02, total_steps=12, pct_start=0.25, anneal_strategy="linear",
                                      three_phase=True, base_momentum=0.8, max_momentum=0.9, div_factor=10,
                                      final_div_factor=100), "beta1")

# the momentum it sets is the one the optimizer steps with: SGD on a least-squares fit
torch.manual_seed(7)
X, Y = torch.randn(6, 3, dtype=D), torch.randn(6, dtype=D)
w = torch.zeros(3, dtype=D, requires_grad=True)
opt = O.SGD([w], lr=0.1, momentum=0.9, nesterov=True)
sched = S.OneCycleLR(opt, max_lr=0.2, total_steps=10)
ws = []
for _ in range(10):
    opt.zero_grad()
    ((X @ w - Y) ** 2).mean().backward()
    opt.step()
    sched.step()
    ws.append(w.detach().clone())
print("case sched_one_cycle_sgd_fit")
print(fmt_tensor("X", X))
print(fmt_tensor("Y", Y))
print(fmt_tensor("ws", torch.stack(ws)))
print("end")


def plateau_case(name, metrics, **kw):
    w = torch.zeros(1, requires_grad=True)
    opt = O.SGD([w], lr=0.1)
    sched = S.ReduceLROnPlateau(opt, **kw)
    lrs = []
    for m in metrics:
        opt.step()
        sched.step(m)
        lrs.append(opt.param_groups[0]["lr"])
    print(f"case {name}")
    print(fmt_tensor("metrics", torch.tensor(metrics, dtype=D)))
    print(fmt_tensor("lrs", torch.tensor(lrs, dtype=D)))
    print("end")


plateau_case("sched_plateau_min", [1.0, 0.9, 0.9, 0.95, 0.91, 0.895, 0.9, 0.9, 0.9, 0.9, 0.8, 0.8, 0.8, 0.8, 0.8],
             factor=0.5, patience=2, threshold=0.01, cooldown=1)
plateau_case("sched_plateau_max_abs", [0.1, 0.2, 0.25, 0.26, 0.27, 0.2, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3],
             mode="max", factor=0.2, patience=1, threshold=0.02, threshold_mode="abs", min_lr=0.005)


# ---- stacks of Transformer layers (last, so the cases above keep their random draws). PyTorch
# deep-copies one layer N times; each copy's weights are nudged here so the layers differ, as
# minigrad's (initialised one after another) do ----
def stack(module):
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape) * 0.2)
    return module


module_case("encoder_stack_pre_ln_norm",
            stack(nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                                                   activation="gelu", batch_first=True,
                                                                   norm_first=True),
                                        2, norm=nn.LayerNorm(8), enable_nested_tensor=False)),
            lambda m, x: m(x, mask=torch.ones(4, 4, dtype=torch.bool).triu(1)), [r(2, 4, 8)])
module_case("decoder_stack_post_ln",
            stack(nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                                                   batch_first=True), 3)),
            lambda m, t, mem: m(t, mem, tgt_mask=torch.ones(3, 3, dtype=torch.bool).triu(1)),
            [r(2, 3, 8), r(2, 5, 8)])
