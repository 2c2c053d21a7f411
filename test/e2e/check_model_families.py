#!/usr/bin/env python3
"""Model families (issue 25, "Any model"): each imports, runs and trains as
torch 1.13 does, at 1 and 2 ranks.

    check_model_families.py BUILD_DIR [--keep DIR] [--only NAME ...]

The families, at small sizes: torchvision's mobilenet_v3_small (whole, in
training mode: Hardswish, Hardsigmoid, squeeze-excitation, BatchNorm),
torchvision's SwinTransformer at a small configuration (window attention
with a relative position bias table and its index gather, shifted windows
through torch.roll and an attention mask, patch merging), torchvision's
DenseNet at a small configuration (concatenating dense blocks, BatchNorm),
a T5-style relative position bias (log-bucketed relative positions, an
Embedding of buckets added to the attention scores) and an argmax
mixture-of-experts router (gate linear, argmax, F.one_hot's mask of the
chosen expert (ONNX OneHot, rewritten at import), its gate probability as
the output's weight so gradients reach the router), Mixtral's top-2
routing (torch.topk: ONNX TopK, rewritten at import; the chosen experts'
renormalised probabilities weight them), video 3-D convolutions (ONNX
Conv over 5-D tensors, rewritten at import) and Wav2Vec2's feature
encoder (1-D convolutions, GroupNorm and InstanceNorm1d: ONNX
InstanceNormalization, rewritten at import). Stochastic layers are
off (dropout 0, stochastic depth 0): e2e.dropout covers them.

Each model's forward plan (fsdp_mlir.compile without an optimizer; the
model exported without its loss, BatchNorm running statistics gathered by
5 training-mode passes first) gives torch's eval-mode logits within 1e-5 of
their largest. Then the model is exported with its loss, a training plan
(AdamW, FULL_SHARD, no policy) is compiled for the per-rank batch and runs
STEPS steps under `python -m fsdp_mlir.launch -n W` (W = 1, 2; each rank
takes its slice of the global batch in fsdp_mlir.Session.step). The
reference is torch on the global batch; with BatchNorm, whose statistics
are per rank at W = 2, torch on each rank's slice with the losses averaged
(what PyTorch FSDP computes). Losses and final parameters must be as close
to torch's float64 steps as torch's own float32 steps are (within SLACK x,
per tensor), plus ATOL + RTOL |torch| (as check_grads.py does where fp32 is
ill-conditioned): AdamW moves an element whose gradient is rounding noise
(a bias whose shift the next BatchNorm removes) by +-lr, in torch's fp32
run as in ours. One element in 10,000 of a tensor (at least one) may lie
outside that, within OUTLIER times it: an element whose gradient is
near AdamW's eps steps by the noise's draw. What each family is for must carry gradient in torch
(SUBJECTS), the MoE router must use several experts and the relative bias
several buckets.

Also ONNX OneHot (rewritten at import) against numpy where F.one_hot never
goes: negative and out-of-range indices, axes 0, 1 and -1; and ONNX TopK
(rewritten at import) against numpy's stable sort: ties, infinities, K the
whole axis, smallest, axes 0, 1 and -1. Exit 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import math
import os
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

import fsdp_mlir  # noqa: E402

ATOL, RTOL, SLACK = 1e-5, 1e-4, 2.0
# A tensor may hold one element in 10,000 (at least one) outside the
# allowance, within OUTLIER times it (check_training).
OUTLIER = 4.0
STEPS, LR, CLASSES = 3, 1e-3, 10


class RelativePositionBias(nn.Module):
    """T5's bias: the relative position j - i bucketed (exact below
    max_exact, logarithmic up to max_distance, one side per sign when
    bidirectional), then an Embedding of buckets, one value per head."""

    def __init__(self, heads, buckets=8, max_distance=16):
        super().__init__()
        self.buckets, self.max_distance = buckets, max_distance
        self.embedding = nn.Embedding(buckets, heads)

    def bucket(self, relative):
        half = self.buckets // 2
        ret = (relative > 0).long() * half
        n = relative.abs()
        max_exact = half // 2
        is_small = n < max_exact
        large = max_exact + (torch.log(n.float() / max_exact)
                             / math.log(self.max_distance / max_exact)
                             * (half - max_exact)).long()
        large = torch.min(large, torch.full_like(large, half - 1))
        return ret + torch.where(is_small, n, large)

    def forward(self, length):
        position = torch.arange(length, dtype=torch.long)
        relative = position[None, :] - position[:, None]
        bias = self.embedding(self.bucket(relative))  # (T, T, heads)
        return bias.permute(2, 0, 1).unsqueeze(0)  # (1, heads, T, T)


class T5Attention(nn.Module):
    """Self-attention whose scores get the relative position bias (T5: no
    1/sqrt(d) scaling), in a small token classifier."""

    def __init__(self, vocab=16, dim=16, heads=2):
        super().__init__()
        self.heads, self.dim = heads, dim
        self.embed = nn.Embedding(vocab, dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.bias = RelativePositionBias(heads)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, ids):
        x = self.embed(ids)
        b, t, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) + self.bias(t)
        h = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, self.dim)
        return self.head(self.norm(x + self.out(h))).mean(1)


class ArgmaxMoE(nn.Module):
    """Top-1 mixture of experts: the gate's argmax picks one expert per
    token (F.one_hot of it masks the experts' outputs); the chosen
    expert's output is scaled by its gate probability, so the router
    trains."""

    def __init__(self, dim=16, experts=4, hidden=32):
        super().__init__()
        self.inp = nn.Linear(8, dim)
        self.gate = nn.Linear(dim, experts)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
            for _ in range(experts))
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, x):
        h = torch.relu(self.inp(x))  # (B, T, dim)
        probs = self.gate(h).softmax(-1)  # (B, T, E)
        chosen = probs.argmax(-1)  # (B, T)
        mask = F.one_hot(chosen, probs.shape[-1]).to(h.dtype)  # (B, T, E)
        weight = (probs * mask).sum(-1, keepdim=True)
        outs = torch.stack([e(h) for e in self.experts], -1)  # (B, T, dim, E)
        routed = (outs * mask.unsqueeze(-2)).sum(-1) * weight
        return self.head(h + routed).mean(1)


class Top2MoE(nn.Module):
    """Mixtral's routing, densely: the gate's softmax, its top 2 experts per
    token (torch.topk), their probabilities renormalised as the experts'
    weights (the router's gradient path: TopK's values), F.one_hot of the
    chosen indices to combine the experts' outputs."""

    def __init__(self, dim=16, experts=4, hidden=32):
        super().__init__()
        self.inp = nn.Linear(8, dim)
        self.gate = nn.Linear(dim, experts)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, hidden), nn.SiLU(), nn.Linear(hidden, dim))
            for _ in range(experts))
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, x):
        h = torch.relu(self.inp(x))  # (B, T, dim)
        probs = self.gate(h).softmax(-1)  # (B, T, E)
        weight, chosen = probs.topk(2, dim=-1)  # (B, T, 2)
        weight = weight / weight.sum(-1, keepdim=True)
        mask = F.one_hot(chosen, probs.shape[-1]).to(h.dtype)  # (B, T, 2, E)
        combine = (mask * weight.unsqueeze(-1)).sum(-2)  # (B, T, E)
        outs = torch.stack([e(h) for e in self.experts], -1)  # (B, T, dim, E)
        return self.head(h + (outs * combine.unsqueeze(-2)).sum(-1)).mean(1)


class AudioEncoder(nn.Module):
    """Wav2Vec2's feature encoder at a small size: strided 1-D
    convolutions, GroupNorm with one channel per group (its "group" mode)
    and with several, an affine InstanceNorm1d, then LayerNorm and a
    projection. torch exports GroupNorm as a Reshape, an
    InstanceNormalization with constant scale and bias, and its own Mul and
    Add; InstanceNorm1d(affine=True) as an InstanceNormalization of its
    parameters (both rewritten at import)."""

    def __init__(self, dim=16):
        super().__init__()
        self.conv0 = nn.Conv1d(1, dim, 10, 5, bias=False)
        self.norm0 = nn.GroupNorm(dim, dim)
        self.conv1 = nn.Conv1d(dim, dim, 3, 2, bias=False)
        self.inorm = nn.InstanceNorm1d(dim, affine=True)
        self.gnorm = nn.GroupNorm(4, dim)
        self.proj = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim))
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, audio):
        h = F.gelu(self.norm0(self.conv0(audio)))
        h = self.gnorm(self.inorm(self.conv1(h)))
        # F.gelu's formula (and its ONNX export), spelled out: Debian's
        # torch 1.13 gives a wrong, run-to-run varying GELU gradient when
        # the gradient arriving is transposed, as the transpose below
        # makes it (seen here: the gradient differs from run to run).
        h = h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0)))
        return self.head(self.proj(h.transpose(1, 2)).mean(1))


class VideoConv3d(nn.Module):
    """R(2+1)D-style video layers: 3-D convolutions with depth padding,
    strides, a dilation and groups (ONNX Conv over 5-D tensors, rewritten
    at import into 2-D convolutions, one per depth tap), then global
    average pooling and a linear head."""

    def __init__(self, dim=8):
        super().__init__()
        self.stem = nn.Conv3d(3, dim, (3, 3, 3), stride=(1, 2, 2), padding=1)
        self.temporal = nn.Conv3d(dim, dim, (3, 1, 1), stride=(2, 1, 1),
                                  padding=(2, 0, 0), dilation=(2, 1, 1), groups=2, bias=False)
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, clip):
        h = self.temporal(torch.relu(self.stem(clip)))
        return self.head(torch.relu(h).mean((2, 3, 4)))


def mobilenet():
    import torchvision
    return torchvision.models.mobilenet_v3_small(num_classes=CLASSES, dropout=0.0)


def swin():
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[2, 2], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                           window_size=[4, 4], stochastic_depth_prob=0.0,
                           num_classes=CLASSES)


def densenet():
    from torchvision.models import DenseNet
    return DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=16, bn_size=2,
                    num_classes=CLASSES)


# What each family is here for must carry gradient in torch (else the
# comparison would not test it): parameters whose first-step gradient must
# be non-zero.
SUBJECTS = {
    "mobilenet_v3_small": ["features.1.block.1.fc1.weight", "features.4.block.2.fc2.bias"],
    "swin": ["features.1.0.attn.relative_position_bias_table",
             "features.1.1.attn.relative_position_bias_table",
             "features.2.reduction.weight"],
    "densenet": ["features.denseblock1.denselayer1.conv2.weight",
                 "features.transition1.conv.weight"],
    "t5_relative_bias": ["bias.embedding.weight"],
    "argmax_moe": ["gate.weight"] + [f"experts.{e}.0.weight" for e in range(4)],
    "top2_moe": ["gate.weight"] + [f"experts.{e}.0.weight" for e in range(4)],
    "video_conv3d": ["stem.weight", "stem.bias", "temporal.weight"],
    "audio_groupnorm": ["conv0.weight", "norm0.weight", "norm0.bias", "inorm.weight",
                        "inorm.bias", "gnorm.weight"],
}


def check_subject(name, problems):
    model, x, target = make(name)
    loss_fn(model(x), target).backward()
    grads = dict(model.named_parameters())
    for fqn in SUBJECTS[name]:
        if not grads[fqn].grad.abs().max() > 1e-6:
            problems.append(f"{name}: torch's gradient of {fqn} is zero: the case tests "
                            "nothing")
    if name == "t5_relative_bias":
        rows = int((grads["bias.embedding.weight"].grad.abs().sum(1) > 0).sum())
        if rows < 4:
            problems.append(f"{name}: only {rows} relative position buckets are used")
    if name in ("argmax_moe", "top2_moe"):
        with torch.no_grad():
            used = model.gate(torch.relu(model.inp(x))).argmax(-1).unique().numel()
        if used < 2:
            problems.append(f"{name}: the router sends every token to one expert")


def images(shape):
    return lambda g: torch.randn(*shape, generator=g)


# name: (constructor, global-batch input maker, has BatchNorm)
FAMILIES = {
    "mobilenet_v3_small": (mobilenet, images((4, 3, 64, 64)), True),
    "swin": (swin, images((4, 3, 16, 16)), False),
    "densenet": (densenet, images((4, 3, 16, 16)), True),
    "t5_relative_bias": (T5Attention, lambda g: torch.randint(0, 16, (4, 12), generator=g),
                         False),
    "argmax_moe": (ArgmaxMoE, lambda g: torch.randn(4, 6, 8, generator=g), False),
    "top2_moe": (Top2MoE, lambda g: torch.randn(4, 6, 8, generator=g), False),
    "video_conv3d": (VideoConv3d, images((4, 3, 6, 8, 8)), False),
    "audio_groupnorm": (AudioEncoder, images((4, 1, 160)), False),
}


def loss_fn(logits, target):
    return F.cross_entropy(logits, target)


WORKER = """
import sys, numpy as np, fsdp_mlir
plan, data, out, steps, lr = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
feed = dict(np.load(data))
with fsdp_mlir.Session(plan, threads=1) as s:
    losses = [s.step(feed, lr=lr) for _ in range(steps)]
    state = {k: v.numpy() for k, v in s.state_dict().items()}
    if s.rank == 0:
        np.savez(out, __losses__=np.array(losses), **state)
"""


def make(name):
    build, inputs, _ = FAMILIES[name]
    torch.manual_seed(0)
    model = build()
    g = torch.Generator().manual_seed(1)
    x = inputs(g)
    target = torch.randint(0, CLASSES, (x.shape[0],), generator=g)
    return model, x, target


def batch_loss(model, x, target, world, with_bn):
    """The loss torch FSDP computes: with BatchNorm at several ranks, each
    rank's slice (its own statistics) with the losses averaged."""
    if with_bn and world > 1:
        return sum(loss_fn(model(xs), ts) for xs, ts in
                   zip(x.chunk(world), target.chunk(world))) / world
    return loss_fn(model(x), target)


def torch_training(name, world, dtype):
    """STEPS AdamW steps in torch at `dtype`: the losses and the final
    parameters (as float64)."""
    model, x, target = make(name)
    model = model.to(dtype)
    if x.is_floating_point():
        x = x.to(dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = batch_loss(model, x, target, world, FAMILIES[name][2])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), {k: p.detach().double().numpy()
                              for k, p in model.named_parameters()}


def close(ours, exact, torch32, scale=1.0):
    """Whether `ours` is as close to exact arithmetic (torch in float64) as
    torch's own float32 run, within a factor SLACK per tensor, plus ATOL +
    RTOL |exact| (all times `scale`). (AdamW divides by sqrt(v): an
    element whose gradient is rounding noise, e.g. a bias whose shift the
    next BatchNorm removes, moves by +-lr whatever its size, in float32
    torch as here.)"""
    allowed = ATOL + RTOL * np.abs(exact) + SLACK * np.abs(torch32 - exact).max()
    return np.abs(ours - exact) <= scale * allowed


def check_forward(name, work, problems):
    """The inference plan's logits against torch's in eval mode (BatchNorm
    with running statistics, gathered first from 5 training-mode passes)."""
    model, x, _ = make(name)
    with torch.no_grad():  # running statistics other than their initial 0 and 1
        for _ in range(5):
            model(x)
    model.eval()
    onnx_path = fsdp_mlir.export(model, (x,), work / f"{name}.fwd.onnx")
    plan = fsdp_mlir.compile(onnx_path, batch_size=x.shape[0], out=work / f"{name}.fwd.plan")
    with fsdp_mlir.Session(plan, threads=1) as s:
        ours = s.forward({"input_0": x.numpy()})["output_0"]
    with torch.no_grad():
        want = model(x).numpy()
    diff = np.abs(ours - want).max()
    print(f"  {name}: forward max |diff| {diff:.3g} (logits up to {np.abs(want).max():.3g})")
    # Relative to the logits' scale: mobilenet_v3_small's are ~1e-4 at init.
    if not ours.shape == want.shape or diff > 1e-5 * np.abs(want).max():
        problems.append(f"{name}: forward differs from torch by {diff:.3g}")


def check_training(name, world, work, problems):
    model, x, target = make(name)
    onnx_path = work / f"{name}.onnx"
    if not onnx_path.exists():
        fsdp_mlir.export(model, (x[:1], target[:1]), onnx_path, loss_fn=loss_fn)
    plan = fsdp_mlir.compile(onnx_path, batch_size=x.shape[0] // world, world_size=world,
                             optimizer={"optimizer": "adamw"},
                             out=work / f"{name}.w{world}.plan")
    data, out = work / f"{name}.npz", work / f"{name}.w{world}.out.npz"
    np.savez(data, input_0=x.numpy(), input_1=target.numpy())
    worker = work / "worker.py"
    worker.write_text(WORKER)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python-frontend"))
    proc = subprocess.run([sys.executable, "-m", "fsdp_mlir.launch", "-n", str(world),
                           str(worker), str(plan), str(data), str(out), str(STEPS), str(LR)],
                          env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        problems.append(f"{name}: {world}-rank training failed:\n{proc.stdout[-2000:]}"
                        f"{proc.stderr[-3000:]}")
        return
    got = np.load(out)
    exact_losses, exact = torch_training(name, world, torch.float64)
    torch_losses, torch32 = torch_training(name, world, torch.float32)
    ours = got["__losses__"]
    if not close(ours, exact_losses, torch_losses).all():
        problems.append(f"{name} world={world}: losses {list(ours)} vs torch float64 "
                        f"{list(exact_losses)}, float32 {list(torch_losses)}")
    ratio, outliers = 0.0, 0
    for fqn, want in exact.items():
        if fqn not in got:
            problems.append(f"{name} world={world}: no parameter '{fqn}' in the state dict")
            continue
        bad = ~close(got[fqn], want, torch32[fqn])
        err = np.abs(got[fqn] - want).max()
        ratio = max(ratio, err / max(np.abs(torch32[fqn] - want).max(), ATOL))
        # A lone element a little outside is AdamW's ill-conditioning, not
        # an error: its gradient is float32 rounding noise (~1e-8, AdamW's
        # eps), so its step m / (sqrt(v) + eps) follows the noise, which
        # another summation order (oneDNN's kernels differ by CPU: seen on
        # an AMX machine) draws otherwise. A wrong kernel moves many.
        lone = bad.sum() <= max(1, bad.size // 10000) and not (
            ~close(got[fqn], want, torch32[fqn], OUTLIER)).any()
        if bad.any() and lone:
            outliers += int(bad.sum())
        elif bad.any():
            problems.append(f"{name} world={world}: {fqn}: {int(bad.sum())} elements differ "
                            f"from torch float64 by up to {err:.3g} (torch float32: "
                            f"{np.abs(torch32[fqn] - want).max():.3g})")
    print(f"  {name} world={world}: losses {[f'{v:.6f}' for v in ours]}; vs float64 torch, "
          f"loss |diff| {np.abs(ours - exact_losses).max():.2g} (float32 torch "
          f"{np.abs(torch_losses - exact_losses).max():.2g}), parameters' worst |diff| / "
          f"max(float32 torch's, ATOL) {ratio:.2f}"
          + (f"; {outliers} lone element(s) within {OUTLIER:g}x the allowance" if outliers
             else ""))


def check_one_hot(bindir, work, problems):
    """ONNX OneHot (the importer rewrites it) against numpy on what torch's
    F.one_hot never exports: negative indices (counted from depth), indices
    out of range (values[0] everywhere), other values and axes 0, 1, -1."""
    import onnx
    from onnx import TensorProto, helper
    ids = np.array([[0, 4, -1, -5], [7, -6, 2, 3]], np.int64)
    np.save(work / "ids.npy", ids)
    wrapped = np.where(ids < 0, ids + 5, ids)
    for axis in (0, 1, -1):
        nodes = [
            helper.make_node("Constant", [], ["depth"],
                             value=helper.make_tensor("d", TensorProto.INT64, [], [5])),
            helper.make_node("Constant", [], ["values"],
                             value=helper.make_tensor("v", TensorProto.FLOAT, [2], [-1, 3])),
            helper.make_node("OneHot", ["ids", "depth", "values"], ["hot"], axis=axis),
            helper.make_node("Neg", ["hot"], ["y"])]
        graph = helper.make_graph(
            nodes, "one_hot", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 3)])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                  work / "one_hot.onnx")
        want = -np.moveaxis(np.where(np.arange(5) == wrapped[..., None], 3.0, -1.0), -1,
                            axis % 3).astype(np.float32)
        out = work / f"one_hot{axis}"
        for cmd in ([bindir / "fsdp-opt", work / "one_hot.onnx", "--fsdp-inference-pipeline",
                     "-o", work / "one_hot.mlir"],
                    [bindir / "fsdp-translate", "--mlir-to-plan", work / "one_hot.mlir", "-o",
                     work / "one_hot.plan"],
                    [bindir / "fsdp-run", work / "one_hot.plan", "--input",
                     f"ids={work / 'ids.npy'}", "--output-dir", out]):
            proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
            if proc.returncode != 0:
                problems.append(f"OneHot axis={axis}: {proc.stderr[-1000:]}")
                return
        ours = np.load(out / "y.npy")
        same = ours.shape == want.shape and np.array_equal(ours, want)
        print(f"  OneHot axis={axis}: {list(ours.shape)} {'equal to numpy' if same else 'DIFFERS'}")
        if not same:
            problems.append(f"OneHot axis={axis}: {ours} vs numpy {want}")


def check_top_k(bindir, work, problems):
    """ONNX TopK (the importer rewrites it) against numpy's stable sort on
    what torch.topk in a model rarely meets: ties (the lower index first),
    -inf and +inf elements, K equal to the axis' length, smallest, axes 0,
    1 and -1."""
    import onnx
    from onnx import TensorProto, helper
    inf = np.inf
    floats = np.array([[3, 1, 3, -inf, 2, -inf], [0, 0, 0, 0, 0, 0],
                       [-inf, -inf, -inf, 5, inf, -1]], np.float32)
    cases = [("largest k=3 axis=-1", floats, 3, -1, 1), ("largest k=6", floats, 6, -1, 1),
             ("smallest k=4", floats, 4, -1, 0), ("largest k=2 axis=0", floats, 2, 0, 1),
             ("smallest k=5 axis=1", floats[::-1].copy(), 5, 1, 0)]
    for label, x, k, axis, largest in cases:
        elem = TensorProto.FLOAT
        nodes = [
            helper.make_node("Constant", [], ["k"],
                             value=helper.make_tensor("kv", TensorProto.INT64, [1], [k])),
            helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=axis,
                             largest=largest)]
        graph = helper.make_graph(
            nodes, "top_k", [helper.make_tensor_value_info("x", elem, list(x.shape))],
            [helper.make_tensor_value_info("values", elem, None),
             helper.make_tensor_value_info("indices", TensorProto.INT64, None)])
        shape = list(x.shape)
        shape[axis] = k
        for output in graph.output:
            output.type.tensor_type.shape.dim.extend(
                onnx.TensorShapeProto.Dimension(dim_value=d) for d in shape)
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                  work / "top_k.onnx")
        np.save(work / "x.npy", x)
        order = np.argsort(-x if largest else x, axis=axis, kind="stable")
        want_i = np.take(order, np.arange(k), axis=axis)
        want_v = np.take_along_axis(x, want_i, axis=axis)
        out = work / f"top_k_{len(problems)}_{label.replace(' ', '_')}"
        for cmd in ([bindir / "fsdp-opt", work / "top_k.onnx", "--fsdp-inference-pipeline",
                     "-o", work / "top_k.mlir"],
                    [bindir / "fsdp-translate", "--mlir-to-plan", work / "top_k.mlir", "-o",
                     work / "top_k.plan"],
                    [bindir / "fsdp-run", work / "top_k.plan", "--input",
                     f"x={work / 'x.npy'}", "--output-dir", out]):
            proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
            if proc.returncode != 0:
                problems.append(f"TopK {label}: {proc.stderr[-1000:]}")
                return
        got_v, got_i = np.load(out / "values.npy"), np.load(out / "indices.npy")
        same = (np.array_equal(got_i, want_i) and got_v.dtype == x.dtype
                and np.array_equal(got_v, want_v))
        print(f"  TopK {label}: {list(got_v.shape)} {'equal to numpy' if same else 'DIFFERS'}")
        if not same:
            problems.append(f"TopK {label}: values {got_v.tolist()} indices {got_i.tolist()}; "
                            f"numpy: {want_v.tolist()} {want_i.tolist()}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--only", nargs="*", choices=list(FAMILIES))
    args = ap.parse_args(argv)
    os.environ[fsdp_mlir._tools.TOOLS_DIR_ENV] = str((args.build / "bin").resolve())
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for name in args.only or FAMILIES:
            work = root / name
            work.mkdir(parents=True, exist_ok=True)
            problems = []
            try:
                check_subject(name, problems)
                check_forward(name, work, problems)
                for world in (1, 2):
                    check_training(name, world, work, problems)
            except (fsdp_mlir.ToolError, fsdp_mlir.ExportError, RuntimeError) as e:
                problems.append(f"{name}: {e}")
            for p in problems:
                print(f"FAIL {p}")
            failures += bool(problems)
        problems = []
        work = root / "one_hot"
        work.mkdir(parents=True, exist_ok=True)
        check_one_hot((args.build / "bin").resolve(), work, problems)
        work = root / "top_k"
        work.mkdir(parents=True, exist_ok=True)
        check_top_k((args.build / "bin").resolve(), work, problems)
        for p in problems:
            print(f"FAIL {p}")
        failures += bool(problems)
    print("model families: " + ("all match torch" if not failures
                                else f"{failures} families FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
