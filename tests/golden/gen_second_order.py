#!/usr/bin/env python3
"""PyTorch's numbers for examples/second_order (float64), written to tests/golden/second_order.txt.

Both sides build their inputs from the same closed-form formulas (see `init` below and
examples/second_order/experiment.h:formula_tensor), so no random numbers cross the language border.
Run with Debian's python3-torch:
    /usr/bin/python3 tests/golden/gen_second_order.py > tests/golden/second_order.txt
"""
import math
import torch

torch.set_default_dtype(torch.float64)


def formula(shape, phase, scale):
    """value[k] = scale * sin(0.37 k + phase), k the row-major index (as formula_tensor in C++)."""
    n = math.prod(shape)
    return torch.tensor([scale * math.sin(0.37 * k + phase) for k in range(n)]).reshape(shape)


def write(key, t):
    t = t.detach()
    dims = " ".join(str(s) for s in t.shape)
    vals = " ".join(repr(float(v)) for v in t.reshape(-1).tolist())
    print(f"{key} float64 {t.dim()} {dims} {vals}".replace("  ", " "))


# ---- 1. the Hessian of a small MLP's loss ----
def mlp_params():
    return [formula((4, 2), 0.1, 0.8), formula((4,), 0.2, 0.3), formula((1, 4), 0.3, 0.8), formula((1,), 0.4, 0.3)]


def mlp_data():
    x = formula((8, 2), 1.0, 1.0)
    y = formula((8, 1), 2.0, 0.5)
    return x, y


def mlp_loss(w1, b1, w2, b2, x, y):
    return ((torch.tanh(x @ w1.T + b1) @ w2.T + b2 - y) ** 2).mean()


print("case second_order_hessian")
x, y = mlp_data()
params = mlp_params()
flat = torch.cat([p.reshape(-1) for p in params])
sizes = [p.numel() for p in params]


def loss_of_flat(f):
    ps, at = [], 0
    for p, n in zip(params, sizes):
        ps.append(f[at:at + n].reshape(p.shape))
        at += n
    return mlp_loss(*ps, x, y)


H = torch.autograd.functional.hessian(loss_of_flat, flat)
write("loss", loss_of_flat(flat))
write("hessian", H)
write("eigenvalues", torch.linalg.eigvalsh(H))
print("end")


# ---- 2. MAML, one inner step, on sine-wave regression ----
def maml_params():
    return [formula((8, 1), 0.5, 1.0), formula((8,), 0.6, 0.5), formula((1, 8), 0.7, 0.3), formula((1,), 0.8, 0.1)]


def net(p, x):
    return torch.tanh(x @ p[0].T + p[1]) @ p[2].T + p[3]


def task(step, t):
    """Task t of meta step `step`: y = A sin(x + phase), support and query points."""
    k = 2 * step + t
    a = 1.0 + 0.5 * math.sin(0.9 * k)
    ph = 0.3 * k
    xs = formula((5, 1), 0.11 * k, 3.0)
    xq = formula((5, 1), 0.11 * k + 1.3, 3.0)
    return xs, a * torch.sin(xs + ph), xq, a * torch.sin(xq + ph)


INNER_LR, META_LR, STEPS, TASKS = 0.1, 0.05, 30, 2
print("case second_order_maml")
p = [q.clone().requires_grad_(True) for q in maml_params()]
losses = []
for step in range(STEPS):
    meta = 0
    for t in range(TASKS):
        xs, ys, xq, yq = task(step, t)
        inner = ((net(p, xs) - ys) ** 2).mean()
        g = torch.autograd.grad(inner, p, create_graph=True)
        fast = [q - INNER_LR * gq for q, gq in zip(p, g)]
        meta = meta + ((net(fast, xq) - yq) ** 2).mean()
    meta = meta / TASKS
    losses.append(meta.item())
    grads = torch.autograd.grad(meta, p)
    with torch.no_grad():
        for q, gq in zip(p, grads):
            q -= META_LR * gq
write("meta_losses", torch.tensor(losses))
for i, q in enumerate(p):
    write(f"param{i}", q)
print("end")
