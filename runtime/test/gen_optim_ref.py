"""Writes torch 1.13's AdamW and SGD steps for the optimizer kernel tests.

Each case is one parameter tensor stepped K times by torch.optim.AdamW or
torch.optim.SGD (foreach=False) on random gradients, each gradient first
scaled by a clipping coefficient as clip_grad_norm_ scales it (or not).
KernelTest.cpp's Optimizer* tests run the CPU kernels `adamw` / `sgd` the
same K times, in place, and compare the parameter and state with torch's.

Format, one line each: `case NAME KERNEL STEPS LR CLIP` (CLIP 0: none), then
`attr NAME VALUE` lines (the kernel's attributes), then tensor lines
`NAME N VALUES...`: param (initial), grad1..gradK, then the references
want_param and want_<state> (exp_avg, exp_avg_sq or momentum_buffer), then
`end`.

Usage: gen_optim_ref.py OUT
"""
import sys

import torch


def line(name, t):
    values = " ".join(repr(float(x)) for x in t.reshape(-1).tolist())
    return f"{name} {t.numel()} {values}"


def case(out, name, kernel, numel, steps, lr, clip, **hyper):
    g = torch.Generator().manual_seed(len(out) + 11)
    p0 = torch.randn(numel, generator=g)
    grads = [torch.randn(numel, generator=g) for _ in range(steps)]
    p = torch.nn.Parameter(p0.clone())
    if kernel == "adamw":
        opt = torch.optim.AdamW([p], lr=lr, betas=(hyper["beta1"], hyper["beta2"]),
                                eps=hyper["eps"], weight_decay=hyper["weight_decay"],
                                foreach=False)
        states = ["exp_avg", "exp_avg_sq"]
    else:
        opt = torch.optim.SGD([p], lr=lr, momentum=hyper["momentum"],
                              dampening=hyper["dampening"],
                              nesterov=bool(hyper["nesterov"]),
                              weight_decay=hyper["weight_decay"], foreach=False)
        states = ["momentum_buffer"] if hyper["momentum"] else []
    for grad in grads:
        p.grad = grad.clone()
        if clip:
            # clip_grad_norm_ multiplies by a float32 coefficient tensor.
            p.grad.detach().mul_(torch.tensor(clip, dtype=torch.float32))
        opt.step()
    lines = [f"case {name} {kernel} {steps} {lr!r} {clip!r}"]
    lines += [f"attr {k} {float(v)!r}" for k, v in hyper.items()]
    lines.append(line("param", p0))
    lines += [line(f"grad{k + 1}", t) for k, t in enumerate(grads)]
    lines.append(line("want_param", p.detach()))
    lines += [line("want_" + s, opt.state[p][s]) for s in states]
    lines.append("end")
    out.append("\n".join(lines))


def main():
    out = []
    adam = dict(beta1=0.9, beta2=0.999, eps=1e-8)
    # Sizes: one element, a non-multiple of the kernel's chunk, several
    # chunks (so more than one thread takes part).
    case(out, "adamw_one_step", "adamw", 1, 1, 1e-3, 0, weight_decay=0.01, **adam)
    case(out, "adamw_no_decay", "adamw", 1000, 5, 1e-2, 0, weight_decay=0.0, **adam)
    case(out, "adamw_clip_long", "adamw", 40000, 4, 3e-3, 0.37, weight_decay=0.1,
         beta1=0.8, beta2=0.95, eps=1e-6)
    case(out, "sgd_plain", "sgd", 77, 3, 0.1, 0, momentum=0.0, dampening=0.0,
         nesterov=0, weight_decay=0.0)
    case(out, "sgd_momentum_decay", "sgd", 1000, 5, 0.05, 0, momentum=0.9,
         dampening=0.0, nesterov=0, weight_decay=0.01)
    case(out, "sgd_dampening_clip", "sgd", 40000, 4, 0.05, 0.5, momentum=0.9,
         dampening=0.3, nesterov=0, weight_decay=0.0)
    case(out, "sgd_nesterov", "sgd", 333, 3, 0.02, 0, momentum=0.7,
         dampening=0.0, nesterov=1, weight_decay=0.001)
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
