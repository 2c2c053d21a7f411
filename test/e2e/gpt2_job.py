"""The 2-rank GPT-2 training job the fault, network and hostile-checkpoint
tests run: a batch of token ids and labels, and the corpus GPT-2 compiled
into a sharded AdamW step (one unit per GPT2Block)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np


def write_batch(work: Path) -> None:
    """work/ids.npy and work/labels.npy: a global batch of 4 sequences of 16
    tokens of the corpus GPT-2's vocabulary (64)."""
    rng = np.random.default_rng(0)
    np.save(work / "ids.npy", rng.integers(0, 64, (4, 16)).astype(np.int64))
    np.save(work / "labels.npy", rng.integers(0, 64, (4, 16)).astype(np.int64))


def prepare(build: Path, work: Path, world: int = 2) -> Path:
    """Writes the batch (write_batch) and returns the plan of the step
    sharded over `world` ranks (batch 2 per rank when world is 2)."""
    bindir, corpus = build / "bin", build / "test" / "corpus"
    write_batch(work)
    mlir, plan = work / f"g{world}.mlir", work / f"g{world}.plan"
    subprocess.run([bindir / "fsdp-opt", corpus / "gpt2.onnx", f"--batch-size={4 // world}",
                    f"--fsdp-train-pipeline=world-size={world}"
                    " auto-wrap={policy=transformer layer-classes=GPT2Block}"
                    " optimizer={optimizer=adamw}", "-o", mlir], check=True)
    subprocess.run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan],
                   check=True)
    return plan
