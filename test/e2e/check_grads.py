#!/usr/bin/env python3
"""Gradients of fsdp-autodiff against torch.autograd, run on the executor.

    check_grads.py BUILD_DIR [--keep DIR]

Each model below is built in torch, exported with its loss through
fsdp_mlir.export, compiled with `fsdp-opt --fsdp-autodiff
--fsdp-inference --fsdp-lower-pipeline` and `fsdp-translate --mlir-to-plan`, and run by
fsdp-run on fresh inputs; the plan returns the loss and one `grad.<fqn>`
per trainable parameter. torch computes the same loss and
`loss.backward()` on the same weights and inputs. Every trainable
parameter must have a gradient equal to torch's within
|ours - torch| <= 1e-6 + 1e-4 |torch| (absolute plus relative: some
gradients are mathematically zero), frozen parameters none, and tied
parameters one (the sum over their uses). Exit 1 on any mismatch.

The models: small ones written here (a frozen backbone and a weight tied
between two Linears with Tanh/Sigmoid gating; 3-D activations with softmax
gating, division by a parameter and a sequence mean; convolutions, pooling
and BatchNorm; 1-D and 3-D pooling and ceil_mode windows wider than
their map; Log, Abs and a max over a dimension; triu and tril
(Trilu), cumsum (CumSum) and repeat (Tile); strided and reversed
slices, 1-D MatMul operands and a
class-weighted cross-entropy over [N, C, T] logits; torch.gather with a
repeated index and a class-weighted nll_loss of log-probabilities, which
export as GatherElements and NegativeLogLikelihoodLoss; slice and select
copy_, index_put, torch.scatter and scatter_add (ScatterND and
ScatterElements, with none and add); a MobileNetV3-like
block: HardSwish, a HardSigmoid squeeze-excite, per-channel PReLU, ELU and
reflect, replicate and constant padding; nearest and bilinear upsampling and
a transposed convolution; LRN and MeanVarianceNormalization, rewritten at
import; torch.einsum in every form: attention, Funnel's relative attention,
two contracted letters, a letter summed away, a parameter broadcast over
the batch, an ellipsis, a permutation plus a sum, diagonals); F.grid_sample
in every mode, padding mode and align_corners on a learned image and a
learned grid offset), and every model of
the corpus exactly as exported in build/test/corpus, with torch's weights
loaded from the ONNX file, among them GPT-2 (embeddings with a tied
lm_head, LayerNorm, fused QKV split, causal masked attention, tanh-GELU)
and LLaMA (RMSNorm, rotary embeddings by Slice/Neg/Concat, SwiGLU), also
with activation checkpointing of chosen units. Training-mode BatchNorm runs
as the fused batch_norm_train / batch_norm_grad kernels (their count in
each plan checked), and ResNet-18 once more with fuse-batch-norm=false
(decomposed).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python-frontend"))
sys.path.insert(0, str(ROOT / "test" / "corpus"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

ATOL, RTOL = 1e-6, 1e-4


class TiedMLP(nn.Module):
    """Frozen backbone, a weight tied between two Linears, 2-D Gemms."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.backbone.requires_grad_(False)
        self.enc = nn.Linear(16, 16)
        self.dec = nn.Linear(16, 16)
        self.dec.weight = self.enc.weight
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h = self.backbone(x)
        h = torch.tanh(self.enc(h))
        h = torch.sigmoid(self.dec(h)) * h - 0.5 * h
        return self.head(h)


class SeqMLP(nn.Module):
    """3-D activations: MatMul with broadcast weights, softmax gating,
    division, a mean over the sequence."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.gate = nn.Linear(16, 16, bias=False)
        self.head = nn.Linear(16, 5)
        self.scale = nn.Parameter(torch.full((16,), 2.0))

    def forward(self, x):
        h = torch.relu(self.proj(x))
        h = h * torch.softmax(self.gate(h), dim=-1) / self.scale
        return self.head(h.mean(dim=1))


class ConvNet(nn.Module):
    """Convolutions (strided, padded, grouped, dilated, with and without
    bias, 1x1), max and average pooling, training-mode BatchNorm."""

    def __init__(self):
        super().__init__()
        # No bias before BatchNorm: its gradient would be zero (as noise).
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2, bias=False)
        self.avg = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)
        self.conv3 = nn.Conv2d(8, 6, 1)
        self.head = nn.Linear(6, 5)

    def forward(self, x):
        h = self.pool(torch.relu(self.bn1(self.conv1(x))))
        h = self.avg(torch.relu(self.conv2(h)))
        h = self.conv3(h)
        return self.head(h.mean(dim=(2, 3)))


class Pools(nn.Module):
    """1-D pooling (SEW's squeeze AvgPool1d, a padded MaxPool1d), 3-D pooling
    (each two 2-D pools in the plan; a padded average without the padding
    in its count) and ceil_mode average pools whose window is wider than
    their map (EfficientNet's AvgPool2d(hidden_dim, ceil_mode=True) over a
    1x1 map; one over a padded 2x2 map that counts the padding)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 6, 3, padding=1)
        self.squeeze = nn.AvgPool1d(2, 2)
        self.max1 = nn.MaxPool1d(3, stride=2, padding=1)
        self.proj = nn.Linear(48, 2 * 4 * 4 * 4)
        self.avg3 = nn.AvgPool3d((2, 3, 3), stride=2, padding=(0, 1, 1),
                                 count_include_pad=False)
        self.max3 = nn.MaxPool3d(2, stride=2)
        self.wide = nn.AvgPool2d(5, ceil_mode=True)
        self.padded = nn.AvgPool2d(4, stride=3, padding=1, ceil_mode=True)
        self.head = nn.Linear(16 + 16 + 6 + 6, 5)

    def forward(self, x):
        h = torch.relu(self.conv(x))  # [N, 6, 16]
        h = self.squeeze(h) + self.max1(h)  # [N, 6, 8]
        v = self.proj(h.flatten(1)).view(-1, 2, 4, 4, 4)
        w = h[:, :, :4].reshape(-1, 6, 2, 2)  # a 2x2 map
        feats = [self.avg3(v).flatten(1), self.max3(v).flatten(1),
                 self.wide(w.mean(dim=(2, 3), keepdim=True)).flatten(1),
                 self.padded(w).flatten(1)]
        return self.head(torch.cat(feats, dim=1))


class StridedSeq(nn.Module):
    """Strided and reversed Slices, 1-D MatMul operands on either side, and
    per-position logits [N, C, T] for a class-weighted cross-entropy."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.v = nn.Parameter(torch.randn(16) * 0.3)  # h @ v: 1-D B
        self.u = nn.Parameter(torch.randn(16) * 0.3)  # u @ w: 1-D A
        self.w = nn.Parameter(torch.randn(3, 16, 8) * 0.3)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        h = torch.tanh(self.proj(x))  # [N, T, 16]
        gate = torch.sigmoid(torch.matmul(h, self.v))  # [N, T]
        mix = torch.matmul(self.u, self.w).sum(0)  # [3, 8] -> [8]
        h = h[:, :, 1::2] + torch.flip(h[:, :, ::2], dims=[1]) * mix  # [N, T, 8]
        logits = self.head(h) * gate.unsqueeze(-1)  # [N, T, 5]
        return logits.transpose(1, 2)  # [N, 5, T]


class LogAbsMax(nn.Module):
    """Log, Abs and a max over the sequence (amax: ReduceMax)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h = self.proj(x)  # [N, T, 16]
        h = torch.log(torch.abs(h) + 0.5) + 0.1 * h
        return self.head(h.amax(dim=1))


class TriMask(nn.Module):
    """Triangles of a square activation (Trilu, upper and lower, k != 0),
    running sums along both of its dims (CumSum) and its first two rows
    repeated twice (Tensor.repeat, exported as Tile: each row's gradient
    sums over its copies)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h = self.proj(x).reshape(-1, 4, 4)
        h = torch.triu(h, diagonal=1) + 0.5 * torch.tril(h, diagonal=-1)
        h = h + 0.1 * torch.cumsum(h, dim=1) - 0.2 * torch.cumsum(h, dim=-1)
        h = h + 0.3 * h[:, :2, :].repeat(1, 2, 1)
        return self.head(torch.tanh(h).reshape(-1, 16))


class GatherNll(nn.Module):
    """torch.gather along the last dim with a repeated index
    (GatherElements), then log-probabilities [N, C, T] for nll_loss
    (NegativeLogLikelihoodLoss)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 12)
        self.head = nn.Linear(5, 5)
        self.register_buffer("pick", torch.tensor([0, 3, 3, 7, 11]))

    def forward(self, x):
        h = torch.tanh(self.proj(x))  # [N, T, 12]
        pick = self.pick.expand(h.shape[0], h.shape[1], 5)
        logits = self.head(torch.gather(h, 2, pick))  # [N, T, 5]
        # log(softmax), not log_softmax: torch 1.13's exporter fuses
        # log_softmax + nll_loss into SoftmaxCrossEntropyLoss (and, with
        # the transpose between them, loses the model's inputs).
        return torch.log(torch.softmax(logits, dim=-1)).transpose(1, 2)  # [N, 5, T]


class Scatters(nn.Module):
    """Writes into activations, parameters reaching both what is written
    into and what is written: a slice copy_ and an index_put of rows (ScatterND,
    index tuples constant and from a buffer), torch.scatter with a repeated
    index (ScatterElements: every write gets its position's gradient, as
    torch's), a select copy_ (ScatterND) and scatter_add with a repeated index
    (ScatterElements, reduction add)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 12)
        self.upd = nn.Linear(8, 4)
        self.head = nn.Linear(12, 5)
        self.mix = nn.Parameter(torch.randn(5, 4))
        self.register_buffer("cols", torch.tensor([1, 4, 4, 9]))
        self.register_buffer("rows", torch.tensor([5, 0, 2]))
        self.register_buffer("slots", torch.tensor([[0, 3, 3, 11]] * 5))

    def forward(self, x):  # [N, T, 8]
        h = torch.tanh(self.proj(x)).clone()  # [N, T, 12]
        u = self.upd(x)  # [N, T, 4]
        h[:, :, 6:10] = u
        h[:, self.rows] = 0.5 * h[:, self.rows[[1, 2, 0]]]
        h = torch.scatter(h, 2, self.cols.expand(x.shape[0], x.shape[1], 4),
                          torch.sigmoid(u))
        h[:, 3] = 2 * self.proj(x[:, 0])
        # scatter_add's exporter wants static shapes: the head's weight has.
        w = self.head.weight.scatter_add(1, self.slots, self.mix)
        return F.linear(torch.tanh(h), w, self.head.bias).transpose(1, 2)  # [N, 5, T]


class MobileBlock(nn.Module):
    """MobileNetV3's HardSwish and HardSigmoid squeeze-excite, PReLU with a
    slope per channel, ELU, and reflect, replicate and constant padding."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3)
        self.reduce = nn.Conv2d(8, 4, 1)
        self.expand = nn.Conv2d(4, 8, 1)
        self.prelu = nn.PReLU(8, init=0.1)
        self.conv2 = nn.Conv2d(8, 8, 3)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        h = F.hardswish(self.conv1(F.pad(x, (1, 1, 2, 1), mode="reflect")))
        s = h.mean(dim=(2, 3), keepdim=True)
        s = F.hardsigmoid(self.expand(torch.relu(self.reduce(s))))
        h = self.prelu(h * s)
        h = F.elu(self.conv2(F.pad(h, (1, 2, 1, 0), mode="replicate")))
        h = F.pad(h, (1, 1, 1, 1), value=0.5)
        return self.head(h.mean(dim=(2, 3)))


class UpsampleDecoder(nn.Module):
    """Nearest and bilinear upsampling between convolutions: nn.Upsample
    (Resize asymmetric / floor), F.interpolate by a scale (pytorch_half_pixel)
    and to a size with align_corners; a grouped, strided ConvTranspose2d
    with output_padding."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv2 = nn.Conv2d(6, 6, 3, stride=2)
        self.deconv = nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1,
                                         output_padding=1, groups=2)
        self.head = nn.Linear(4, 5)

    def forward(self, x):
        h = self.up(torch.tanh(self.conv1(x)))  # [N, 6, 8, 8]
        h = F.interpolate(h, scale_factor=1.5, mode="bilinear",
                          align_corners=False)  # [N, 6, 12, 12]
        h = torch.relu(self.conv2(h))  # [N, 6, 5, 5]
        h = torch.tanh(self.deconv(h))  # [N, 4, 10, 10]
        h = F.interpolate(h, size=(7, 6), mode="bilinear", align_corners=True)
        return self.head(h.mean(dim=(2, 3)))


def onnx_op(fn, op_type, **attrs):
    """fn as one ONNX node of op_type in the export: torch's symbolics
    never write ReduceSumSquare or ReduceLogSum. Its torch gradient is
    autograd's of fn itself."""

    class Op(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return fn(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                x = x.detach().requires_grad_()
                return torch.autograd.grad(fn(x), x, g)

        @staticmethod
        def symbolic(g, x):
            return g.op(op_type, x, **attrs)

    return Op.apply


SUM_SQUARE = onnx_op(lambda x: (x * x).sum(-1), "ReduceSumSquare", axes_i=[-1],
                     keepdims_i=0)
LOG_SUM = onnx_op(lambda x: torch.log(x.sum(-1, keepdim=True)), "ReduceLogSum",
                  axes_i=[-1], keepdims_i=1)


class NormsCubic(nn.Module):
    """Reductions with their own rules: a weight-normalised projection
    (weight_norm spelled out: ReduceL2 over the direction parameter), L2 and L1 norms over the
    features (ReduceL2 with a zero row: torch passes 0 there; ReduceL1),
    logsumexp (ReduceLogSumExp), amin (ReduceMin, a tie included), a log of
    a positive sum (ReduceLogSum) and a sum of squares (ReduceSumSquare),
    both as single ONNX nodes, and a position table resized bicubically
    as DINOv2's (Resize cubic, its a = -0.75, on a parameter)."""

    def __init__(self):
        super().__init__()
        self.direction = nn.Parameter(torch.randn(12, 8))
        self.magnitude = nn.Parameter(torch.rand(12, 1) + 0.5)
        self.pos = nn.Parameter(torch.randn(1, 4, 3, 3))
        self.head = nn.Linear(12 + 5 + 4 * 25, 4)

    def forward(self, x):
        norm = torch.norm(self.direction, p=2, dim=1, keepdim=True)
        h = x @ (self.magnitude * self.direction / norm).t()  # [N, T, 12]
        zero_row = torch.cat([h[:, :1] * 0, h[:, 1:]], dim=1)
        l2 = torch.norm(zero_row, p=2, dim=-1)  # [N, T]
        l1 = torch.norm(h, p=1, dim=-1)
        lse = torch.logsumexp(h, dim=1)  # [N, 12]
        low = torch.amin(torch.round(h * 2) / 2, dim=1)
        logsum = LOG_SUM(torch.exp(h)).squeeze(-1) + 0.1 * SUM_SQUARE(h)
        pos = F.interpolate(self.pos, size=(5, 5), mode="bicubic",
                            align_corners=False).flatten(1)  # [1, 100]
        feats = torch.cat([lse + low, (l2 + l1 + logsum)[:, :5]], dim=-1)
        return self.head(torch.cat([feats, pos.expand(x.shape[0], -1)], dim=-1))


def mean_variance_norm(x, dims=(0, 2, 3)):
    """ONNX's MeanVarianceNormalization, as its function body computes it."""
    mean = x.mean(dim=dims, keepdim=True)
    std = torch.sqrt((x * x).mean(dim=dims, keepdim=True) - mean ** 2)
    return (x - mean) / (std + 1e-9)


# torch 1.13 exports F.local_response_norm as its pad / avg_pool
# decomposition, never as one LRN node; the window is ONNX's for odd sizes.
LRN_WIDE = onnx_op(lambda x: F.local_response_norm(x, 5, alpha=0.5, beta=0.75, k=1.0),
                   "LRN", size_i=5, alpha_f=0.5, beta_f=0.75, bias_f=1.0)
LRN_NARROW = onnx_op(lambda x: F.local_response_norm(x, 3, alpha=0.9, beta=0.6, k=2.0),
                     "LRN", size_i=3, alpha_f=0.9, beta_f=0.6, bias_f=2.0)
MVN = onnx_op(mean_variance_norm, "MeanVarianceNormalization", axes_i=[0, 2, 3])
MVN_FEATURES = onnx_op(lambda x: mean_variance_norm(x, (1,)),
                       "MeanVarianceNormalization", axes_i=[1])


class LrnMvn(nn.Module):
    """AlexNet's and GoogLeNet's local response normalization (torch's
    LocalResponseNorm, sizes 5 and 3, more than C / 2 channels wide at the
    edges) and MeanVarianceNormalization (over [0, 2, 3] and over the
    features), each as one ONNX node, which the importer rewrites into ops
    with rules (a banded 1x1 Conv, Pow; ReduceMean, Sqrt)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, 8, 3, stride=2)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        h = LRN_WIDE(torch.relu(self.conv1(x)))
        h = LRN_NARROW(MVN(self.conv2(h)))
        return self.head(MVN_FEATURES(h.mean(dim=(2, 3))))


# torch 1.13 has no ONNX symbolic for these, though ONNX has had the ops
# since opset 9: Activations exports them through these.
for _name in ("sinh", "cosh", "asinh", "acosh", "atanh"):
    torch.onnx.register_custom_op_symbolic(
        f"aten::{_name}", lambda g, x, _op=_name.capitalize(): g.op(_op, x), 9)


class Activations(nn.Module):
    """Every activation and math op with a gradient rule of its own, each on
    its own branch: leaky ReLU, SELU, CELU, softplus, softsign, hardtanh
    (Clip, both bounds) and clamps with one bound, sin, cos, tan, the
    hyperbolic functions and the inverses (inputs kept in their domains),
    elementwise maximum / minimum (ties too) and the flat ones (floor,
    ceil, round, sign: zero gradient)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.other = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h, o = self.proj(x), self.other(x)
        t = torch.tanh(h) * 0.9  # in (-0.9, 0.9): asin, acos, atanh
        parts = [F.leaky_relu(h, 0.2), F.selu(h), F.celu(h, 1.5), F.softplus(h),
                 F.softsign(h), F.hardtanh(h, -0.5, 0.7), torch.clamp(h, min=-0.3),
                 torch.clamp(h, max=0.4), torch.sin(h), torch.cos(h),
                 torch.tan(t), torch.sinh(h), torch.cosh(h), torch.asin(t),
                 torch.acos(t), torch.asinh(h), torch.acosh(h * h + 1.5),
                 torch.atan(h), torch.atanh(t), torch.maximum(h, o),
                 torch.minimum(h, o), torch.maximum(torch.relu(h), torch.relu(o)),
                 h * torch.floor(o) + torch.ceil(h) + torch.round(h) + torch.sign(o)]
        return self.head(sum(parts))


class Einsums(nn.Module):
    """torch.einsum in every form with a gradient rule: CvT's attention
    scores and mixing ('bhlk,bhtk->bhlt', 'bhlt,bhtk->bhlk'), Funnel's
    relative attention ('bind,snd->bnis': n a batch letter, d contracted),
    two contracted letters ('abcd,cde->abe'), a letter one operand sums
    away ('bhlk,bhlt->bht': k), a parameter broadcast over the batch (its
    size-1 letter b), an ellipsis ('...d,de->...e'), a permutation plus a
    sum of one operand ('bnis->sb') and diagonals (the attention's
    'bhii->bhi', a parameter's trace in a product 'ii,bi->b'), which the
    importer takes as Slices."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 48)
        self.rel = nn.Parameter(torch.randn(3, 2, 8) / 3)  # [s, n, d]
        self.pair = nn.Parameter(torch.randn(5, 8, 6) / 6)  # [c, d, e]
        self.mix = nn.Parameter(torch.randn(1, 4, 5) / 2)  # [b, i, j], b = 1
        self.out = nn.Parameter(torch.randn(8, 3) / 3)  # [d, e]
        self.square = nn.Parameter(torch.randn(5, 5) / 2)  # [i, i]
        self.head = nn.Linear(2 * 6 + 2 * 5 + 4 * 16 + 2 * 5 * 3 + 3 + 2 * 5 + 1, 4)

    def forward(self, x):  # [N, 5, 8]
        n, t, _ = x.shape
        q, k, v = self.qkv(x).view(n, t, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        p = torch.softmax(torch.einsum("bhlk,bhtk->bhlt", q, k) / 8 ** 0.5, -1)
        o = torch.einsum("bhlt,bhtk->bhlk", p, v)  # [N, 2, 5, 8]
        r = torch.einsum("bind,snd->bnis", q.transpose(1, 2), self.rel)  # [N, 2, 5, 3]
        e = torch.einsum("abcd,cde->abe", o, self.pair)  # [N, 2, 6]
        w = torch.einsum("bhlk,bhlt->bht", o, p)  # [N, 2, 5]
        m = torch.einsum("bij,bjk->bik", self.mix,
                         o.transpose(1, 2).reshape(n, t, 16))  # [N, 4, 16]
        y = torch.einsum("...d,de->...e", torch.tanh(o), self.out)  # [N, 2, 5, 3]
        z = torch.einsum("bnis->sb", r)  # [3, N]
        diag = torch.einsum("bhii->bhi", p)  # [N, 2, 5]
        trace = torch.einsum("ii,bi->b", self.square, w[:, 0])  # [N]
        return self.head(torch.cat([e.flatten(1), w.flatten(1), m.flatten(1),
                                    y.flatten(1), z.t(), diag.flatten(1),
                                    trace[:, None]], dim=-1))


class GridSampler(nn.Module):
    """F.grid_sample (ONNX GridSample, opset 16) in every mode, padding mode
    and align_corners: a learned image sampled at the input's points (many
    outside [-1, 1]) moved by a learned offset, so that d(input) and d(grid)
    both reach parameters (nearest gives the grid none, as torch)."""

    SAMPLES = [(mode, padding, align)
               for mode in ("bilinear", "nearest", "bicubic")
               for padding in ("zeros", "border", "reflection")
               for align in (False, True)]

    def __init__(self):
        super().__init__()
        self.image = nn.Parameter(torch.randn(1, 3, 5, 6))
        self.offset = nn.Parameter(0.2 * torch.randn(1, 4, 5, 2))
        self.head = nn.Linear(len(self.SAMPLES) * 3 * 4 * 5, 4)

    def forward(self, x):  # [N, 4, 5, 2]: (x, y) points
        grid = 1.4 * torch.tanh(x) + self.offset
        image = self.image.expand(x.shape[0], -1, -1, -1)
        return self.head(torch.cat(
            [F.grid_sample(image, grid, mode=mode, padding_mode=padding,
                           align_corners=align).flatten(1)
             for mode, padding, align in self.SAMPLES], dim=-1))


def cls_loss(logits, labels):
    return F.cross_entropy(logits, labels, ignore_index=-100)


CLASS_WEIGHTS = torch.tensor([0.5, 2.0, 1.0, 1.5, 0.25])


def weighted_loss(logits, labels):
    return F.cross_entropy(logits, labels, weight=CLASS_WEIGHTS.to(logits.dtype),
                           ignore_index=-100)


def weighted_nll_loss(log_probs, labels):
    return F.nll_loss(log_probs, labels, weight=CLASS_WEIGHTS.to(log_probs.dtype),
                      ignore_index=-100)


CASES = {
    "tied_mlp": (TiedMLP, lambda g: torch.randn(6, 8, generator=g), 4),
    "seq_mlp": (SeqMLP, lambda g: torch.randn(6, 5, 8, generator=g), 5),
    "conv_net": (ConvNet, lambda g: torch.randn(4, 3, 20, 20, generator=g), 5),
    "pools": (Pools, lambda g: torch.randn(4, 3, 16, generator=g), 5),
    "log_abs_max": (LogAbsMax, lambda g: torch.randn(5, 6, 8, generator=g), 4),
    "tri_mask": (TriMask, lambda g: torch.randn(6, 8, generator=g), 4),


    "upsample_decoder": (UpsampleDecoder,
                         lambda g: torch.randn(4, 3, 4, 4, generator=g), 5),
    "mobile_block": (MobileBlock, lambda g: 2 * torch.randn(4, 3, 9, 9, generator=g), 5),
    "strided_seq": (StridedSeq, lambda g: torch.randn(4, 6, 8, generator=g), 5,
                    weighted_loss),
    "gather_nll": (GatherNll, lambda g: torch.randn(4, 6, 8, generator=g), 5,
                   weighted_nll_loss),
    "scatters": (Scatters, lambda g: torch.randn(4, 6, 8, generator=g), 5),
    "activations": (Activations, lambda g: torch.randn(6, 8, generator=g), 4),
    "norms_cubic": (NormsCubic, lambda g: torch.randn(4, 6, 8, generator=g), 4),
    "lrn_mvn": (LrnMvn, lambda g: torch.randn(4, 3, 9, 9, generator=g), 5),
    "einsums": (Einsums, lambda g: torch.randn(3, 5, 8, generator=g), 4),
    "grid_sample": (GridSampler, lambda g: torch.randn(4, 4, 5, 2, generator=g), 4),
}
# Corpus models and the batch size each runs at.
CORPUS = {"gpt2": 3, "gpt2_external": 2, "llama": 3, "bert": 3, "resnet18": 6,
          "vit": 3, "vit_b16": 1, "mixed": 4, "frozen_tied": 4, "derived": 3}
# Activation checkpointing: a corpus model wrapped by layer classes, the
# chosen units' forward recomputed inside their backward (GPT-2: every
# block; LLaMA: attention and MLP units, only the MLPs checkpointed;
# ResNet-18: every BasicBlock, training-mode BatchNorm recomputed too).
CHECKPOINTED = {
    "gpt2+checkpoint": ("gpt2", "GPT2Block", "checkpoint-units=true"),
    "llama+checkpoint": ("llama", "LlamaAttention,LlamaMLP",
                         "checkpoint-classes=LlamaMLP"),
    "resnet18+checkpoint": ("resnet18", "BasicBlock", "checkpoint-units=true"),
}
# fsdp-autodiff fuses attention in training: each case's training plan
# holds this many attention and attention_grad kernels (GPT-2 and LLaMA
# causal, no mask tensor; BERT's and ViT's without a mask). Checkpointed
# GPT-2 blocks run their attention forward again in the backward.
FUSED_ATTENTION = {"gpt2": (2, 2, "causal"), "gpt2_external": (2, 2, "causal"),
                   "llama": (2, 2, "causal"), "bert": (2, 2, "none"),
                   "vit": (2, 2, "none"), "gpt2+checkpoint": (4, 2, "causal"),
                   "llama+checkpoint": (2, 2, "causal")}
# fsdp-autodiff fuses training-mode BatchNorm: batch_norm_train and
# batch_norm_grad kernels per plan (ResNet-18 has 20 BatchNorms; its
# checkpointed BasicBlocks run their 19 again in the backward). With
# fuse-batch-norm=false ResNet-18 keeps the decomposed form (no such kernel),
# which must equal torch too.
FUSED_BATCH_NORM = {"resnet18": (20, 20), "resnet18+checkpoint": (39, 20),
                    "resnet18+unfused-bn": (0, 0), "conv_net": (1, 1)}
# Kernels a case's training plan must hold, and how many of each: the ops
# whose gradients the case is there to check.
KERNELS = {"gather_nll": {"gather_elements": 1, "scatter_elements": 1,
                          "nll_loss": 1, "nll_loss_grad": 1},
           # 3 ScatterND and 2 ScatterElements forward; backward, a scatter of
           # zeros into the cotangent for each but scatter_add, a Gather
           # (ScatterND: tuples as rows, the run-time index columns wrapped
           # and range-checked by a Gather from 0..size-1, none by Mod) or
           # GatherElements for each one's updates.
           "scatters": {"scatter_nd": 6, "scatter_elements": 3, "gather_elements": 2,
                        "mod": 0},
           # 1-D pools one row high, 3-D ones as two 2-D pools (a 3-D
           # gradient pools its input again: a max_pool, an average_pool).
           "pools": {"average_pool": 6, "max_pool": 4, "pool_grad": 8},
           "norms_cubic": {"reduce_l1": 1, "reduce_l2": 2, "reduce_log_sum": 1,
                           "reduce_log_sum_exp": 1, "reduce_min": 1,
                           "reduce_sum_square": 1, "resize": 1},
           "grid_sample": {"grid_sample": 18, "grid_sample_grad": 18},
           # Two LRNs' banded 1x1 convolutions beside the model's two: no
           # weight gradient for a constant band; MVN's roots, means.
           "lrn_mvn": {"conv": 4, "conv_grad_input": 3, "conv_grad_weight": 2,
                       "sqrt": 2, "reduce_mean": 5}}
UNFUSED = {"resnet18+unfused-bn": ("resnet18", "fuse-batch-norm=false")}
# Models returning several values: which one the attached loss reads.
ATTACHED_LOGITS = {"bert": 1}
VERBOSE = False
ROOT_BUILD = Path("build")


def run(cmd):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed: {' '.join(map(str, cmd))}\n{proc.stderr}")
    return proc.stdout


def graph_inputs(onnx_path: Path) -> list[str]:
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    return [i.name for i in graph.input if i.name not in initializers]


def prepare(name: str, work: Path, micro: int = 1):
    """The torch model with the ONNX file's weights, inputs (batch times
    `micro`), labels, loss, the ONNX file, input names, the labels' name and
    the fsdp-autodiff options (a loss attached to a model without one)."""
    import fsdp_mlir

    options = ""
    if name in CORPUS:
        import check_forward
        import models

        case = models.CASES[name]
        model, examples = case.build()
        onnx_path = check_forward.corpus_file(ROOT_BUILD, name)
        check_forward.load_onnx_weights(model, onnx_path)
        inputs = check_forward.fresh_inputs(examples, CORPUS[name] * micro, seed=5)
        names = graph_inputs(onnx_path)
        if case.loss_fn:
            inputs, labels = inputs[:-1], inputs[-1]
            names, label_name = names[:-1], names[-1]
            loss_fn = case.loss_fn
        else:
            # Logits only: the loss is attached at compile time.
            index = ATTACHED_LOGITS.get(name, 0)
            model.eval()  # a probe, so BatchNorm's statistics stay as they are
            with torch.no_grad():
                out = model(*inputs)
            logits = out[index] if isinstance(out, (tuple, list)) else out
            g = torch.Generator().manual_seed(7)
            labels = torch.randint(0, logits.shape[-1], logits.shape[:-1], generator=g)
            label_name = "labels"
            options = "=loss=cross-entropy" + (
                f" logits=output_{index}" if isinstance(out, (tuple, list)) else "")

            def loss_fn(out, labels, index=index):
                logits = out[index] if isinstance(out, (tuple, list)) else out
                return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                       labels.reshape(-1))
    else:
        cls, make_input, classes, *loss = CASES[name]
        loss_fn = loss[0] if loss else cls_loss
        torch.manual_seed(0)
        model = cls()
        g = torch.Generator().manual_seed(1)
        x = make_input(g)
        with torch.no_grad():  # one label per position of the logits
            label_shape = model.eval()(x).shape[:1] + model(x).shape[2:]
        model.train()
        labels = torch.randint(0, classes, label_shape, generator=g)
        labels.view(-1)[1] = -100  # an ignored label
        onnx_path = work / "m.onnx"
        fsdp_mlir.export(model, (x, labels), onnx_path, loss_fn=loss_fn,
                         input_names=["x", "labels"])
        inputs, names, label_name = [x], ["x"], "labels"
    return model, inputs, labels, loss_fn, onnx_path, names, label_name, options


def check(name: str, bindir: Path, work: Path) -> bool:
    case = name
    wrap = []
    extra = ""
    if name in CHECKPOINTED:  # units from auto-wrap, recomputed in backward
        name, classes, extra = CHECKPOINTED[name]
        wrap = [f"--fsdp-auto-wrap=policy=transformer layer-classes={classes}"]
    elif name in UNFUSED:
        name, extra = UNFUSED[name]
    model, inputs, labels, loss_fn, onnx_path, names, label_name, options = \
        prepare(name, work)
    if extra:
        options = (options or "=") + " " + extra
    batch = inputs[0].shape[0]
    run([bindir / "fsdp-opt", onnx_path, f"--batch-size={batch}", *wrap,
         f"--fsdp-autodiff{options}", "--fsdp-inference", "--fsdp-lower-pipeline",
         "--mlir-print-debuginfo", "-o", work / "m.mlir"])
    run([bindir / "fsdp-translate", "--mlir-to-plan", work / "m.mlir", "-o", work / "m.plan"])
    if not check_fused_attention(case, (work / "m.mlir").read_text()):
        return False
    if not check_fused_batch_norm(case, (work / "m.mlir").read_text()):
        return False
    if not check_kernels(case, (work / "m.mlir").read_text()):
        return False
    flags = []
    for input_name, value in zip(names + [label_name], inputs + [labels]):
        np.save(work / f"{input_name}.npy", value.numpy())
        flags += ["--input", f"{input_name}={work / input_name}.npy"]
    report = json.loads(run([bindir / "fsdp-run", work / "m.plan", *flags,
                             "--output-dir", work / "out", "--json"]))
    ours = {o["name"]: np.load(work / "out" / f"{o['name']}.npy") for o in report["outputs"]}

    # torch in fp32 (the reference) and in fp64 (to measure how far fp32
    # itself strays on this model and input).
    t32 = torch_step(copy.deepcopy(model), inputs, labels, loss_fn, torch.float32, ours)
    t64 = torch_step(copy.deepcopy(model), inputs, labels, loss_fn, torch.float64, ours)

    ok = sorted(ours) == sorted(t32)
    if not ok:
        print(f"  outputs {sorted(ours)} but torch has {sorted(t32)}")
    worst = ("", 0.0)
    for key in sorted(set(ours) & set(t32)):
        got, want = ours[key].astype(np.float64), t32[key].astype(np.float64)
        err = np.abs(got - want)
        # Ill-conditioned spots (BatchNorm over a handful of values) make
        # any fp32 computation stray from the exact gradient; ours must then
        # be as close to fp64 as torch's own fp32 result is (within 2x).
        exact = t64[key]
        fp32_err = float(np.abs(want - exact).max()) if want.size else 0.0
        good = got.shape == want.shape and bool(np.all(
            (err <= ATOL + RTOL * np.abs(want))
            | (np.abs(got - exact) <= ATOL + RTOL * np.abs(exact) + 2 * fp32_err)))
        if not good or VERBOSE:
            print(f"  {key:28s} {list(want.shape)!s:16s} max |diff| {float(err.max()):.2e}"
                  f" (torch fp32 vs fp64 {fp32_err:.1e}) {'ok' if good else 'MISMATCH'}")
        if float(err.max()) >= worst[1]:
            worst = (key, float(err.max()))
        ok &= good
    print(f"  {len(t32)} values compared, worst |diff| {worst[1]:.2e} ({worst[0]})")
    return ok


def check_fused_attention(name: str, plan_mlir: str) -> bool:
    """The lowered training step runs attention fused, forward and backward."""
    if name not in FUSED_ATTENTION:
        return True
    forward, backward, kind = FUSED_ATTENTION[name]
    ok = True
    for kernel, count in (("attention", forward), ("attention_grad", backward)):
        found = re.findall(r'fsdp\.kernel "' + kernel + r'"\(.*mask_kind = "(\w+)"',
                           plan_mlir)
        if found != [kind] * count:
            print(f"  expected {count} {kernel} kernels ({kind}), found {found}")
            ok = False
    if ok:
        print(f"  {forward} attention + {backward} attention_grad kernels ({kind})")
    return ok


def check_fused_batch_norm(name: str, plan_mlir: str) -> bool:
    """The lowered training step runs BatchNorm fused, forward and backward
    (or, with fuse-batch-norm=false, decomposed)."""
    if name not in FUSED_BATCH_NORM:
        return True
    want = FUSED_BATCH_NORM[name]
    found = tuple(len(re.findall(r'fsdp\.kernel "' + k + r'"\(', plan_mlir))
                  for k in ("batch_norm_train", "batch_norm_grad"))
    print(f"  {found[0]} batch_norm_train + {found[1]} batch_norm_grad kernels")
    if found != want:
        print(f"  expected {want[0]} batch_norm_train and {want[1]} "
              "batch_norm_grad kernels")
        return False
    return True


def check_kernels(name: str, plan_mlir: str) -> bool:
    """The lowered training step holds the kernels KERNELS names."""
    want = KERNELS.get(name, {})
    found = {k: len(re.findall(r'fsdp\.kernel "' + k + r'"\(', plan_mlir))
             for k in want}
    if found != want:
        print(f"  expected kernels {want}, found {found}")
        return False
    if want:
        print(f"  kernels {found}")
    return True


def torch_step(model, inputs, labels, loss_fn, dtype, ours):
    """The loss, every trainable parameter's gradient and the buffers the
    step updates, in `dtype`."""
    model.to(dtype).train()
    model.zero_grad()
    inputs = [x.to(dtype) if x.is_floating_point() else x for x in inputs]
    loss = loss_fn(model(*inputs), labels)
    loss.backward()
    values = {"loss": loss.detach().double().numpy()}
    seen = set()
    for fqn, p in model.named_parameters():  # tied parameters appear once
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            values[f"grad.{fqn}"] = p.grad.double().numpy()
    # Buffers the step updates (BatchNorm's running statistics), after it.
    for fqn, b in model.named_buffers():
        if f"update.{fqn}" in ours:
            values[f"update.{fqn}"] = b.double().numpy()
    return values


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--only", nargs="*", help="check only these models")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print every value, not only mismatches")
    args = ap.parse_args(argv)
    global VERBOSE
    VERBOSE = args.verbose
    torch.set_num_threads(2)
    bindir = args.build.resolve() / "bin"
    global ROOT_BUILD
    ROOT_BUILD = args.build.resolve()
    failed = []
    chosen = args.only or (list(CASES) + list(CORPUS) + list(CHECKPOINTED) +
                           list(UNFUSED))
    with tempfile.TemporaryDirectory() as tmp:
        for name in chosen:
            print(f"{name}:", flush=True)
            work = (args.keep or Path(tmp)) / name
            work.mkdir(parents=True, exist_ok=True)
            try:
                if not check(name, bindir, work):
                    failed.append(name)
            except Exception as e:  # noqa: BLE001
                print(f"  FAILED: {e}")
                failed.append(name)
    total = len(chosen)
    print(f"{total - len(failed)}/{total} models: gradients equal to torch.autograd"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
