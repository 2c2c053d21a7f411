#!/usr/bin/env python3
"""A dropout GPT trains as torch's does, in distribution.

    check_dropout_gpt.py BUILD_DIR [--seeds N] [--keep DIR]

The corpus GPT-2 (test/corpus/models.py) with residual dropout (p=0.2
after each attention and MLP projection) is exported by fsdp_mlir.export,
compiled into an AdamW step (lr 3e-3) and trained for 20 steps on one batch
with --seed 0..N-1; torch 1.13 trains the same model from the same weights
with torch.manual_seed(0..N-1). The masks are different draws, so the
losses are compared as distributions: at every step the two means over
seeds must agree within 4 standard errors of their difference (plus 1e-3
for the float noise of steps without randomness). The band must have the
power to tell: torch's curve without dropout (p=0) must lie outside it at
step 20. With activation checkpointing (every GPT2Block recomputed in the
backward, its dropouts with it) seed 0's losses stay within 1e-5 of
those without (another mask would move them by about 1e-2): the
recomputation draws the forward's masks. (Not the same bits: the
recomputed forward rounds differently in places.)
"""

from __future__ import annotations

import argparse
import copy
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "corpus"))
sys.path.insert(0, str(HERE.parent.parent / "python-frontend"))
import gpt2_job  # noqa: E402

STEPS, LR, RATIO = 20, 3e-3, 0.2


def dropout_gpt(torch, models, ratio):
    model, _ = models.build_gpt2()
    for block in model.blocks:
        block.attn.c_proj = torch.nn.Sequential(block.attn.c_proj, torch.nn.Dropout(ratio))
        block.mlp.c_proj = torch.nn.Sequential(block.mlp.c_proj, torch.nn.Dropout(ratio))
    return model


def torch_curve(torch, models, model, ids, labels, seed):
    model = copy.deepcopy(model).train()
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    curve = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = models.lm_loss(model(ids), labels)
        loss.backward()
        opt.step()
        curve.append(loss.item())
    return curve


def compile_plan(bindir, work, onnx, name, extra):
    mlir, plan = work / f"{name}.mlir", work / f"{name}.plan"
    subprocess.run([bindir / "fsdp-opt", onnx, "--batch-size=4",
                    "--fsdp-train-pipeline=world-size=1 auto-wrap={policy=transformer "
                    "layer-classes=GPT2Block} optimizer={optimizer=adamw}" + extra, "-o", mlir],
                   check=True)
    subprocess.run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan], check=True)
    return plan


def plan_curve(bindir, work, plan, seed):
    cmd = [str(bindir / "fsdp-run"), str(plan), "--input", f"input_ids={work / 'ids.npy'}",
           "--input", f"labels={work / 'labels.npy'}", "--lr", str(LR), "--steps", str(STEPS),
           "--seed", str(seed), "--threads", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    found = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]
    if len(found) != STEPS:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr[-500:]}")
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args(argv)
    import torch
    import fsdp_mlir
    import models

    bindir = args.build.resolve() / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        gpt2_job.write_batch(work)
        ids = torch.from_numpy(np.load(work / "ids.npy"))
        labels = torch.from_numpy(np.load(work / "labels.npy"))
        model = dropout_gpt(torch, models, RATIO)
        onnx = fsdp_mlir.export(model, (ids, labels), work / "gpt.onnx", loss_fn=models.lm_loss,
                                input_names=["input_ids", "labels"])
        plan = compile_plan(bindir, work, onnx, "gpt", "")
        recomputed = compile_plan(bindir, work, onnx, "gpt-ckpt",
                                  " autodiff={checkpoint-classes=GPT2Block}")
        ours = np.array([plan_curve(bindir, work, plan, s) for s in range(args.seeds)])
        again = plan_curve(bindir, work, recomputed, 0)
        same = np.allclose(again, ours[0], rtol=1e-5, atol=0)
        print("  activation checkpointing: seed 0's losses "
              + ("within 1e-5" if same else f"DIFFER: {again} vs {list(ours[0])}"))
        theirs = np.array([torch_curve(torch, models, model, ids, labels, s)
                           for s in range(args.seeds)])
        plain = np.array(torch_curve(torch, models, dropout_gpt(torch, models, 0.0),
                                     ids, labels, 0))
    n = args.seeds
    gap = np.abs(ours.mean(0) - theirs.mean(0))
    band = 4 * np.sqrt(ours.var(0, ddof=1) / n + theirs.var(0, ddof=1) / n) + 1e-3
    outside = [k + 1 for k in range(STEPS) if gap[k] > band[k]]
    for k in (0, 4, 9, 14, 19):
        print(f"  step {k + 1:2}: plan {ours.mean(0)[k]:.4f} +- {ours.std(0, ddof=1)[k]:.4f}, "
              f"torch {theirs.mean(0)[k]:.4f} +- {theirs.std(0, ddof=1)[k]:.4f}, "
              f"band {band[k]:.4f}; torch without dropout {plain[k]:.4f}")
    print(f"{n} seeds, {STEPS} steps: "
          + ("every step's mean within the band" if not outside
             else f"steps {outside} OUTSIDE the band"))
    telling = abs(plain[-1] - theirs.mean(0)[-1]) > band[-1]
    if not telling:
        print("the band is too wide to tell dropout from none at step 20")
    return 1 if outside or not telling or not same else 0


if __name__ == "__main__":
    sys.exit(main())
