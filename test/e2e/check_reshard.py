#!/usr/bin/env python3
"""FULL_SHARD keeps its memory promise on every corpus model: nothing made
from a unit's gathered parameters lives from the forward to the backward.

    check_reshard.py BUILD_DIR [--only MODEL ...] [--world 4]

Each model's training step (AdamW, clipping) is compiled FULL_SHARD and
SHARD_GRAD_OP at world size W with its transformer-layer units:

    fsdp-opt M.onnx --fsdp-auto-wrap=... strategy=S --fsdp-autodiff
        --fsdp-flatten=world-size=W --fsdp-optimizer=... --fsdp-shard
        [--fsdp-mixed-precision] --fsdp-schedule[=backward-prefetch=post]
        --fsdp-check-reshard
    fsdp-opt STEP.mlir --fsdp-inference --fsdp-lower-pipeline; fsdp-translate;
        fsdp-run --describe

and checked:
- fsdp-check-reshard accepts both (no value computed from a gather alone is
  read by the forward and by the backward), with and without mixed
  precision;
- FULL_SHARD gathers every trainable unit but the root again for its
  backward; SHARD_GRAD_OP gathers every unit once;
- FULL_SHARD's peak bytes per rank (the plan's) are at most
  SHARD_GRAD_OP's, and so is its peak of gathered parameters
  (--fsdp-memory-timeline); that one is below SHARD_GRAD_OP's where the
  backward does not prefetch (backward-prefetch=post) on a model whose
  backward reads two or more units besides the root (a frozen first unit,
  as mixed's backbone, is read by the forward only). (With BACKWARD_PRE, a two-layer model's
  backward holds both layers at once under either strategy, as PyTorch
  does; and a step whose peak is elsewhere, in the root's gradients say,
  has the same peak under both.)

Prints each model's figures. Exit 1 on any failure. Needs no torch.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_plans import BATCH, MODELS as PLAN_MODELS  # noqa: E402

MODELS = {name: wrap for name, wrap in PLAN_MODELS.items() if name != "gpt2_external"}
MODELS["derived"] = ("policy=transformer layer-classes=DerivedBlock", "")
# Models whose step is also compiled with bf16 parameters.
MIXED_PRECISION = ("gpt2", "derived")


def run(cmd) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed: {' '.join(map(str, cmd))}\n{proc.stderr}")
    return proc.stdout


def compile_step(model, strategy, schedule, bindir, corpus, work, world, extra=""):
    """The sharded step (checked by fsdp-check-reshard), its gathers per unit,
    its trainable units and its plan's peak bytes per rank."""
    wrap, loss = MODELS[model]
    tag = f"{model}.{strategy}.{schedule or 'pre'}{'.bf16' if extra else ''}"
    step, lowered, plan = (work / f"{tag}.mlir", work / f"{tag}.low.mlir",
                           work / f"{tag}.plan")
    passes = [f"--fsdp-auto-wrap={wrap} strategy={strategy}{extra}",
              f"--fsdp-autodiff{loss}", f"--fsdp-flatten=world-size={world}",
              "--fsdp-optimizer=optimizer=adamw max-grad-norm=1", "--fsdp-shard"]
    if extra:
        passes.append("--fsdp-mixed-precision")
    passes += ["--fsdp-schedule" + (f"=backward-prefetch={schedule}" if schedule else ""),
               "--fsdp-check-reshard"]
    run([bindir / "fsdp-opt", corpus / f"{model}.onnx", f"--batch-size={BATCH}", *passes,
         "-o", step])
    text = step.read_text()
    shards = dict(re.findall(r'(%\d+) = fsdp\.get_shard @"([^"]*)"', text))
    gathers: dict[str, int] = {}
    for shard in re.findall(r"= fsdp\.all_gather (%\d+) ", text):
        unit = shards.get(shard, "?")
        gathers[unit] = gathers.get(unit, 0) + 1
    trainable = set(re.findall(r'flat_grad_of = @"([^"]*)"', text))
    timeline = run([bindir / "fsdp-opt", step, "--fsdp-inference", "--fsdp-lower-pipeline",
                    "--fsdp-memory-timeline", "-o", lowered])
    # Rows: step, op, gathered, flat grads, reduced, activations, total.
    gathered = max(int(m.group(1)) for m in
                   re.finditer(r"^\s+\d+ .*?(\d+)\s+\d+\s+\d+\s+\d+\s+\d+$", timeline,
                               re.MULTILINE))
    run([bindir / "fsdp-translate", "--mlir-to-plan", lowered, "-o", plan])
    report = json.loads(run([bindir / "fsdp-run", plan, "--describe", "--json"]))
    units = [u["name"] for u in report["units"]]
    return gathers, trainable, units, (report["peak_bytes"], gathered)


def check(model, bindir, corpus, work, world) -> list[str]:
    problems = []
    peaks = {}
    for schedule in (None, "post"):
        for strategy in ("FULL_SHARD", "SHARD_GRAD_OP"):
            gathers, trainable, units, peak = compile_step(
                model, strategy, schedule, bindir, corpus, work, world)
            peaks[strategy, schedule] = peak
            if schedule:
                continue
            for unit in units:
                n = gathers.get(unit, 0)
                root = unit == "unit:"
                if strategy == "SHARD_GRAD_OP" and n != 1:
                    problems.append(f"SHARD_GRAD_OP gathers {unit} {n} times")
                if (strategy == "FULL_SHARD" and not root and unit in trainable
                        and n < 2):
                    problems.append(f"FULL_SHARD gathers {unit} {n} time(s): not again "
                                    "for the backward")
            if strategy == "FULL_SHARD":
                regathered = sum(1 for u in units if u != "unit:" and gathers.get(u, 0) >= 2)
                non_root = sum(1 for u in units if u != "unit:")
    for schedule in (None, "post"):
        (full, full_params), (grad_op, grad_op_params) = (
            peaks["FULL_SHARD", schedule], peaks["SHARD_GRAD_OP", schedule])
        at = f" (backward-prefetch={schedule})" if schedule else ""
        if full > grad_op:
            problems.append(f"FULL_SHARD's peak {full:,} B > SHARD_GRAD_OP's {grad_op:,} B{at}")
        if full_params > grad_op_params or (
                schedule and regathered >= 2 and full_params >= grad_op_params):
            problems.append(f"FULL_SHARD's peak of gathered parameters {full_params:,} B is "
                            f"not below SHARD_GRAD_OP's {grad_op_params:,} B{at}")
    (full, full_params), (grad_op, grad_op_params) = (
        peaks["FULL_SHARD", None], peaks["SHARD_GRAD_OP", None])
    (full_post, full_post_params), (grad_op_post, grad_op_post_params) = (
        peaks["FULL_SHARD", "post"], peaks["SHARD_GRAD_OP", "post"])
    if model in MIXED_PRECISION:
        compile_step(model, "FULL_SHARD", None, bindir, corpus, work, world,
                     extra=" param-dtype=bf16")
    print(f"  {non_root} units besides the root, {regathered} gathered again for the "
          f"backward; peak per rank FULL_SHARD {full:,} B, SHARD_GRAD_OP {grad_op:,} B "
          f"({full / grad_op:.2f}x), gathered parameters {full_params:,} B vs "
          f"{grad_op_params:,} B; backward-prefetch=post {full_post:,} B vs "
          f"{grad_op_post:,} B ({full_post / grad_op_post:.2f}x), gathered "
          f"{full_post_params:,} B vs {grad_op_post_params:,} B"
          + (f"; bf16 step checked" if model in MIXED_PRECISION else ""))
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--world", type=int, default=4)
    args = ap.parse_args(argv)
    bindir = args.build.resolve() / "bin"
    corpus = args.build.resolve() / "test" / "corpus"
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.only or list(MODELS):
            print(f"{model}:", flush=True)
            try:
                problems = check(model, bindir, corpus, Path(tmp), args.world)
            except Exception as e:  # noqa: BLE001
                problems = [f"FAILED: {e}"]
            for p in problems:
                print(f"  {p}")
            if problems:
                failed.append(model)
    total = len(args.only or MODELS)
    print(f"{total - len(failed)} passed, {len(failed)} failed"
          + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
