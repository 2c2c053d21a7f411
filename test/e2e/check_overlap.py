#!/usr/bin/env python3
"""Measured overlap of communication with compute, beside the cost model's.

    check_overlap.py BUILD_DIR

For the corpus GPT-2 and LLaMA sharded over 2 ranks (FULL_SHARD, AdamW),
fsdp-opt's --fsdp-unit-summary gives the modelled step: compute,
communication and the exposed communication the schedule leaves. fsdp-run
--json under mpirun, and with --local-ranks, gives the measured ones:
compute kernels, each collective from its start to its completion
(communication_seconds), and the time the step waited for collectives
(exposed_communication_seconds, exposed_fraction). The table prints the two
side by side; and on the fake CUDA device (local ranks), whose figures come
from the device's clock as on a GPU (events around each kernel and the
step). Timings are never thresholds here. The test checks what must
hold on any machine: every figure is there and finite, the exposed part
lies between 0 and the step, and the fraction is exposed over the step.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpt2_job  # noqa: E402

MODELS = {"gpt2": "GPT2Block", "llama": "LlamaBlock"}
STEPS = 10
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader", OMPI_MCA_rmaps_base_oversubscribe="1")


def compile_plan(bindir: Path, corpus: Path, work: Path, model: str) -> tuple[Path, dict]:
    """The 2-rank plan and the modelled figures (ms) of its step."""
    mlir, plan = work / f"{model}.mlir", work / f"{model}.plan"
    out = subprocess.run(
        [bindir / "fsdp-opt", corpus / f"{model}.onnx", "--batch-size=2",
         "--fsdp-train-pipeline=world-size=2"
         f" auto-wrap={{policy=transformer layer-classes={MODELS[model]}}}"
         " optimizer={optimizer=adamw} unit-summary=true", "-o", mlir],
        check=True, capture_output=True, text=True).stdout
    found = re.search(r"modelled step (\S+) ms \(compute (\S+) ms, communication (\S+) ms, "
                      r"exposed (\S+) ms\)", out)
    if not found:
        raise RuntimeError(f"no modelled step in fsdp-opt's output:\n{out}")
    model_ms = dict(zip(("step", "compute", "communication", "exposed"),
                        map(float, found.groups())))
    subprocess.run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan], check=True)
    return plan, model_ms


def measure(bindir: Path, work: Path, plan: Path, how: str) -> dict:
    cmd = [str(bindir / "fsdp-run"), str(plan), "--input", f"input_ids={work / 'ids.npy'}",
           "--input", f"labels={work / 'labels.npy'}", "--lr", "1e-3", "--threads", "1",
           "--steps", str(STEPS), "--json"]
    if how == "mpirun":
        cmd = ["mpirun", "-np", "2", *cmd]
    else:
        cmd += ["--local-ranks", "2"]
    if how.endswith("fake-cuda"):
        cmd += ["--device", "fake-cuda"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300,
                          check=True)
    report = json.loads(proc.stdout)
    steps = sum(report["run_seconds"])
    return {"step": 1e3 * steps / STEPS,
            "compute": 1e3 * report["compute_seconds"] / STEPS,
            "communication": 1e3 * report["communication_seconds"] / STEPS,
            "exposed": 1e3 * report["exposed_communication_seconds"] / STEPS,
            "fraction": report["exposed_fraction"], "total": 1e3 * steps}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    args = ap.parse_args(argv)
    bindir = args.build.resolve() / "bin"
    corpus = args.build.resolve() / "test" / "corpus"
    failures = 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        gpt2_job.write_batch(work)
        for model in MODELS:
            plan, modelled = compile_plan(bindir, corpus, work, model)
            rows.append((model, "modelled", modelled["step"], modelled["compute"],
                         modelled["communication"], modelled["exposed"],
                         modelled["exposed"] / modelled["step"] if modelled["step"] else 0))
            for how in ("mpirun", "local-ranks", "local-ranks on fake-cuda"):
                m = measure(bindir, work, plan, how)
                figures = [m["step"], m["compute"], m["communication"], m["exposed"],
                           m["fraction"]]
                good = (all(math.isfinite(v) and v >= 0 for v in figures)
                        and m["exposed"] <= m["step"] * (1 + 1e-6)
                        and m["communication"] > 0 and m["compute"] > 0
                        and abs(m["fraction"] - m["exposed"] / m["step"]) <= 1e-6 + 1e-3 * m["fraction"])
                failures += not good
                rows.append((model, f"measured ({how})" + ("" if good else " INCONSISTENT"),
                             *figures))
    print("| model | figures | step ms | compute ms | communication ms | exposed ms | "
          "exposed fraction |")
    print("|---|---|---|---|---|---|---|")
    for model, kind, *values in rows:
        print(f"| {model} | {kind} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    print(f"{'all' if not failures else failures} overlap check(s) "
          f"{'passed' if not failures else 'FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
