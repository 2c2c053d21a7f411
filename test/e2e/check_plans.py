#!/usr/bin/env python3
"""Every corpus model's sharded training step, compiled to a plan at world
sizes 2, 4 and 1024 and read back by the runtime's plan reader.

    check_plans.py BUILD_DIR [--keep DIR] [--only MODEL ...] [--worlds 2 4 1024]

Each model is wrapped (its transformer-layer class, else by size), trained
with AdamW and global-norm clipping, flattened for the world size, sharded
(FULL_SHARD), scheduled and lowered:

    fsdp-opt M.onnx --fsdp-train-pipeline="world-size=W auto-wrap={...}
        [autodiff={loss=cross-entropy}] optimizer={...}"
    fsdp-translate --mlir-to-plan;  fsdp-run PLAN --describe --json

The plan reader (fsdprt_plan_load_file) verifies it (schema, layouts
re-derived per unit, collectives' groups and sizes, stream dependencies);
this script then checks what it reports against the compile: the world
size and mesh, one unit per flat parameter with padded = group x shard,
a gather per unit at least, a
reduce-scatter per trainable unit, and the bytes per rank. Exit 1 on any
failure. Needs no torch.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# model: (auto-wrap options, fsdp-autodiff options for models without a loss)
MODELS = {
    "gpt2": ("policy=transformer layer-classes=GPT2Block", ""),
    "gpt2_external": ("policy=transformer layer-classes=GPT2Block", ""),
    "llama": ("policy=transformer layer-classes=LlamaBlock", ""),
    "bert": ("policy=transformer layer-classes=BertLayer",
             "=loss=cross-entropy logits=output_1"),
    "resnet18": ("policy=transformer layer-classes=BasicBlock", ""),
    "vit": ("policy=transformer layer-classes=EncoderBlock",
            "=loss=cross-entropy"),
    "vit_b16": ("policy=transformer layer-classes=EncoderBlock",
                "=loss=cross-entropy"),
    "mixed": ("policy=transformer layer-classes=Sequential,MultiheadAttention",
              "=loss=cross-entropy"),
    "frozen_tied": ("policy=transformer layer-classes=Sequential", "=loss=cross-entropy"),
}
BATCH = 2


def train_pipeline(wrap: str, autodiff: str, world: int, optimizer: str) -> str:
    """fsdp-opt's flag for the training step (fsdp-autodiff's options as
    MODELS spells them, "=loss=..." or "")."""
    return (f"--fsdp-train-pipeline=world-size={world} auto-wrap={{{wrap}}}"
            f" autodiff={{{autodiff.removeprefix('=')}}} optimizer={{{optimizer}}}")


def run(cmd) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed: {' '.join(map(str, cmd))}\n{proc.stderr}")
    return proc.stdout


def check(model: str, world: int, bindir: Path, corpus: Path, work: Path) -> bool:
    wrap, loss = MODELS[model]
    mlir, plan = work / f"{model}.w{world}.mlir", work / f"{model}.w{world}.plan"
    start = time.monotonic()
    run([bindir / "fsdp-opt", corpus / f"{model}.onnx", f"--batch-size={BATCH}",
         train_pipeline(wrap, loss, world, "optimizer=adamw max-grad-norm=1"), "-o", mlir])
    run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan])
    seconds = time.monotonic() - start
    report = json.loads(run([bindir / "fsdp-run", plan, "--describe", "--json"]))

    text = mlir.read_text()
    flat = re.findall(r"fsdp\.flat_param @\"([^\"]*)\" .*: tensor<(\d+)x", text)
    problems = []
    if report["world_size"] != world or report["mesh"] != [world]:
        problems.append(f"world {report['world_size']} mesh {report['mesh']}")
    units = {u["name"]: u for u in report["units"]}
    if sorted(units) != sorted(name for name, _ in flat):
        problems.append(f"units {sorted(units)} vs flat params {[n for n, _ in flat]}")
    for name, numel in flat:
        u = units.get(name)
        if not u:
            continue
        if (u["padded_numel"] != int(numel) or u["group_size"] != world
                or u["shard_numel"] * world != u["padded_numel"]):
            problems.append(f"unit {name}: {u}")
    gathers = report["collectives"].get("all_gather", 0)
    scatters = report["collectives"].get("reduce_scatter", 0)
    if gathers < len(units):
        problems.append(f"{gathers} gathers for {len(units)} units")
    trainable = len(re.findall(r"fsdp\.flat_grad_of|flat_grad_of = @", text)) > 0
    if trainable and scatters == 0:
        problems.append("no reduce-scatter")
    if report["peak_bytes"] <= 0:
        problems.append("no bytes per rank")
    print(f"  world {world:5d}: {len(units)} units, {report['kernels']} kernels "
          f"({gathers} all_gather, {scatters} reduce_scatter, "
          f"{report['collectives'].get('all_reduce', 0)} all_reduce), "
          f"{report['dependencies']} dependencies, {report['peak_bytes']:,} B per rank, "
          f"compiled in {seconds:.2f} s" + ("" if not problems else f"  PROBLEMS: {problems}"))
    return not problems


def deterministic(bindir: Path, corpus: Path, work: Path) -> bool:
    """The same compile twice, from two directories with the same file
    names: byte-identical IR and plans (no pointer-order iteration)."""
    outputs = []
    for name in ("first", "second"):
        cwd = work / name
        cwd.mkdir(parents=True, exist_ok=True)
        wrap, loss = MODELS["gpt2"]
        for cmd in ([bindir / "fsdp-opt", corpus / "gpt2.onnx", f"--batch-size={BATCH}",
                     train_pipeline(wrap, loss, 4, "optimizer=adamw"), "-o", "step.mlir"],
                    [bindir / "fsdp-translate", "--mlir-to-plan", "step.mlir", "-o",
                     "step.plan"]):
            proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True,
                                  text=True)
            if proc.returncode != 0:
                print(f"  determinism: {proc.stderr}")
                return False
        outputs.append(((cwd / "step.mlir").read_bytes(), (cwd / "step.plan").read_bytes()))
    same = outputs[0] == outputs[1]
    print(f"determinism: two compiles of gpt2 @4 give byte-identical IR and plans: "
          f"{'yes' if same else 'NO'}")
    return same


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--worlds", nargs="*", type=int, default=[2, 4, 1024])
    args = ap.parse_args(argv)
    bindir = args.build.resolve() / "bin"
    corpus = args.build.resolve() / "test" / "corpus"
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for model in args.only or list(MODELS):
            print(f"{model}:", flush=True)
            for world in args.worlds:
                try:
                    if not check(model, world, bindir, corpus, work):
                        failed.append(f"{model}@{world}")
                except Exception as e:  # noqa: BLE001
                    print(f"  world {world}: FAILED: {e}")
                    failed.append(f"{model}@{world}")
        if not args.only and not deterministic(bindir, corpus, work / "determinism"):
            failed.append("determinism")
    total = len(args.only or MODELS) * len(args.worlds)
    print(f"{total - len(failed)}/{total} plans written and read back"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
