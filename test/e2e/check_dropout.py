#!/usr/bin/env python3
"""Training with dropout: the runtime's masks are Philox-4x32-10 of (seed;
step, op, global element), so a step equals torch's with those masks.

    check_dropout.py BUILD_DIR [--keep DIR]

An MLP with two dropouts (p=0.25, 0.5) is exported by fsdp_mlir.export
(torch 1.13, training mode), compiled with fsdp-train-pipeline (SGD) and run
for 5 steps with --seed 1234. The reference is torch running the same steps
with each Dropout replaced by the mask philox_ref.py (an independent Python
Philox, first checked against Random123's known-answer vectors) computes
for that step, op and element: it checks the draws, the element numbering,
the 1/(1-p) scaling and that the gradient uses the forward's mask. Then:
1 and 2 threads give the same losses bit for bit; world size 2 (FULL_SHARD,
--local-ranks 2, each rank half the global batch) and gradient accumulation
(2 micro-batches) draw the same masks as world size 1 on the whole batch
(step 1's loss the same bits; every loss equal to torch's reference within
1e-5: later steps sum gradients in another order); another seed gives other losses; and
p=0 is plain torch training. A residual MLP with torchvision's
StochasticDepth (p=0.5, row mode; exported as a Dropout of a per-sample
ones tensor) trains as torch's with the per-sample masks philox_ref draws,
at world sizes 1 and 2. A run resumed from a sharded checkpoint after 2
steps gives the uninterrupted run's last 3 losses bit for bit.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "python-frontend"))
import philox_ref  # noqa: E402

BATCH, STEPS, LR, SEED = 8, 5, 0.1, 1234


def make_model(torch, ratios):
    torch.manual_seed(0)

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(8, 32)
            self.drop1 = torch.nn.Dropout(ratios[0])
            self.fc2 = torch.nn.Linear(32, 16)
            self.drop2 = torch.nn.Dropout(ratios[1])
            self.fc3 = torch.nn.Linear(16, 1)

        def forward(self, x):
            h = self.drop1(torch.relu(self.fc1(x)))
            return self.fc3(self.drop2(torch.tanh(self.fc2(h))))

    return MLP()


def loss_fn(out, target):
    return ((out - target) ** 2).mean()


def torch_losses(torch, model, x, y, ratios, seed):
    """STEPS SGD steps with each dropout's mask from philox_ref."""

    class Masked(torch.nn.Module):
        def __init__(self, op, ratio):
            super().__init__()
            self.op, self.ratio, self.step = op, ratio, 0

        def forward(self, h):
            if self.ratio == 0:
                return h
            keep = philox_ref.keep_mask(seed, self.step, self.op, 0, h.numel(), self.ratio)
            scale = torch.tensor(1.0) / torch.tensor(1.0 - self.ratio, dtype=torch.float32)
            mask = torch.from_numpy(keep).reshape(h.shape).to(h.dtype)
            return h * (mask * scale)

    live = [r for r in ratios if r > 0]
    ids = iter(range(len(live)))
    model.drop1 = Masked(next(ids) if ratios[0] > 0 else -1, ratios[0])
    model.drop2 = Masked(next(ids) if ratios[1] > 0 else -1, ratios[1])
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        model.drop1.step = model.drop2.step = step
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def compile_plan(bindir, onnx, work, name, world, accumulate=1):
    mlir, plan = work / f"{name}.mlir", work / f"{name}.plan"
    subprocess.run([bindir / "fsdp-opt", onnx, f"--batch-size={BATCH // world // accumulate}",
                    f"--fsdp-train-pipeline=world-size={world} auto-wrap={{policy=none}} "
                    f"optimizer={{optimizer=sgd accumulate={accumulate}}}", "-o", mlir],
                   check=True)
    subprocess.run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan], check=True)
    return plan


def run(bindir, work, plan, seed, threads=1, world=1, steps=STEPS, extra=()):
    cmd = [str(bindir / "fsdp-run"), str(plan), "--input", f"input_0={work / 'x.npy'}",
           "--input", f"input_1={work / 'y.npy'}", "--lr", str(LR), "--threads",
           str(threads), "--steps", str(steps), "--seed", str(seed), *extra]
    if world > 1:
        cmd += ["--local-ranks", str(world)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    found = re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)
    if len(found) != steps:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr[-500:]}")
    return found


def check_stochastic_depth(torch, fsdp_mlir, bindir, work, x, y, check) -> None:
    """Losses of a StochasticDepth MLP against torch's with philox_ref's
    per-sample masks (the only random op: id 0, one element per sample)."""
    import torchvision

    def model():
        torch.manual_seed(0)

        class Residual(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 16)
                self.sd = torchvision.ops.StochasticDepth(0.5, "row")
                self.fc3 = torch.nn.Linear(16, 1)

            def forward(self, x):
                h = torch.relu(self.fc1(x))
                return self.fc3(h + self.sd(self.fc2(h)))

        return Residual()

    onnx = work / "sd.onnx"
    fsdp_mlir.export(model(), (x, y), onnx, loss_fn=loss_fn)
    reference = model()
    opt = torch.optim.SGD(reference.parameters(), lr=LR)
    want = []
    for step in range(STEPS):
        keep = philox_ref.keep_mask(SEED, step, 0, 0, BATCH, 0.5)
        noise = torch.from_numpy(keep).float().reshape(BATCH, 1) * 2.0
        reference.sd.forward = lambda h, noise=noise: h * noise
        opt.zero_grad()
        loss = loss_fn(reference(x), y)
        loss.backward()
        opt.step()
        want.append(loss.item())
    for world in (1, 2):
        got = run(bindir, work, compile_plan(bindir, onnx, work, f"sd-w{world}", world), SEED,
                  world=world)
        close = np.allclose([float(v) for v in got], want, rtol=1e-5, atol=1e-7)
        check(f"stochastic depth at world size {world} vs torch with the same masks", close,
              f"{got} vs {want}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args(argv)
    import torch
    import fsdp_mlir

    philox_ref.check_kat()
    print("  philox_ref: Random123's known-answer vectors hold")
    bindir = args.build.resolve() / "bin"
    failures = 0

    def check(what, ok, detail=""):
        nonlocal failures
        print(f"  {what}: {'ok' if ok else 'FAILED'} {detail}")
        failures += not ok

    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(1)
        x, y = torch.randn(BATCH, 8), torch.randn(BATCH, 1)
        np.save(work / "x.npy", x.numpy())
        np.save(work / "y.npy", y.numpy())
        for ratios in ((0.25, 0.5), (0.0, 0.0)):
            tag = "p0" if ratios[0] == 0 else "drop"
            onnx = work / f"{tag}.onnx"
            fsdp_mlir.export(make_model(torch, ratios), (x, y), onnx, loss_fn=loss_fn)
            want = torch_losses(torch, make_model(torch, ratios), x, y, ratios, SEED)
            plan1 = compile_plan(bindir, onnx, work, f"{tag}-w1", 1)
            one = run(bindir, work, plan1, SEED, threads=1)
            close = np.allclose([float(v) for v in one], want, rtol=1e-5, atol=1e-7)
            check(f"{tag} world 1 vs torch with the same masks", close, f"{one} vs {want}")
            if ratios[0] == 0:
                continue
            two = run(bindir, work, plan1, SEED, threads=2)
            check("1 and 2 threads bit for bit", one == two, f"{two}")
            plan2 = compile_plan(bindir, onnx, work, f"{tag}-w2", 2)
            world2 = run(bindir, work, plan2, SEED, world=2)
            close = np.allclose([float(v) for v in world2], want, rtol=1e-5, atol=1e-7)
            # Step 1's loss, before any gradient is summed in another order,
            # is the same bits: the same masks.
            check("world size 2 draws world size 1's masks", close and world2[0] == one[0],
                  f"{world2} ({'bit for bit' if world2 == one else 'step 1 bit for bit'})")
            plan_acc = compile_plan(bindir, onnx, work, f"{tag}-acc", 1, accumulate=2)
            acc = run(bindir, work, plan_acc, SEED)
            close = np.allclose([float(v) for v in acc], want, rtol=1e-5, atol=1e-7)
            check("2 micro-batches draw the whole batch's masks", close and acc[0] == one[0],
                  f"{acc}")
            ckpt = str(work / "ckpt")
            run(bindir, work, plan1, SEED, steps=2, extra=("--save-checkpoint", ckpt))
            resumed = run(bindir, work, plan1, SEED, steps=STEPS - 2, extra=("--resume", ckpt))
            check("a resumed run draws the masks of the steps it resumes", resumed == one[2:],
                  f"{resumed}")
            other = [float(v) for v in run(bindir, work, plan1, SEED + 1)]
            differs = not np.allclose(other[1:], want[1:], rtol=1e-3)
            check("another seed gives other losses", differs, f"{other}")
        check_stochastic_depth(torch, fsdp_mlir, bindir, work, x, y, check)
    print(f"{'all' if not failures else failures} dropout check(s) "
          f"{'passed' if not failures else 'FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
