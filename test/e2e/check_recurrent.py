#!/usr/bin/env python3
"""nn.LSTM and nn.GRU train as in torch: whole-sequence kernels and their
back-propagation through time.

    check_recurrent.py BUILD_DIR [--keep DIR]

Two models of our own: an embedding, a 2-layer batch_first nn.LSTM, a linear
head and cross-entropy ("lstm"); and an embedding, a bidirectional
single-layer nn.GRU given an initial state h0 that is itself a parameter,
a linear head and cross-entropy ("gru"). Each is exported with its loss by
fsdp_mlir.export (torch 1.13 emits ONNX LSTM/GRU with its weights'
gates reordered by Slice/Concat, and Squeeze/Transpose around them),
compiled by fsdp_mlir.compile for SGD and for AdamW at world sizes 1 and 2
(FULL_SHARD, no policy), and run by `fsdp-run --steps 3` (2 ranks:
`--local-ranks 2`). torch makes the same three steps on the whole batch.
Every parameter must agree within |ours - torch| <= 2e-5 + 1e-4 |torch|,
and at world size 1 each step's loss within the same bounds. Exit 1 on any
mismatch; prints each case's largest parameter difference.
"""

from __future__ import annotations

import argparse
import copy
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

ATOL, RTOL = 2e-5, 1e-4
VOCAB, DIM, HIDDEN, BATCH, SEQ, STEPS = 13, 6, 5, 4, 7, 3
LR = {"sgd": 0.5, "adamw": 0.01}


class LSTMModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.rnn = nn.LSTM(DIM, HIDDEN, num_layers=2, batch_first=True)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, ids):
        y, _ = self.rnn(self.emb(ids))
        return self.head(y)


class GRUModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.rnn = nn.GRU(DIM, HIDDEN, bidirectional=True)
        self.h0 = nn.Parameter(torch.randn(2, 1, HIDDEN) * 0.5)
        self.head = nn.Linear(2 * HIDDEN, VOCAB)

    def forward(self, ids):
        x = self.emb(ids).transpose(0, 1)  # [seq, batch, dim]
        y, h = self.rnn(x, self.h0.expand(2, ids.shape[0], HIDDEN).contiguous())
        # Both the sequence and the final state reach the loss.
        return self.head(y.transpose(0, 1) + torch.cat([h[0], h[1]], -1).unsqueeze(1))


MODELS = {"lstm": LSTMModel, "gru": GRUModel}


def loss_fn(logits, labels):
    return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))


def run(cmd):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def check(name: str, optimizer: str, world: int, bindir: Path, work: Path) -> list[str]:
    torch.manual_seed(3)
    model = MODELS[name]()
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    labels = torch.randint(0, VOCAB, (BATCH, SEQ))
    onnx_path = fsdp_mlir.export(model, (ids[:1], labels[:1]), work / "m.onnx",
                                 loss_fn=loss_fn, input_names=["ids", "labels"])
    plan = fsdp_mlir.compile(onnx_path, batch_size=BATCH // world, world_size=world,
                             optimizer={"optimizer": optimizer}, out=work / "m.plan")
    np.save(work / "ids.npy", ids.numpy())
    np.save(work / "labels.npy", labels.numpy())
    state = work / "state"
    cmd = [bindir / "fsdp-run", plan, "--steps", STEPS, "--lr", LR[optimizer],
           "--input", f"ids={work / 'ids.npy'}", "--input", f"labels={work / 'labels.npy'}",
           "--save-state", state]
    if world > 1:
        cmd += ["--local-ranks", world]
    out = run(cmd)
    losses = [float(line.split()[3]) for line in out.splitlines()
              if line.startswith("step ") and len(line.split()) >= 4]

    ref = copy.deepcopy(model)
    opt = (torch.optim.SGD(ref.parameters(), lr=LR[optimizer]) if optimizer == "sgd"
           else torch.optim.AdamW(ref.parameters(), lr=LR[optimizer]))
    ref_losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = loss_fn(ref(ids), labels)
        loss.backward()
        opt.step()
        ref_losses.append(loss.item())
    problems = []
    if world == 1:
        if len(losses) != STEPS:
            problems.append(f"fsdp-run printed {len(losses)} losses, not {STEPS}:\n{out}")
        for k, (ours, want) in enumerate(zip(losses, ref_losses)):
            if abs(ours - want) > ATOL + RTOL * abs(want):
                problems.append(f"step {k + 1} loss {ours} != torch's {want}")
    worst = 0.0
    for fqn, p in ref.named_parameters():
        ours = np.load(state / f"{fqn}.npy")
        want = p.detach().numpy()
        start = dict(model.named_parameters())[fqn].detach().numpy()
        if np.abs(want - start).max() == 0:
            problems.append(f"{fqn}: torch did not move it: the case tests nothing")
        diff = np.abs(ours - want)
        worst = max(worst, float(diff.max()))
        bad = diff > ATOL + RTOL * np.abs(want)
        if bad.any():
            problems.append(f"{fqn}: {int(bad.sum())} elements differ from torch, "
                            f"max |diff| {diff.max():.3g}")
    print(f"  {name} {optimizer} world={world}: losses {['%.6f' % l for l in losses]} "
          f"(torch {['%.6f' % l for l in ref_losses]}); max |param diff| {worst:.3g}")
    return [f"{name} {optimizer} world={world}: {p}" for p in problems]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--keep", help="keep the work files here")
    args = parser.parse_args()
    bindir = Path(args.build) / "bin"
    os.environ[fsdp_mlir._tools.TOOLS_DIR_ENV] = str(bindir)
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.keep or tmp)
        for name in MODELS:
            for optimizer in ("sgd", "adamw"):
                for world in (1, 2):
                    work = base / f"{name}-{optimizer}-w{world}"
                    work.mkdir(parents=True, exist_ok=True)
                    try:
                        problems += check(name, optimizer, world, bindir, work)
                    except RuntimeError as e:
                        problems.append(f"{name} {optimizer} world={world}: {e}")
    for p in problems:
        print("FAIL:", p)
    print("OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
