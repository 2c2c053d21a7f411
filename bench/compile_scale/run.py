#!/usr/bin/env python3
"""Compile cost of the whole pipeline against model size: LLaMA-shaped
models (7B, 13B and 70B layer counts and widths) through import, module
tree, auto-wrap, autodiff, flatten, optimizer, shard, schedule, fusion,
lowering, memory plan and plan writing, at world sizes 8 and 1024.

    /usr/bin/python3 bench/compile_scale/run.py [--work-dir DIR] [--sizes tiny 7b 13b 70b]

Models come from bench/import_scale/make_model.py (float32; weights in a
sparse data file that is never written or read). Each compile is

    fsdp-opt MODEL --batch-size=1 --fsdp-train-pipeline="world-size=W
        auto-wrap={policy=regex pattern=^layers\\.[0-9]+$}
        autodiff={loss=cross-entropy} optimizer={optimizer=adamw max-grad-norm=1}"
        -o STEP.mlir
    fsdp-translate --mlir-to-plan STEP.mlir -o STEP.plan

timed with /usr/bin/time (wall seconds, peak RSS), best of --runs. The
table prints each beside the tiny model's (the reference measured in the
same run): time per node should stay flat if the compiler is linear.
"auto s" is fsdp-auto-wrap policy=auto's search at that world size (no
budget): fsdp-opt MODEL --fsdp-auto-wrap="policy=auto world-size=W" less
the same import with policy=none.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIZES = {  # layers, hidden, ffn, heads, vocab
    "tiny": (2, 256, 688, 4, 1000),
    "7b": (32, 4096, 11008, 32, 32000),
    "13b": (40, 5120, 13824, 40, 32000),
    "70b": (80, 8192, 28672, 64, 32000),
}


def timed(cmd, runs):
    best = None
    for _ in range(runs):
        proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", *map(str, cmd)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"failed: {' '.join(map(str, cmd))}\n{proc.stderr[-2000:]}")
        seconds, kib = proc.stderr.strip().splitlines()[-1].split()
        result = (float(seconds), int(kib) * 1024)
        best = result if best is None or result[0] < best[0] else best
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--work-dir", type=Path)
    ap.add_argument("--sizes", nargs="*", default=list(SIZES))
    ap.add_argument("--worlds", nargs="*", type=int, default=[8, 1024])
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    bindir = args.build.resolve() / "bin"
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="fsdp-compile-scale-"))
    rows = []
    for size in args.sizes:
        layers, hidden, ffn, heads, vocab = SIZES[size]
        out = work / size
        info = json.loads(subprocess.run(
            [sys.executable, ROOT / "bench/import_scale/make_model.py", out,
             "--layers", str(layers), "--hidden", str(hidden), "--ffn", str(ffn),
             "--heads", str(heads), "--vocab", str(vocab), "--seq", str(args.seq),
             "--dtype", "float32"], capture_output=True, text=True, check=True)
            .stdout.strip().splitlines()[-1])
        for world in args.worlds:
            mlir, plan = out / f"w{world}.mlir", out / f"w{world}.plan"
            opt = timed([bindir / "fsdp-opt", out / "model.onnx", "--batch-size=1",
                         f"--fsdp-train-pipeline=world-size={world}"
                         " auto-wrap={policy=regex pattern=^layers\\.[0-9]+$}"
                         " autodiff={loss=cross-entropy}"
                         " optimizer={optimizer=adamw max-grad-norm=1}",
                         "-o", mlir], args.runs)
            translate = timed([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan],
                              args.runs)
            # policy=auto's search: import + module tree + search, against
            # import + module tree + policy=none.
            imported = timed([bindir / "fsdp-opt", out / "model.onnx", "--batch-size=1",
                              "--fsdp-auto-wrap=policy=none", "-o", "/dev/null"], args.runs)
            searched = timed([bindir / "fsdp-opt", out / "model.onnx", "--batch-size=1",
                              f"--fsdp-auto-wrap=policy=auto world-size={world}",
                              "-o", "/dev/null"], args.runs)
            described = json.loads(subprocess.run(
                [bindir / "fsdp-run", plan, "--describe", "--json"],
                capture_output=True, text=True, check=True).stdout)
            rows.append(dict(size=size, world=world, nodes=info["nodes"],
                             params=info["param_elements"], opt=opt, translate=translate,
                             kernels=described["kernels"], units=len(described["units"]),
                             per_rank=described["peak_bytes"],
                             search=searched[0] - imported[0], search_rss=searched[1],
                             plan_bytes=plan.stat().st_size))
            print(f"{size:5s} world {world:5d}: fsdp-opt {opt[0]:.2f} s {opt[1] / 2**20:.0f} MiB, "
                  f"fsdp-translate {translate[0]:.2f} s {translate[1] / 2**20:.0f} MiB, "
                  f"policy=auto search {searched[0] - imported[0]:.2f} s "
                  f"({searched[0]:.2f} s with the import, {searched[1] / 2**20:.0f} MiB)",
                  flush=True)
    ref = next((r for r in rows if r["size"] == "tiny"), rows[0])
    print()
    print(f"{'model':6s} {'world':>5s} {'params':>8s} {'nodes':>6s} {'kernels':>7s} "
          f"{'compile s':>9s} {'RSS MiB':>8s} {'plan s':>7s} {'plan MiB':>8s} "
          f"{'us/node':>8s} {'x tiny':>7s} {'plan KiB':>8s} {'GiB/rank':>8s} {'auto s':>7s}")
    for r in rows:
        total = r["opt"][0] + r["translate"][0]
        per_node = total / r["nodes"] * 1e6
        ref_node = (ref["opt"][0] + ref["translate"][0]) / ref["nodes"] * 1e6
        print(f"{r['size']:6s} {r['world']:5d} {r['params'] / 1e9:7.2f}B {r['nodes']:6d} "
              f"{r['kernels']:7d} {r['opt'][0]:9.2f} {r['opt'][1] / 2**20:8.0f} "
              f"{r['translate'][0]:7.2f} {r['translate'][1] / 2**20:8.0f} {per_node:8.0f} "
              f"{per_node / ref_node:7.2f} {r['plan_bytes'] / 1024:8.0f} "
              f"{r['per_rank'] / 2**30:8.2f} {r['search']:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
