#!/usr/bin/env python3
"""Sharded plans run as ranks of one process (fsdp-run --local-ranks N):
their losses equal the same plans under mpirun.

    check_local_ranks.py BUILD_DIR [--keep DIR]

A local group's collectives meet in memory, which is how several ranks
share one GPU (NCCL refuses two ranks on one device). For the corpus GPT-2
and LLaMA (AdamW, max-grad-norm 1) and each strategy (FULL_SHARD at 2 and 4
ranks, SHARD_GRAD_OP and NO_SHARD at 4, HYBRID_SHARD on a 2x2 mesh), 3
steps with --local-ranks, on the CPU and on the fake device (the CUDA
backend's host code), must give the mpirun job's losses within 1e-6
relative: a local group sums in rank order, Open MPI in an order of its
own at 4 ranks (at 2 they agree bit for bit). A rank that fails (a label out
of range in rank 1's half of the batch) stops the others with a message,
well within the deadline.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpt2_job  # noqa: E402

MODELS = {"gpt2": "GPT2Block", "llama": "LlamaBlock"}
# name: (auto-wrap extra, the pipeline's ranks option, world)
STRATEGIES = {
    "FULL_SHARD-2": ("", "world-size=2", 2),
    "FULL_SHARD-4": ("", "world-size=4", 4),
    "SHARD_GRAD_OP-4": (" strategy=SHARD_GRAD_OP", "world-size=4", 4),
    "NO_SHARD-4": (" strategy=NO_SHARD", "world-size=4", 4),
    "HYBRID_SHARD-2x2": (" strategy=HYBRID_SHARD", "mesh-shape=2,2", 4),
}
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader", OMPI_MCA_rmaps_base_oversubscribe="1")


def compile_plan(bindir: Path, corpus: Path, work: Path, model: str, strategy: str) -> Path:
    extra, flatten, world = STRATEGIES[strategy]
    mlir, plan = work / f"{model}-{strategy}.mlir", work / f"{model}-{strategy}.plan"
    subprocess.run([bindir / "fsdp-opt", corpus / f"{model}.onnx", f"--batch-size={4 // world}",
                    f"--fsdp-train-pipeline={flatten}"
                    f" auto-wrap={{policy=transformer layer-classes={MODELS[model]}{extra}}}"
                    " optimizer={optimizer=adamw max-grad-norm=1}", "-o", mlir], check=True)
    subprocess.run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan], check=True)
    return plan


def losses(bindir: Path, work: Path, plan: Path, world: int, how: str,
           labels: str = "labels.npy") -> tuple[list[float], str, float]:
    """The losses of 3 steps, fsdp-run's stderr and the seconds it took."""
    cmd = [str(bindir / "fsdp-run"), str(plan), "--input", f"input_ids={work / 'ids.npy'}",
           "--input", f"labels={work / labels}", "--lr", "1e-3", "--threads", "1",
           "--steps", "3"]
    if how == "mpirun":
        cmd = ["mpirun", "-np", str(world), "--oversubscribe", *cmd]
    else:
        cmd += ["--local-ranks", str(world), "--device", how]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    found = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]
    return found, proc.stderr, time.monotonic() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args(argv)
    bindir = args.build.resolve() / "bin"
    corpus = args.build.resolve() / "test" / "corpus"
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        gpt2_job.write_batch(work)
        for model in MODELS:
            for strategy, (_, _, world) in STRATEGIES.items():
                plan = compile_plan(bindir, corpus, work, model, strategy)
                want, err, _ = losses(bindir, work, plan, world, "mpirun")
                if len(want) != 3:
                    print(f"  {model} {strategy}: mpirun failed: {err[-300:]}")
                    failures += 1
                    continue
                for device in ("cpu", "fake-cuda"):
                    got, err, _ = losses(bindir, work, plan, world, device)
                    same = len(got) == 3 and np.allclose(got, want, rtol=1e-6, atol=0)
                    print(f"  {model} {strategy} --local-ranks {world} on {device}: {got} "
                          f"(mpirun {want}) {'equal' if same else 'DIFFERENT ' + err[-300:]}")
                    failures += not same
        # A rank that fails stops the others: rank 1's label out of range.
        bad = np.load(work / "labels.npy")
        bad[3, 3] = 70
        np.save(work / "bad.npy", bad)
        plan = work / "gpt2-FULL_SHARD-2.plan"
        for device in ("cpu", "fake-cuda"):
            got, err, seconds = losses(bindir, work, plan, 2, device, labels="bad.npy")
            named = ("rank 1: error: step 1 failed" in err and "label 70 is outside" in err
                     and "rank 0: error:" in err and "another rank failed" in err)
            good = named and not got and seconds < 60
            print(f"  a failing rank on {device}: {'stops both ranks' if good else 'WRONG'} "
                  f"in {seconds:.1f} s: {err.strip().splitlines()}")
            failures += not good
    print(f"{'all' if not failures else failures} local-rank check(s) "
          f"{'passed' if not failures else 'FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
