#!/usr/bin/env python3
"""The frontend and the compiler under torch 2.x, with torch 2.x as the oracle.

    .venv-torch2/bin/python check_torch2.py BUILD_DIR [--keep DIR] [--only NAME ...]

Run by the interpreter of `.venv-torch2` (scripts/setup.sh installs it from
scripts/requirements-torch2.txt). For each of fsdp_mlir.export's exporters
under torch 2.x, TorchScript's and the torch.export-based one ("dynamo",
which writes opset 18 that export() converts to 17):

  1. exports the corpus models (test/corpus/make_corpus.py --exporter);
  2. compiles each at world size 2 with the transformer policy of its block
     class and requires the units and layouts (fsdp-print-layout) to be the
     ones of the same model exported by Debian's torch 1.13 in the build;
  3. runs check_forward.py (forward equal to torch 2.x's eval()) and
     check_grads.py's corpus cases (gradients equal to torch 2.x's autograd,
     fused attention in the training plans) on that corpus.

Then check_optim.py (three optimizer steps equal to torch 2.x's
torch.optim) once. Exit 1 on any failure; 77 (skipped, naming why) when
the interpreter's torch is not 2.x.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SKIPPED = 77

# Corpus models and the block classes their units are made of (as in
# check_plans.py). vit_b16 and
# gpt2_external (330 MB and a copy of gpt2) are left to the torch 1.13 tests.
BLOCKS = {
    "gpt2": "GPT2Block",
    "llama": "LlamaBlock",
    "bert": "BertLayer",
    "resnet18": "BasicBlock",
    "vit": "EncoderBlock",
    "mixed": "Sequential,MultiheadAttention",
    "derived": "DerivedBlock",
    "frozen_tied": "Sequential",
}
GRAD_CASES = ["gpt2", "llama", "bert", "resnet18", "vit", "mixed", "derived",
              "frozen_tied", "gpt2+checkpoint", "llama+checkpoint", "resnet18+checkpoint"]


def run(cmd, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True)


def layout(build: Path, onnx_path: Path, block: str, work: Path) -> str:
    """fsdp-print-layout of the model's sharded step at world size 2."""
    mlir = work / (onnx_path.stem + ".mlir")
    proc = run([build / "bin" / "fsdp-opt", onnx_path, "--batch-size=2",
                f"--fsdp-sharded-pipeline=world-size=2 auto-wrap={{policy=transformer "
                f"layer-classes={block}}}", "-o", mlir])
    if proc.returncode != 0:
        raise RuntimeError(f"fsdp-opt on {onnx_path} failed:\n{proc.stderr.strip()}")
    proc = run([build / "bin" / "fsdp-opt", mlir, "--fsdp-print-layout", "-o", os.devnull])
    if proc.returncode != 0:
        raise RuntimeError(f"fsdp-print-layout on {mlir} failed:\n{proc.stderr.strip()}")
    return proc.stdout


def check_exporter(exporter: str, build: Path, names: list[str], work: Path) -> list[str]:
    failed = []
    corpus = work / "corpus"
    print(f"== exporter={exporter}: exporting {len(names)} corpus models", flush=True)
    proc = run([sys.executable, ROOT / "test" / "corpus" / "make_corpus.py", corpus,
                "--exporter", exporter, "--only", *names])
    print(proc.stdout.rstrip())
    if proc.returncode != 0:
        print(proc.stderr.rstrip())
        return [f"{exporter}: export"]

    for name in names:
        try:
            old = layout(build, build / "test" / "corpus" / f"{name}.onnx", BLOCKS[name],
                         work / "torch1")
            new = layout(build, corpus / f"{name}.onnx", BLOCKS[name], work / exporter)
        except RuntimeError as e:
            print(f"{name}: FAILED: {e}")
            failed.append(f"{exporter}: {name} layout")
            continue
        units = sum(line.startswith("flat_param") for line in new.splitlines())
        if old != new:
            print(f"{name}: FAILED: units and layouts differ from torch 1.13's export\n"
                  f"--- torch 1.13\n{old}--- torch 2.x ({exporter})\n{new}")
            failed.append(f"{exporter}: {name} layout")
        else:
            print(f"{name}: {units} units, layouts equal to torch 1.13's export")

    env = dict(os.environ, FSDP_CORPUS_DIR=str(corpus))
    grads = [c for c in GRAD_CASES if c.split("+")[0] in names]
    for script, args in (("check_forward.py", ["--only", *names]),
                         ("check_grads.py", ["--only", *grads])):
        print(f"== exporter={exporter}: {script}", flush=True)
        proc = run([sys.executable, HERE / script, build, *args], env=env)
        print(proc.stdout.rstrip())
        if proc.returncode != 0:
            print(proc.stderr.rstrip()[-4000:])
            failed.append(f"{exporter}: {script}")
    return failed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path, help="keep the exports and plans here")
    ap.add_argument("--only", nargs="+", choices=sorted(BLOCKS), metavar="NAME")
    args = ap.parse_args(argv)

    import torch

    major = int(torch.__version__.split(".")[0])
    if major < 2:
        print(f"skipped: {sys.executable} has torch {torch.__version__}, not 2.x; "
              "run this with .venv-torch2/bin/python (scripts/setup.sh makes it)")
        return SKIPPED
    print(f"torch {torch.__version__} ({sys.executable})")
    build = args.build.resolve()
    names = args.only or list(BLOCKS)
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for exporter in ("torchscript", "dynamo"):
            work = root / exporter
            for sub in ("torch1", exporter):
                (work / sub).mkdir(parents=True, exist_ok=True)
            failed += check_exporter(exporter, build, names, work)
    print("== check_optim.py", flush=True)
    proc = run([sys.executable, HERE / "check_optim.py", build])
    print(proc.stdout.rstrip())
    if proc.returncode != 0:
        print(proc.stderr.rstrip()[-4000:])
        failed.append("check_optim.py")
    print("torch 2.x: all checks passed" if not failed
          else f"torch 2.x: FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
