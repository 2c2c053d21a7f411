"""Shard a torchvision ResNet-18 over 2 CPU ranks and train it a few steps.

    python shard_resnet.py [--ranks 2] [--steps 3] [--work DIR]

Exports torchvision's resnet18 (10 classes, 32x32 images) with a
cross-entropy loss, compiles a training step with one FSDP unit per
BasicBlock (FULL_SHARD, SGD with momentum) for the ranks, prints what the
plan holds per rank, and trains on every rank (BatchNorm statistics are
per rank, as in PyTorch FSDP).
"""

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import torchvision

import fsdp_mlir


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("resnet-run"))
    ap.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    work = opts.work
    if opts.train:  # one rank
        session = fsdp_mlir.Session(work / "resnet.plan", threads=1)
        batch = {"pixels": np.load(work / "pixels.npy"), "labels": np.load(work / "labels.npy")}
        for step in range(1, opts.steps + 1):
            loss = session.step(batch, lr=0.01)
            if session.rank == 0:
                print(f"step {step} loss {loss:.4f}", flush=True)
        return 0
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    g = torch.Generator().manual_seed(1)
    pixels = torch.randn(6 * opts.ranks, 3, 32, 32, generator=g)
    labels = torch.randint(0, 10, (6 * opts.ranks,), generator=g)
    np.save(work / "pixels.npy", pixels.numpy())
    np.save(work / "labels.npy", labels.numpy())
    fsdp_mlir.export(model, (pixels[:2], labels[:2]), work / "resnet.onnx",
                     loss_fn=torch.nn.functional.cross_entropy,
                     input_names=["pixels", "labels"])
    plan = fsdp_mlir.compile(
        work / "resnet.onnx", batch_size=6, world_size=opts.ranks,
        policy=fsdp_mlir.transformer_layers({torchvision.models.resnet.BasicBlock}),
        optimizer={"optimizer": "sgd", "momentum": 0.9}, out=work / "resnet.plan")
    print(fsdp_mlir.run_tool("fsdp-run", [plan, "--describe"]), end="")
    subprocess.run([sys.executable, "-m", "fsdp_mlir.launch", "-n", str(opts.ranks),
                    __file__, "--train", "--work", str(work), "--steps", str(opts.steps)],
                   check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
