"""Writes torch 1.13's attention forward and backward for the kernel tests.

torch 1.13 has no F.scaled_dot_product_attention, so the reference is the
decomposed math, softmax(mask(q @ k_t * scale)) @ v, and its gradients come
from autograd (in float64, on the float32 inputs). KernelTest.cpp's
Attention* tests read the file and compare the CPU kernels `attention`
(with its lse output) and `attention_grad` with it.

Format, one line each: `case NAME MASK_KIND SCALE FILL_VALUE`, then tensor
lines `NAME DTYPE RANK DIMS... VALUES...` (inputs q, k_t, v, mask?, dy; then
the references y, lse, dq, dk_t, dv), then `end`.

Usage: gen_attention_ref.py OUT
"""
import math
import sys

import torch


def tensor_line(name, t):
    dtype = "bool" if t.dtype == torch.bool else "f32"
    values = t.reshape(-1).tolist()
    if dtype == "bool":
        text = " ".join("1" if x else "0" for x in values)
    else:
        text = " ".join(repr(float(x)) for x in values)
    dims = " ".join(str(d) for d in t.shape)
    return f"{name} {dtype} {t.dim()} {dims} {text}".replace("  ", " ")


def case(out, name, batch, l, d, s, dv, kind, scale, fill=0.0, mask=None):
    """`mask`: a function (generator, shape) -> mask tensor for add / fill."""
    g = torch.Generator().manual_seed(len(out) + 7)
    q = torch.randn(*batch, l, d, generator=g)
    kt = torch.randn(*batch, d, s, generator=g)
    v = torch.randn(*batch, s, dv, generator=g)
    dy = torch.randn(*batch, l, dv, generator=g)
    m = mask(g) if mask else None
    q64, kt64, v64 = (t.double().requires_grad_() for t in (q, kt, v))
    z = (q64 @ kt64) * scale
    if kind == "add":
        z = z + m.double()
    elif kind == "fill":
        z = z.masked_fill(m, fill)
    elif kind == "causal":
        keep = torch.tril(torch.ones(l, s, dtype=torch.bool))
        z = z.masked_fill(~keep, -math.inf)
    y = torch.softmax(z, -1) @ v64
    lse = torch.logsumexp(z, -1)
    (y * dy.double()).sum().backward()
    lines = [f"case {name} {kind} {scale!r} {fill!r}"]
    inputs = [("q", q), ("k_t", kt), ("v", v)]
    if m is not None:
        inputs.append(("mask", m))
    inputs.append(("dy", dy))
    refs = [("y", y), ("lse", lse), ("dq", q64.grad), ("dk_t", kt64.grad),
            ("dv", v64.grad)]
    for n, t in inputs + [(n, t.detach().float()) for n, t in refs]:
        lines.append(tensor_line(n, t))
    lines.append("end")
    out.append("\n".join(lines))


def main():
    out = []
    case(out, "none-4d", [2, 3], 7, 3, 5, 4, "none", 0.5)
    case(out, "none-2d", [], 5, 6, 9, 2, "none", 0.125)
    case(out, "ones", [1], 1, 1, 1, 1, "none", 1.0)
    case(out, "add-padding", [2, 2], 6, 4, 8, 3, "add", 0.25,
         mask=lambda g: torch.randn(2, 1, 1, 8, generator=g))
    case(out, "fill-random", [2], 6, 4, 5, 3, "fill", 0.5, -1e4,
         mask=lambda g: torch.rand(2, 6, 5, generator=g) < 0.3)
    # Row 2 is fully masked with -inf: torch's softmax gives NaN there.
    def masked_row(g):
        m = torch.rand(1, 5, 6, generator=g) < 0.3
        m[0, 2, :] = True
        return m
    case(out, "fill-inf-masked-row", [2], 5, 3, 6, 4, "fill", 0.5,
         -math.inf, mask=masked_row)
    # With a finite fill value a fully masked row is uniform, not NaN.
    case(out, "fill-finite-masked-row", [2], 5, 3, 6, 4, "fill", 0.5, -1e4,
         mask=masked_row)
    case(out, "causal-square", [2, 2], 6, 4, 6, 5, "causal", 0.5)
    case(out, "causal-wide", [3], 4, 2, 7, 3, "causal", 0.7)
    case(out, "causal-tall", [1, 2], 7, 5, 3, 2, "causal", 0.3)
    # Several tiles of query rows (dq pass) and of key columns (dk_t and
    # dv pass), with an additive mask broadcast over heads and rows.
    case(out, "add-many-tiles", [1, 2], 100, 8, 700, 4, "add", 0.125,
         mask=lambda g: torch.randn(1, 1, 1, 700, generator=g))
    case(out, "causal-many-tiles", [2], 300, 4, 300, 3, "causal", 0.5)
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
