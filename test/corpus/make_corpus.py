#!/usr/bin/env python3
"""Writes the ONNX test corpus.

    make_corpus.py OUTDIR [--only NAME ...]

For every model NAME of models.CASES it writes OUTDIR/NAME.onnx (through
fsdp_mlir.export; gpt2_external also OUTDIR/gpt2_external.onnx.data) and
OUTDIR/NAME.modules.json, the reference module table
[{"fqn", "class", "params"}] taken from named_modules(), checks the file
with onnx.checker and onnx.shape_inference, and prints one line per model.

Each model is exported in a fresh subprocess (one export per process).
Run with the project's virtual environment (.venv/bin/python) or with
/usr/bin/python3 and PYTHONPATH=python-frontend; the script also finds the
package in this repository by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FRONTEND = HERE.parents[1] / "python-frontend"


def _file_bytes(out: Path, name: str) -> int:
    total = 0
    for p in (out / f"{name}.onnx", out / f"{name}.onnx.data"):
        if p.exists():
            total += p.stat().st_size
    return total


def worker(name: str, out: Path, exporter: str) -> dict:
    """Exports one model (runs in its own process); returns a summary."""
    sys.path.insert(0, str(FRONTEND))
    sys.path.insert(0, str(HERE))
    import onnx
    import torch

    torch.set_num_threads(2)
    import fsdp_mlir
    import models

    case = models.CASES[name]
    model, inputs = case.build()
    n_params = sum(p.numel() for p in model.parameters())  # distinct tensors
    path = out / f"{name}.onnx"
    start = time.perf_counter()
    fsdp_mlir.export(
        model,
        inputs,
        path,
        loss_fn=case.loss_fn,
        input_names=case.input_names,
        external_data=case.external_data,
        **case.export_kwargs,
        **({} if exporter == "auto" else {"exporter": exporter}),
    )
    seconds = time.perf_counter() - start

    reference = [
        {
            "fqn": fqn,
            "class": type(m).__name__,
            "params": [f"{fqn}.{n}" if fqn else n for n, _ in m.named_parameters(recurse=False)],
        }
        for fqn, m in model.named_modules()
    ]
    (out / f"{name}.modules.json").write_text(json.dumps(reference, indent=1) + "\n")

    onnx.checker.check_model(str(path))
    proto = onnx.load(str(path))  # with its external data
    onnx.shape_inference.infer_shapes(proto, check_type=True)
    meta = json.loads({p.key: p.value for p in proto.metadata_props}["fsdp_mlir"])
    assert [m["fqn"] for m in meta["modules"]] == [r["fqn"] for r in reference], name
    return {
        "name": name,
        "params": n_params,
        "seconds": seconds,
        "bytes": _file_bytes(out, name),
        "nodes": len(proto.graph.node),
        "initializers": len(proto.graph.initializer),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--only", nargs="+", metavar="NAME", help="export only these models")
    ap.add_argument("--exporter", default="auto", choices=("auto", "torchscript", "dynamo"),
                    help="fsdp_mlir.export's exporter (dynamo: torch 2.x)")
    ap.add_argument("--worker", metavar="NAME", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = args.outdir.resolve()
    out.mkdir(parents=True, exist_ok=True)

    if args.worker:
        print("FSDP_CORPUS " + json.dumps(worker(args.worker, out, args.exporter)), flush=True)
        return 0

    sys.path.insert(0, str(HERE))
    import models  # builds nothing; each export runs in its own process

    names = list(models.CASES)
    wanted = args.only or names
    unknown = [n for n in wanted if n not in names]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {names}")

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(FRONTEND)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    failed = []
    for name in wanted:
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), str(out), "--worker", name,
             "--exporter", args.exporter],
            env=env, capture_output=True, text=True,
        )
        wall = time.perf_counter() - start
        summary = None
        for line in proc.stdout.splitlines():
            if line.startswith("FSDP_CORPUS "):
                summary = json.loads(line[len("FSDP_CORPUS "):])
        if proc.returncode != 0 or summary is None:
            failed.append(name)
            print(f"{name}: FAILED (exit {proc.returncode})\n{proc.stderr.strip()}", flush=True)
            continue
        print(
            f"{name:14s} {summary['params']:>10,d} params  export {summary['seconds']:6.2f} s"
            f"  (process {wall:5.1f} s)  {summary['bytes'] / 1024:8.1f} KiB"
            f"  {summary['nodes']:4d} nodes  {summary['initializers']:3d} initializers",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
