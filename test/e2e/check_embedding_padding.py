#!/usr/bin/env python3
"""nn.Embedding(padding_idx=k) trains as in torch: the lookup never updates
row k.

    check_embedding_padding.py BUILD_DIR [--keep DIR] [--tools DIR]

ONNX's Gather has no padding_idx; fsdp_mlir.export records it in its
metadata and fsdp-autodiff masks row k of the lookup's gradient. Each model
below (an embedding with an untied linear head, one whose head shares the
embedding's weight, a negative padding_idx, and both head kinds in a
Hugging Face *ForCausalLM's layout, the embedding at model.emb) is
exported with its
loss, compiled by fsdp_mlir.compile for an SGD step at world sizes 1 and 2
(FULL_SHARD, no policy), and run by `fsdp-run --local-ranks W --steps 2`
on a batch whose ids hit the padding row often. torch makes the same two
steps on the whole batch. Every parameter must agree within
|ours - torch| <= 1e-5 + 1e-4 |torch|; untied, the padding row must not
move at all; tied, it moves exactly as torch's (the head's gradient, not
the lookup's). Also refused at export, naming the module: max_norm,
scale_grad_by_freq, sparse, EmbeddingBag with padding_idx. Exit 1 on any
mismatch; prints each case's padding-row update beside the tensor's
largest row update.
"""

from __future__ import annotations

import argparse
import copy
import json
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

ATOL, RTOL = 1e-5, 1e-4
VOCAB, DIM, BATCH, SEQ, LR, STEPS = 11, 8, 4, 6, 0.5, 2


class LM(nn.Module):
    def __init__(self, padding_idx, tied):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM, padding_idx=padding_idx)
        with torch.no_grad():  # the padding row starts non-zero: its moves show
            self.emb.weight.normal_()
        self.mix = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=not tied)
        if tied:
            self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.mix(self.emb(ids))))


class Base(nn.Module):
    """A Hugging Face base model: the embedding and the layers."""

    def __init__(self, padding_idx):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM, padding_idx=padding_idx)
        with torch.no_grad():
            self.emb.weight.normal_()
        self.mix = nn.Linear(DIM, DIM)

    def forward(self, ids):
        return torch.tanh(self.mix(self.emb(ids)))


class NestedLM(nn.Module):
    """A Hugging Face *ForCausalLM's layout: the base model in a child
    called `model`, the head tied to its embedding or not. The export's
    loss wrapper calls the model `model` too, so the lookup's scope reads
    /model/model/emb/Gather: the padding row's mask must still find it."""

    def __init__(self, padding_idx, tied):
        super().__init__()
        self.model = Base(padding_idx)
        self.head = nn.Linear(DIM, VOCAB, bias=not tied)
        if tied:
            self.head.weight = self.model.emb.weight

    def forward(self, ids):
        return self.head(self.model(ids))


def loss_fn(logits, labels):
    return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))


CASES = {  # name: (padding_idx, tied, the row torch leaves alone, class)
    "untied": (3, False, 3, LM),
    "tied": (3, True, 3, LM),
    "negative": (-2, False, VOCAB - 2, LM),
    "nested_untied": (3, False, 3, NestedLM),
    "nested_tied": (3, True, 3, NestedLM),
}


def run(cmd, env=None):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{proc.stderr}")
    return proc.stdout


def check(name: str, world: int, bindir: Path, work: Path) -> list[str]:
    padding_idx, tied, row, cls = CASES[name]
    torch.manual_seed(1)
    model = cls(padding_idx, tied)
    emb = "model.emb" if cls is NestedLM else "emb"
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    ids[:, ::2] = row  # half of the positions look up the padding row
    labels = torch.randint(0, VOCAB, (BATCH, SEQ))
    onnx_path = fsdp_mlir.export(model, (ids[:1], labels[:1]), work / "m.onnx",
                                 loss_fn=loss_fn, input_names=["ids", "labels"])
    meta = {}
    import onnx
    for prop in onnx.load(str(onnx_path)).metadata_props:
        if prop.key == fsdp_mlir.METADATA_KEY:
            meta = json.loads(prop.value)
    want_meta = [{"module": emb, "weight": f"{emb}.weight", "padding_idx": row}]
    if meta.get("embeddings") != want_meta:
        return [f"metadata 'embeddings' is {meta.get('embeddings')}, not {want_meta}"]
    plan = fsdp_mlir.compile(onnx_path, batch_size=BATCH // world, world_size=world,
                             optimizer={"optimizer": "sgd"}, out=work / "m.plan")
    np.save(work / "ids.npy", ids.numpy())
    np.save(work / "labels.npy", labels.numpy())
    state = work / "state"
    cmd = [bindir / "fsdp-run", plan, "--steps", STEPS, "--lr", LR,
           "--input", f"ids={work / 'ids.npy'}", "--input", f"labels={work / 'labels.npy'}",
           "--save-state", state]
    if world > 1:
        cmd += ["--local-ranks", world]
    run(cmd)

    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(ref.parameters(), lr=LR)
    for _ in range(STEPS):
        opt.zero_grad()
        loss_fn(ref(ids), labels).backward()
        opt.step()
    problems = []
    for fqn, p in ref.named_parameters():
        ours = np.load(state / f"{fqn}.npy")
        want = p.detach().numpy()
        bad = np.abs(ours - want) > ATOL + RTOL * np.abs(want)
        if bad.any():
            problems.append(f"{fqn}: {int(bad.sum())} elements differ from torch, "
                            f"max |diff| {np.abs(ours - want).max():.3g}")
    before = model.get_parameter(f"{emb}.weight").detach().numpy()
    ours = np.load(state / f"{emb}.weight.npy")
    moved = np.abs(ours - before).max(axis=1)
    torch_moved = np.abs(ref.get_parameter(f"{emb}.weight").detach().numpy()
                         - before).max(axis=1)
    if not tied and moved[row] != 0.0:
        problems.append(f"padding row {row} moved by {moved[row]:.3g}")
    if tied and not torch_moved[row] > 0:
        problems.append("torch left the tied padding row alone: the case tests nothing")
    others = np.delete(moved, row).max()
    print(f"  {name} world={world}: padding row {row} moved {moved[row]:.3g} "
          f"(torch {torch_moved[row]:.3g}); largest other row {others:.3g}")
    return problems


def check_refusals(work: Path) -> list[str]:
    problems = []
    ids = torch.tensor([[1, 2, 3]])
    cases = [
        (nn.Embedding(5, 4, max_norm=1.0), "Embedding 'emb' has max_norm=1.0"),
        (nn.Embedding(5, 4, scale_grad_by_freq=True),
         "Embedding 'emb' has scale_grad_by_freq=True"),
        (nn.Embedding(5, 4, sparse=True), "Embedding 'emb' has sparse=True"),
        (nn.EmbeddingBag(5, 4, padding_idx=0), "EmbeddingBag 'emb' has padding_idx=0"),
    ]
    for emb, message in cases:
        model = nn.Sequential()
        model.add_module("emb", emb)
        try:
            fsdp_mlir.export(model, ids, work / "refused.onnx")
        except fsdp_mlir.ExportError as e:
            if message not in str(e):
                problems.append(f"export's refusal '{e}' does not say '{message}'")
            continue
        problems.append(f"export accepted {emb}")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--tools", type=Path, help="tools to test (default BUILD/bin)")
    args = ap.parse_args(argv)
    bindir = (args.tools or args.build / "bin").resolve()
    os.environ[fsdp_mlir._tools.TOOLS_DIR_ENV] = str(bindir)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for name in CASES:
            for world in (1, 2):
                work = root / f"{name}-w{world}"
                work.mkdir(parents=True, exist_ok=True)
                problems = check(name, world, bindir, work)
                for p in problems:
                    print(f"FAIL {name} world={world}: {p}")
                failures += bool(problems)
        for p in check_refusals(root):
            print(f"FAIL refusal: {p}")
            failures += 1
    print("embedding padding: " + ("all match torch" if not failures
                                   else f"{failures} failures"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
