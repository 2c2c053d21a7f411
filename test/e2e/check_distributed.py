#!/usr/bin/env python3
"""Sharded training on several CPU ranks (Open MPI) against single-process
PyTorch on the whole batch: the product's definition of "correct".

    check_distributed.py BUILD_DIR [--keep DIR] [--only CASE ...]
                         [--worlds 1 2 3 4] [--steps 5]

For each case and world size W the model is compiled for the per-rank
batch (global batch / W), wrapped per transformer block, FULL_SHARD (and
SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD on a 2x2 mesh at 4 ranks), AdamW
with global-norm clipping, scheduled, and run with

    mpirun -np W --oversubscribe fsdp-run PLAN --steps 5 --lr LR \\
        --input NAME=GLOBAL.npy ... --save-state DIR

(each rank takes its slice of the global batch; rank 0 prints the loss
averaged over ranks and writes every parameter gathered from the shards).
torch makes the same steps on the whole batch in one process. Per-step
losses and final parameters must agree within |ours - torch| <= 1e-5 +
1e-4 |torch|, except elements whose first-step gradient is at fp32's
noise floor (|g| <= 1e-6 max |g| of the parameter: GPT-2's attention key
bias, whose gradient is zero in exact arithmetic since softmax ignores
it, or an isolated LLaMA weight with |g| = 3e-9 against 8e-3): AdamW
divides by sqrt(v), so rounding noise becomes steps of up to lr there;
those are reported and must stay within steps x lr of torch. Exit 1 on
any mismatch.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_grads  # noqa: E402
import check_optim  # noqa: E402

ATOL, RTOL = 1e-5, 1e-4
# case: (corpus model, transformer block class, lr, auto-wrap extras,
#        fsdp-flatten mesh option, world sizes it runs at (None: all))
CASES = {
    "gpt2": ("gpt2", "GPT2Block", 1e-3, "", None, None),
    "llama": ("llama", "LlamaBlock", 1e-3, "", None, None),
    # The other strategies on 4 ranks: each equals torch on one process
    # (GPT-2 has no per-rank state, so every strategy computes the same
    # step); HYBRID_SHARD shards within pairs and replicates across them.
    "gpt2-shard-grad-op": ("gpt2", "GPT2Block", 1e-3, " strategy=SHARD_GRAD_OP",
                           None, [4]),
    "gpt2-no-shard": ("gpt2", "GPT2Block", 1e-3, " strategy=NO_SHARD", None, [4]),
    "gpt2-hybrid-shard": ("gpt2", "GPT2Block", 1e-3, " strategy=HYBRID_SHARD",
                          "mesh-shape=2,2", [4]),
}
NOISE_FLOOR = 1e-6  # relative to a parameter's largest gradient


def first_gradients(model, inputs, labels, loss_fn) -> dict:
    """torch's gradient of every parameter at the initial weights."""
    model = copy.deepcopy(model)
    model.train()
    loss_fn(model(*inputs), labels).backward()
    return {k: p.grad.numpy() for k, p in model.named_parameters() if p.grad is not None}


def mpirun(world: int, cmd: list) -> str:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    full = ["mpirun", "-np", str(world), "--oversubscribe", *map(str, cmd)]
    proc = subprocess.run(full, capture_output=True, text=True, env=env,
                          timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed: {' '.join(full)}\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def check(case: str, world: int, steps: int, bindir: Path, work: Path) -> bool:
    name, block, lr, extra, mesh, _ = CASES[case]
    # A global batch every world size divides: 12 sequences.
    model, inputs, labels, loss_fn, onnx_path, names, label_name, autodiff = \
        check_grads.prepare(name, work, 4)
    batch = inputs[0].shape[0]
    assert batch % world == 0, (batch, world)
    mlir, plan = work / f"w{world}.mlir", work / f"w{world}.plan"
    check_grads.run([bindir / "fsdp-opt", onnx_path, f"--batch-size={batch // world}",
                     f"--fsdp-auto-wrap=policy=transformer layer-classes={block}{extra}",
                     f"--fsdp-autodiff{autodiff}",
                     f"--fsdp-flatten={mesh or f'world-size={world}'}",
                     "--fsdp-optimizer=optimizer=adamw max-grad-norm=1", "--fsdp-shard",
                     "--fsdp-schedule", "--fsdp-inference-pipeline", "-o", mlir])
    check_grads.run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan])
    flags = []
    for input_name, value in zip(names + [label_name], inputs + [labels]):
        np.save(work / f"{input_name}.npy", value.numpy())
        flags += ["--input", f"{input_name}={work / input_name}.npy"]
    state = work / f"state{world}"
    report = json.loads(mpirun(world, [bindir / "fsdp-run", plan, *flags, "--steps", steps,
                                       "--lr", lr, "--threads", 1, "--save-state", state,
                                       "--json"]))
    ours = {f.stem: np.load(f) for f in state.glob("*.npy")}
    want_losses, want = check_optim.torch_steps(
        copy.deepcopy(model), inputs, labels, loss_fn,
        lambda p, lr: torch.optim.AdamW(p, lr), lr, 1.0, 1, steps)

    got = report["losses"]
    ok = bool(np.allclose(got, want_losses, rtol=RTOL, atol=ATOL))
    worst_loss = float(np.max(np.abs(np.array(got) - np.array(want_losses))))
    print(f"  world {world}: losses {', '.join(f'{v:.6f}' for v in got)} "
          f"(torch {', '.join(f'{v:.6f}' for v in want_losses)}), "
          f"worst {worst_loss:.1e} {'ok' if ok else 'MISMATCH'}")
    grads = first_gradients(model, inputs, labels, loss_fn)
    params = [k for k in want if not k.startswith("optim.") and k in dict(model.named_parameters())]
    missing = [k for k in params if k not in ours]
    if missing:
        print(f"  parameters not written: {missing}")
        ok = False
    worst, noisy = ("", 0.0), ("", 0.0)
    for key in params:
        if key not in ours:
            continue
        err = np.abs(ours[key].astype(np.float64) - want[key].astype(np.float64))
        g = np.abs(grads.get(key, np.zeros_like(err)))
        floor = g <= NOISE_FLOOR * max(float(g.max()), 1e-30)
        if floor.any():
            noisy = max(noisy, (key, float(err[floor].max())), key=lambda t: t[1])
        if (~floor).any():
            worst = max(worst, (key, float(err[~floor].max())), key=lambda t: t[1])
        good = bool(np.all(np.where(floor, err <= steps * lr,
                                    err <= ATOL + RTOL * np.abs(want[key]))))
        if not good:
            print(f"  {key:32s} max |diff| {float(err.max()):.2e} MISMATCH")
        ok &= good
    print(f"    {len(params)} parameters after {steps} steps, worst |diff| "
          f"{worst[1]:.1e} ({worst[0]})"
          + (f"; at the gradient noise floor: {noisy[0]} {noisy[1]:.1e} (<= steps x lr)"
             if noisy[0] else ""))
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--worlds", nargs="*", type=int, default=[1, 2, 3, 4])
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    bindir = args.build.resolve() / "bin"
    check_grads.ROOT_BUILD = args.build.resolve()
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.only or list(CASES):
            print(f"{case}:", flush=True)
            work = (args.keep or Path(tmp)) / case
            work.mkdir(parents=True, exist_ok=True)
            for world in CASES[case][5] or args.worlds:
                try:
                    if not check(case, world, args.steps, bindir, work):
                        failed.append(f"{case}@{world}")
                except Exception as e:  # noqa: BLE001
                    print(f"  world {world}: FAILED: {e}")
                    failed.append(f"{case}@{world}")
    total = sum(len(CASES[c][5] or args.worlds) for c in args.only or CASES)
    print(f"{total - len(failed)}/{total} runs equal to single-process torch"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
