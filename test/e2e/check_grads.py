#!/usr/bin/env python3
"""Gradients of fsdp-autodiff against torch.autograd, run on the executor.

    check_grads.py BUILD_DIR [--keep DIR]

Each model below is built in torch, exported with its loss through
fsdp_mlir.export, compiled with `fsdp-opt --fsdp-autodiff
--fsdp-inference-pipeline` and `fsdp-translate --mlir-to-plan`, and run by
fsdp-run on fresh inputs; the plan returns the loss and one `grad.<fqn>`
per trainable parameter. torch computes the same loss and
`loss.backward()` on the same weights and inputs. Every trainable
parameter must have a gradient equal to torch's within
|ours - torch| <= 1e-6 + 1e-4 |torch| (absolute plus relative: some
gradients are mathematically zero), frozen parameters none, and tied
parameters one (the sum over their uses). Exit 1 on any mismatch.

The models: two small ones written here (a frozen backbone and a weight
tied between two Linears with Tanh/Sigmoid gating; 3-D activations with
softmax gating, division by a parameter and a sequence mean), and the
corpus's GPT-2 (embeddings with a tied lm_head, LayerNorm, fused QKV split,
causal masked attention, tanh-GELU) and LLaMA (RMSNorm, rotary embeddings
by Slice/Neg/Concat, SwiGLU) exactly as exported in build/test/corpus, with
torch's weights loaded from the ONNX file.
"""

from __future__ import annotations

import argparse
import json
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


def cls_loss(logits, labels):
    return F.cross_entropy(logits, labels, ignore_index=-100)


CASES = {
    "tied_mlp": (TiedMLP, lambda g: torch.randn(6, 8, generator=g), 4),
    "seq_mlp": (SeqMLP, lambda g: torch.randn(6, 5, 8, generator=g), 5),
}
CORPUS = ["gpt2", "llama"]


def run(cmd):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed: {' '.join(map(str, cmd))}\n{proc.stderr}")
    return proc.stdout


def check(name: str, bindir: Path, work: Path) -> bool:
    import fsdp_mlir

    if name in CORPUS:
        import check_forward
        import models

        case = models.CASES[name]
        model, examples = case.build()
        onnx_path = bindir.parent / "test" / "corpus" / f"{name}.onnx"
        check_forward.load_onnx_weights(model, onnx_path)
        x, labels = check_forward.fresh_inputs(examples, 3, seed=5)
        loss_fn = case.loss_fn
        names = case.input_names
    else:
        cls, make_input, classes = CASES[name]
        torch.manual_seed(0)
        model = cls()
        g = torch.Generator().manual_seed(1)
        x = make_input(g)
        labels = torch.randint(0, classes, (x.shape[0],), generator=g)
        labels[1] = -100  # an ignored label
        onnx_path = work / "m.onnx"
        fsdp_mlir.export(model, (x, labels), onnx_path, loss_fn=cls_loss,
                         input_names=["x", "labels"])
        loss_fn = cls_loss
        names = ["x", "labels"]
    run([bindir / "fsdp-opt", onnx_path, f"--batch-size={x.shape[0]}",
         "--fsdp-autodiff", "--fsdp-inference-pipeline", "--mlir-print-debuginfo",
         "-o", work / "m.mlir"])
    run([bindir / "fsdp-translate", "--mlir-to-plan", work / "m.mlir", "-o", work / "m.plan"])
    np.save(work / "x.npy", x.numpy())
    np.save(work / "labels.npy", labels.numpy())
    report = json.loads(run([bindir / "fsdp-run", work / "m.plan", "--input",
                             f"{names[0]}={work / 'x.npy'}", "--input",
                             f"{names[1]}={work / 'labels.npy'}", "--output-dir",
                             work / "out", "--json"]))
    ours = {o["name"]: np.load(work / "out" / f"{o['name']}.npy") for o in report["outputs"]}

    model.zero_grad()
    loss = loss_fn(model(x), labels)
    loss.backward()
    expected = {"loss": loss.detach().numpy()}
    seen = set()
    for fqn, p in model.named_parameters():  # tied parameters appear once
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            expected[f"grad.{fqn}"] = p.grad.numpy()

    ok = sorted(ours) == sorted(expected)
    if not ok:
        print(f"  outputs {sorted(ours)} but torch has {sorted(expected)}")
    for key in sorted(set(ours) & set(expected)):
        got, want = ours[key].astype(np.float64), expected[key].astype(np.float64)
        err = np.abs(got - want)
        good = got.shape == want.shape and bool(np.all(err <= ATOL + RTOL * np.abs(want)))
        print(f"  {key:24s} {list(want.shape)!s:10s} max |diff| {float(err.max()):.2e} "
              f"{'ok' if good else 'MISMATCH'}")
        ok &= good
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    bindir = args.build.resolve() / "bin"
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in list(CASES) + CORPUS:
            print(f"{name}:", flush=True)
            work = (args.keep or Path(tmp)) / name
            work.mkdir(parents=True, exist_ok=True)
            try:
                if not check(name, bindir, work):
                    failed.append(name)
            except Exception as e:  # noqa: BLE001
                print(f"  FAILED: {e}")
                failed.append(name)
    total = len(CASES) + len(CORPUS)
    print(f"{total - len(failed)}/{total} models: gradients equal to torch.autograd"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
