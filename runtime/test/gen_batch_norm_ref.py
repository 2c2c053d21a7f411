"""Writes torch 1.13's training batch norm and its gradient for the kernel tests.

The reference is torch.ops.aten.native_batch_norm (training: y, the saved
mean and inverse standard deviation, the running statistics updated in
place) and native_batch_norm_backward (dx, dweight, dbias), in float64 on
the float32 inputs. KernelTest.cpp's BatchNormTrain* tests read the file and
compare the CPU kernels `batch_norm_train` and `batch_norm_grad` with it.
The kernels take ONNX's momentum (running * momentum + batch * (1 -
momentum)), torch's is 1 - that.

Format, one line each: `case NAME EPSILON MOMENTUM` (ONNX's), then tensor
lines `NAME f32 RANK DIMS... VALUES...` (inputs x, scale, bias,
running_mean, running_var, dy; then the references y, saved_mean,
saved_invstd, next_running_mean, next_running_var, dx, dscale, dbias), then
`end`.

Usage: gen_batch_norm_ref.py OUT
"""
import sys

import torch


def tensor_line(name, t):
    values = " ".join(repr(float(x)) for x in t.reshape(-1).tolist())
    dims = " ".join(str(d) for d in t.shape)
    return f"{name} f32 {t.dim()} {dims} {values}".replace("  ", " ")


def case(out, name, shape, eps, momentum, constant_channel=False):
    g = torch.Generator().manual_seed(len(out) + 11)
    c = shape[1]
    x = torch.randn(*shape, generator=g) * 2 + 0.5
    if constant_channel:
        x[:, 0] = 1.25  # variance 0: the inverse std is 1 / sqrt(eps)
    scale = torch.randn(c, generator=g)
    bias = torch.randn(c, generator=g)
    running_mean = torch.randn(c, generator=g)
    running_var = torch.rand(c, generator=g) + 0.5
    dy = torch.randn(*shape, generator=g)
    x64, w64, b64, dy64 = (t.double() for t in (x, scale, bias, dy))
    rm64, rv64 = running_mean.double(), running_var.double()
    y, mean, invstd = torch.ops.aten.native_batch_norm(
        x64, w64, b64, rm64, rv64, True, 1 - momentum, eps)
    dx, dw, db = torch.ops.aten.native_batch_norm_backward(
        dy64, x64, w64, None, None, mean, invstd, True, eps,
        [True, True, True])
    lines = [f"case {name} {eps!r} {momentum!r}"]
    for n, t in [("x", x), ("scale", scale), ("bias", bias),
                 ("running_mean", running_mean), ("running_var", running_var),
                 ("dy", dy), ("y", y), ("saved_mean", mean),
                 ("saved_invstd", invstd), ("next_running_mean", rm64),
                 ("next_running_var", rv64), ("dx", dx), ("dscale", dw),
                 ("dbias", db)]:
        lines.append(tensor_line(n, t.double()))
    lines.append("end")
    out.append("\n".join(lines))


def main():
    out = []
    case(out, "nchw", [4, 3, 5, 6], 1e-5, 0.9)
    case(out, "batchnorm1d", [8, 32], 1e-5, 0.9)
    case(out, "ncl", [2, 4, 7], 1e-3, 0.8)
    case(out, "two-values-per-channel", [2, 5, 1, 1], 1e-5, 0.9)
    case(out, "constant-channel", [3, 2, 4, 4], 1e-5, 0.9,
         constant_channel=True)
    case(out, "large-plane", [2, 3, 40, 50], 1e-5, 0.99)
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
