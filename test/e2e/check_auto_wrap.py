#!/usr/bin/env python3
"""fsdp-auto-wrap policy=auto on the corpus: its promises, checked.

    check_auto_wrap.py BUILD_DIR [--keep DIR] [--only MODEL ...] [--worlds 2 4 1024]

For every corpus model that trains (check_plans.py's list) at each world
size, policy=auto is asked (--fsdp-explain-policy=format=json) without a
budget, then at budgets taken from the hand policies' modelled peaks
(between the largest and smallest, just above the smallest, and below
every one of them; a configuration fits when its modelled peak plus the
memory-reserve, 10% and at least 16 KiB, is within the budget). GPT-2 and LLaMA are also asked
on 2 x 2 and 2 x 8 meshes (a group per node), where HYBRID_SHARD is a
candidate, and compiled with fsdp-flatten's mesh-shape. At each budget:

  - by the model, the choice is never slower than a hand policy that fits
    the budget (the hand policies: no wrapping, transformer layers,
    size-based at powers of ten, FULL_SHARD), and it fits whenever one of
    them does; when nothing fits the refusal names the smallest peak;
  - the choice, compiled through the whole training step (AdamW with
    clipping, fsdp-shard, fsdp-schedule with the chosen settings, memory
    plan) and read back by the runtime's plan reader, has the chosen world
    size and units, and its planned peak per rank is within the budget
    (fsdp-plan-memory refuses a plan over it, so this is checked twice);
  - the first choice on a mesh that mixes strategies (HYBRID_SHARD beside
    FULL_SHARD, ...) runs 3 AdamW steps on the mesh's ranks under mpirun
    with the losses of the same step wrapped as one unit;
  - the chosen schedule settings are in the scheduled program (bucket
    ids only when buckets were chosen).

Exit 1 on any failure. Needs no torch; Open MPI for the mixed run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_plans import BATCH, MODELS  # noqa: E402

TRAINING = ["gpt2", "llama", "resnet18", "bert", "mixed", "frozen_tied"]
MESHES = [(2, 2), (2, 8)]  # (groups, ranks per group = ranks per node)
def reserved(peak: int) -> int:
    """The modelled peak with fsdp-auto-wrap's default memory-reserve: 10%,
    at least 16 KiB."""
    return peak + max(16 << 10, int(peak * 0.1))


def run(cmd) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True)


def check(model: str, world: int, bindir: Path, corpus: Path, work: Path,
          mesh: tuple[int, int] | None = None) -> list[str]:
    failures = []
    _, loss = MODELS[model]
    onnx = corpus / f"{model}.onnx"
    shape = f"mesh-shape={mesh[0]},{mesh[1]}" if mesh else f"world-size={world}"
    auto = f"policy=auto {shape} clipping=true" + (
        f" ranks-per-node={mesh[1]}" if mesh else "")

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
    budgets = [None, reserved((peaks[0] + peaks[-1]) // 2), reserved(peaks[0]) + 64,
               peaks[0] // 2]
    for budget in dict.fromkeys(budgets):
        label = f"{model} {'mesh %dx%d' % mesh if mesh else f'w{world}'} budget {budget or 'none'}"
        fitting = [h for h in hand
                   if budget is None or reserved(h["peak_bytes"]) <= budget]
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
        # The pipeline states the ranks and derives clipping and AdamW's two
        # states from the optimizer, as `auto` spells them for the search.
        wrap = "policy=auto" + (f" ranks-per-node={mesh[1]}" if mesh else "") + (
            f" memory-budget={budget}" if budget else "")
        proc = run([bindir / "fsdp-opt", onnx, f"--batch-size={BATCH}",
                    f"--fsdp-train-pipeline={shape} auto-wrap={{{wrap}}}"
                    f" autodiff={{{loss.removeprefix('=')}}}"
                    " optimizer={optimizer=adamw max-grad-norm=1}", "-o", mlir])
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
        if d["world_size"] != world or (mesh and d["mesh"] != list(mesh)):
            failures.append(f"{label}: plan for {d['world_size']} ranks, mesh {d['mesh']}")
        if len(d["units"]) != len(chosen["units"]):
            failures.append(f"{label}: plan has {len(d['units'])} units, the choice "
                            f"{len(chosen['units'])}")
        if budget and d["peak_bytes"] > budget:
            failures.append(f"{label}: planned {d['peak_bytes']} B over the budget")
        strategies = sorted({u["strategy"] for u in chosen["units"]})
        if mesh and len(strategies) > 1 and not ran_mixed:
            failures += train_like_one_unit(label, bindir, onnx, plan, world, mesh,
                                            loss, work)
            ran_mixed.append(label)
        print(f"{label}: {len(chosen['units'])} units ({', '.join(strategies)}), modelled "
              f"{chosen['step_seconds'] * 1e3:.4f} ms / {chosen['peak_bytes']} B, "
              f"planned {d['peak_bytes']} B; {len(fitting)} hand policies fit; "
              f"{result['evaluated']} configurations", flush=True)
    return failures


ran_mixed: list[str] = []


def train_like_one_unit(label, bindir, onnx, plan, world, mesh, loss, work) -> list[str]:
    """Runs a plan whose units mix strategies on `world` MPI ranks and
    compares its losses with the same step wrapped as one FULL_SHARD unit
    (which e2e.distributed-vs-torch holds equal to torch)."""
    import numpy as np
    rng = np.random.default_rng(0)
    ids = work / "mixed.ids.npy"
    np.save(ids, rng.integers(0, 64, (world * BATCH, 16)))
    reference = work / "mixed.reference.plan"
    mlir = work / "mixed.reference.mlir"
    subprocess.run([str(bindir / "fsdp-opt"), str(onnx), f"--batch-size={BATCH}",
                    f"--fsdp-train-pipeline=mesh-shape={mesh[0]},{mesh[1]}"
                    f" auto-wrap={{policy=none}} autodiff={{{loss.removeprefix('=')}}}"
                    " optimizer={optimizer=adamw max-grad-norm=1}", "-o", str(mlir)],
                   check=True, capture_output=True)
    subprocess.run([str(bindir / "fsdp-translate"), "--mlir-to-plan", str(mlir), "-o",
                    str(reference)], check=True, capture_output=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,vader", OMPI_MCA_rmaps_base_oversubscribe="1")
    losses = []
    for p in (plan, reference):
        proc = subprocess.run(["mpirun", "-np", str(world), "--oversubscribe",
                               str(bindir / "fsdp-run"), str(p), "--threads", "1",
                               "--steps", "3", "--lr", "1e-3", "--json", "--timeout", "120",
                               "--input", f"input_ids={ids}", "--input", f"labels={ids}"],
                              capture_output=True, text=True, env=env, timeout=600)
        if proc.returncode != 0:
            return [f"{label}: the plan does not run on {world} ranks:\n{proc.stderr[-2000:]}"]
        losses.append(json.loads(proc.stdout)["losses"])
    print(f"{label}: mixed strategies on {world} ranks, losses {losses[0]} vs one "
          f"FULL_SHARD unit {losses[1]}")
    if not np.allclose(losses[0], losses[1], rtol=1e-4, atol=1e-5):
        return [f"{label}: losses {losses[0]} differ from one unit's {losses[1]}"]
    return []


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
        # Hybrid sharding: a node of R ranks per group, HYBRID_SHARD among
        # the strategies.
        for model in [m for m in ("gpt2", "llama") if m in (args.only or TRAINING)]:
            for mesh in MESHES:
                failures += check(model, mesh[0] * mesh[1], bindir, corpus, work, mesh)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
