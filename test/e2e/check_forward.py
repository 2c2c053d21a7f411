#!/usr/bin/env python3
"""Forward equality with PyTorch: every corpus model, compiled and run.

    check_forward.py BUILD_DIR [--only NAME ...] [--batch-size N] [--keep DIR]

For each model of test/corpus/models.py this
  1. rebuilds the torch module and loads the exported weights into it (from
     the ONNX file itself, by the FQNs in its fsdp_mlir metadata), so torch
     and the runtime read the same bytes;
  2. compiles the corpus's ONNX file with fsdp-opt (--fsdp-inference,
     --fsdp-fuse, --fsdp-lower-to-runtime, --fsdp-plan-memory) and
     fsdp-translate --mlir-to-plan, at a batch size other than the export's;
  3. runs the plan with fsdp-run on fresh random inputs (.npy);
  4. compares every output with torch's eval()-mode forward on the same
     inputs: |ours - torch| <= atol + rtol * |torch| elementwise.

Models exported with a loss (gpt2, llama, resnet18) output only the scalar
loss, so each small model is also exported again here without the loss and
with its BatchNorm running statistics moved away from (0, 1) by a few
training-mode forwards: that variant compares the logits themselves, and
the BatchNorm kernels on statistics that matter.

Tolerances are fp32's: atol 1e-5, rtol 1e-4 (the full-size ViT-B/16, 12
layers of width 768, uses atol 1e-4: its logits are sums of thousands of
products in another order than torch's). Exit 1 on any mismatch or failure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "test" / "corpus"))
sys.path.insert(0, str(ROOT / "python-frontend"))

ATOL, RTOL = 1e-5, 1e-4
ATOL_BY_MODEL = {"vit_b16": 1e-4}
# Exported again without loss / with warmed-up BatchNorm (small models only).
VARIANTS = ["gpt2", "llama", "resnet18", "mixed", "frozen_tied"]
SKIP_CORPUS = {"gpt2_external"}  # the same graph as gpt2; checked by import


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"command failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"{proc.stderr.strip()}")
    return proc


def load_onnx_weights(model, path: Path) -> None:
    """Copies the ONNX file's parameters and buffers into `model` by FQN."""
    import onnx
    import torch
    from onnx import numpy_helper

    proto = onnx.load(str(path))
    meta = json.loads({p.key: p.value for p in proto.metadata_props}["fsdp_mlir"])
    arrays = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    state = model.state_dict()
    loaded = 0
    for entry in meta["params"] + meta["buffers"]:
        name = entry.get("initializer")
        if name is None or entry["fqn"] not in state:
            continue
        value = torch.from_numpy(np.array(arrays[name]))
        for fqn in [entry["fqn"]] + entry.get("aliases", []):
            if fqn in state:
                state[fqn] = value.reshape(state[fqn].shape).to(state[fqn].dtype)
        loaded += 1
    if loaded == 0:
        raise RuntimeError(f"{path}: no weights found in the metadata")
    model.load_state_dict(state, strict=True)


def fresh_inputs(examples, batch: int, seed: int):
    """Random inputs like `examples` with batch size `batch`."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for x in examples:
        shape = (batch,) + tuple(x.shape[1:])
        if x.dtype.is_floating_point:
            out.append(torch.randn(shape, generator=g, dtype=x.dtype))
        else:
            high = int(x.max()) + 1
            out.append(torch.randint(0, max(high, 1), shape, generator=g, dtype=x.dtype))
    return out


def torch_outputs(case, model, inputs, with_loss: bool):
    import torch

    model.eval()
    with torch.no_grad():
        if with_loss:
            return [case.loss_fn(model(*inputs[:-1]), inputs[-1])]
        out = model(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def compile_and_run(bindir: Path, onnx_path: Path, batch: int, names, inputs,
                    work: Path) -> dict:
    mlir, plan, outdir = work / "model.mlir", work / "model.plan", work / "out"
    run([str(bindir / "fsdp-opt"), str(onnx_path), f"--batch-size={batch}",
         "--fsdp-inference", "--fsdp-fuse", "--fsdp-lower-to-runtime",
         "--fsdp-plan-memory", "--mlir-print-debuginfo", "-o", str(mlir)])
    run([str(bindir / "fsdp-translate"), "--mlir-to-plan", str(mlir), "-o", str(plan)])
    cmd = [str(bindir / "fsdp-run"), str(plan), "--output-dir", str(outdir), "--json"]
    for name, value in zip(names, inputs):
        path = work / f"{name}.npy"
        np.save(path, value.numpy())
        cmd += ["--input", f"{name}={path}"]
    report = json.loads(run(cmd).stdout)
    report["arrays"] = {o["name"]: np.load(outdir / f"{o['name']}.npy")
                        for o in report["outputs"]}
    return report


def compare(label: str, ours: dict, expected, atol: float) -> bool:
    ok = True
    if len(ours) != len(expected):
        print(f"  {label}: {len(ours)} outputs, torch has {len(expected)}")
        return False
    for (name, got), want in zip(ours.items(), expected):
        want = want.detach().numpy()
        if got.shape != want.shape:
            print(f"  {label}: output {name} has shape {got.shape}, torch {want.shape}")
            ok = False
            continue
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        bound = atol + RTOL * np.abs(want.astype(np.float64))
        worst = float(np.max(err - bound)) if err.size else 0.0
        good = bool(np.all(err <= bound))
        print(f"  {label}: {name} {list(got.shape)} max |diff| "
              f"{float(err.max()) if err.size else 0.0:.3g} "
              f"{'ok' if good else f'MISMATCH (exceeds bound by {worst:.3g})'}")
        ok &= good
    return ok


def corpus_file(build: Path, name: str) -> Path:
    """The corpus model `name`: as the build exported it (Debian's torch), or
    from $FSDP_CORPUS_DIR (the torch2 tests export their own)."""
    root = os.environ.get("FSDP_CORPUS_DIR")
    return (Path(root) if root else build / "test" / "corpus") / f"{name}.onnx"


def check_model(name: str, build: Path, batch: int, work: Path) -> bool:
    import models
    import torch

    torch.manual_seed(0)
    case = models.CASES[name]
    bindir = build / "bin"
    onnx_path = corpus_file(build, name)
    atol = ATOL_BY_MODEL.get(name, ATOL)
    ok = True

    model, examples = case.build()
    load_onnx_weights(model, onnx_path)
    inputs = fresh_inputs(examples, batch if name != "vit_b16" else 1, seed=7)
    names = case.input_names or [f"input_{i}" for i in range(len(inputs))]
    start = time.perf_counter()
    report = compile_and_run(bindir, onnx_path, inputs[0].shape[0], names, inputs,
                             work / "corpus")
    expected = torch_outputs(case, model, inputs, with_loss=case.loss_fn is not None)
    ok &= compare("corpus", report["arrays"], expected, atol)
    print(f"  corpus: run {report['run_seconds_mean'] * 1e3:.2f} ms, activations "
          f"{report['memory']['activation_bytes']} B, compile+run "
          f"{time.perf_counter() - start:.1f} s")

    if name in VARIANTS:
        import fsdp_mlir

        model, examples = case.build()
        model.train()
        with torch.no_grad():  # move BatchNorm statistics away from (0, 1)
            for seed in range(3):
                warm = fresh_inputs(examples, 4, seed=100 + seed)
                model(*(warm[:-1] if case.loss_fn else warm))
        plain = examples[:-1] if case.loss_fn else examples
        variant = work / "variant.onnx"
        given = case.input_names[: len(plain)] if case.input_names else None
        fsdp_mlir.export(model, tuple(plain), variant, input_names=given)
        inputs = fresh_inputs(plain, batch, seed=11)
        vnames = given or [f"input_{i}" for i in range(len(plain))]
        report = compile_and_run(bindir, variant, batch, vnames, inputs, work / "variant")
        expected = torch_outputs(case, model, inputs, with_loss=False)
        ok &= compare("logits", report["arrays"], expected, atol)
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path, help="the build directory")
    ap.add_argument("--only", nargs="+", metavar="NAME")
    ap.add_argument("--batch-size", type=int, default=3,
                    help="batch to compile for (the corpus was exported at 2)")
    ap.add_argument("--keep", type=Path, help="keep the work files here")
    args = ap.parse_args(argv)

    import models
    import torch

    torch.set_num_threads(2)
    names = args.only or [n for n in models.CASES if n not in SKIP_CORPUS]
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for name in names:
            print(f"{name}:", flush=True)
            work = root / name
            for sub in ("corpus", "variant"):
                (work / sub).mkdir(parents=True, exist_ok=True)
            try:
                if not check_model(name, args.build.resolve(), args.batch_size, work):
                    failed.append(name)
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"  FAILED: {e}")
                failed.append(name)
    print(f"{len(names) - len(failed)}/{len(names)} models equal to torch"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
