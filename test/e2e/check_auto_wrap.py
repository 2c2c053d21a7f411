#!/usr/bin/env python3
"""fsdp-auto-wrap policy=auto on the corpus: its promises, checked.

    check_auto_wrap.py BUILD_DIR [--keep DIR] [--only MODEL ...] [--worlds 2 4 1024]

For every corpus model that trains (check_plans.py's list) at each world
size, policy=auto is asked (--fsdp-explain-policy=format=json) without a
budget, then at budgets taken from the hand policies' modelled peaks
(between the largest and smallest, just above the smallest, and below
every one of them; a configuration fits when its modelled peak plus the
10% memory-reserve is within the budget). At each budget:

  - by the model, the choice is never slower than a hand policy that fits
    the budget (the hand policies: no wrapping, transformer layers,
    size-based at powers of ten, FULL_SHARD), and it fits whenever one of
    them does; when nothing fits the refusal names the smallest peak;
  - the choice, compiled through the whole training step (AdamW with
    clipping, fsdp-shard, fsdp-schedule with the chosen settings, memory
    plan) and read back by the runtime's plan reader, has the chosen world
    size and units, and its planned peak per rank is within the budget
    (fsdp-plan-memory refuses a plan over it, so this is checked twice);
  - the chosen schedule settings are in the scheduled program (bucket
    ids only when buckets were chosen).

Exit 1 on any failure. Needs no torch and no MPI.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_plans import BATCH, MODELS  # noqa: E402

TRAINING = ["gpt2", "llama", "resnet18", "bert", "mixed", "frozen_tied"]
RESERVE = 1.1  # fsdp-auto-wrap's default memory-reserve, on the modelled peak


def run(cmd) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True)


def check(model: str, world: int, bindir: Path, corpus: Path, work: Path) -> list[str]:
    failures = []
    _, loss = MODELS[model]
    onnx = corpus / f"{model}.onnx"
    auto = f"policy=auto world-size={world} clipping=true"

    def explain(budget):
        wrap = auto + (f" memory-budget={budget}" if budget else "")
        proc = run([bindir / "fsdp-opt", onnx, f"--batch-size={BATCH}",
                    f"--fsdp-auto-wrap={wrap}", "--fsdp-explain-policy=format=json",
                    "-o", "/dev/null"])
        return proc, (json.loads(proc.stdout) if proc.returncode == 0 else None)

    proc, free = explain(None)
    if not free:
        return [f"{model} w{world}: policy=auto failed without a budget:\n{proc.stderr}"]
    hand = [h for h in free["hand_policies"] if "invalid" not in h]
    peaks = sorted(h["peak_bytes"] for h in hand) or [free["chosen"]["peak_bytes"]]
    budgets = [None, int((peaks[0] + peaks[-1]) / 2 * RESERVE),
               int(peaks[0] * RESERVE * 1.001), int(peaks[0] * 0.5)]
    for budget in dict.fromkeys(budgets):
        label = f"{model} w{world} budget {budget or 'none'}"
        fitting = [h for h in hand
                   if budget is None or h["peak_bytes"] * RESERVE <= budget]
        proc, result = explain(budget)
        if result is None:
            if fitting:
                failures.append(f"{label}: refused, but {fitting[0]['policy']} fits "
                                f"({fitting[0]['peak_bytes']} B):\n{proc.stderr}")
            elif "the smallest modelled peak is" not in proc.stderr:
                failures.append(f"{label}: refused without the smallest peak:\n"
                                f"{proc.stderr}")
            else:
                print(f"{label}: refused, as no hand policy fits either")
            continue
        chosen = result["chosen"]
        if not chosen["fits"]:
            failures.append(f"{label}: the choice does not fit")
        for h in fitting:
            if chosen["step_seconds"] > h["step_seconds"] * (1 + 1e-9):
                failures.append(f"{label}: auto {chosen['step_seconds']} s is slower "
                                f"by the model than {h['policy']} {h['step_seconds']} s")
        # The whole training step with the choice.
        mlir, plan = work / f"{model}.w{world}.mlir", work / f"{model}.w{world}.plan"
        wrap = auto + (f" memory-budget={budget}" if budget else "")
        proc = run([bindir / "fsdp-opt", onnx, f"--batch-size={BATCH}",
                    f"--fsdp-auto-wrap={wrap}", f"--fsdp-autodiff{loss}",
                    f"--fsdp-flatten=world-size={world}",
                    "--fsdp-optimizer=optimizer=adamw max-grad-norm=1", "--fsdp-shard",
                    "--fsdp-schedule", "--fsdp-inference-pipeline", "-o", mlir])
        if proc.returncode != 0:
            failures.append(f"{label}: the chosen wrap does not compile:\n{proc.stderr}")
            continue
        text = mlir.read_text()
        schedule = chosen["schedule"]
        if (schedule["bucket_bytes"] > 0) != ("fsdp.bucket" in text) and \
                schedule["bucket_bytes"] == 0:
            failures.append(f"{label}: buckets in a schedule chosen without them")
        proc = run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan])
        described = run([bindir / "fsdp-run", plan, "--describe", "--json"])
        if proc.returncode != 0 or described.returncode != 0:
            failures.append(f"{label}: no plan: {proc.stderr}{described.stderr}")
            continue
        d = json.loads(described.stdout)
        if d["world_size"] != world:
            failures.append(f"{label}: plan for {d['world_size']} ranks")
        if len(d["units"]) != len(chosen["units"]):
            failures.append(f"{label}: plan has {len(d['units'])} units, the choice "
                            f"{len(chosen['units'])}")
        if budget and d["peak_bytes"] > budget:
            failures.append(f"{label}: planned {d['peak_bytes']} B over the budget")
        print(f"{label}: {len(chosen['units'])} units, modelled "
              f"{chosen['step_seconds'] * 1e3:.4f} ms / {chosen['peak_bytes']} B, "
              f"planned {d['peak_bytes']} B; {len(fitting)} hand policies fit; "
              f"{result['evaluated']} configurations", flush=True)
    return failures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--worlds", nargs="*", type=int, default=[2, 4, 1024])
    args = ap.parse_args(argv)
    bindir = args.build.resolve() / "bin"
    corpus = args.build.resolve() / "test" / "corpus"
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for model in args.only or TRAINING:
            for world in args.worlds:
                failures += check(model, world, bindir, corpus, work)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
