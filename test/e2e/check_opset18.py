#!/usr/bin/env python3
"""Models at opset 18 and later, as torch 2.x's torch.export-based exporter
writes them when a user calls torch.onnx.export(dynamo=True) directly.

    .venv-torch2/bin/python check_opset18.py BUILD_DIR

  1. the corpus GPT-2 and LLaMA, exported by torch.onnx.export(dynamo=True,
     opset_version=18): fsdp_mlir.compile converts each to opset 17 beside
     the plan (saying so on stderr) and the plan's forward equals torch's
     within 1e-5 of the largest logit;
  2. fsdp-opt refuses the opset-18 file, naming the command that converts
     it; `python -m fsdp_mlir.opset` converts it, and fsdp-opt imports the
     result;
     a file the converter did not write is never overwritten, its own
     output is;
  3. an interpreter whose onnx does not know opset 18 (Debian's onnx 1.12
     under /usr/bin/python3, when it has one) refuses to convert, saying so.

Exit 1 on any failure; 77 (skipped, naming why) without torch 2.x.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "test" / "corpus"))
sys.path.insert(0, str(ROOT / "python-frontend"))
SKIPPED = 77


def main() -> int:
    import numpy as np
    import torch

    if int(torch.__version__.split(".")[0]) < 2:
        print(f"skipped: torch {torch.__version__} has no torch.export-based exporter")
        return SKIPPED
    build = Path(sys.argv[1]).resolve()
    os.environ.setdefault("FSDP_MLIR_TOOLS_DIR", str(build / "bin"))
    import fsdp_mlir
    import models
    import onnx

    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in ("gpt2", "llama"):
            model = models.CASES[name].build()[0].eval()
            ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(4))
            path = work / f"{name}.onnx"
            torch.onnx.export(model, (ids,), str(path), dynamo=True, opset_version=18,
                              input_names=["input_ids"])
            written = [o.version for o in onnx.load(str(path), load_external_data=False)
                       .opset_import if o.domain in ("", "ai.onnx")]
            if written != [18]:
                failed.append(f"{name}: exported at opset {written}, not 18")
                continue
            plan = fsdp_mlir.compile(path, batch_size=2)
            with fsdp_mlir.Session(plan) as session:
                got = next(iter(session.forward({"input_ids": ids.numpy()}).values()))
            with torch.no_grad():
                want = model(ids).numpy()
            worst = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
            ok = worst <= 1e-5
            print(f"{name}: opset 18 -> 17, forward max |diff| / max |logit| {worst:.1e} "
                  f"{'ok' if ok else 'MISMATCH'}")
            if not ok:
                failed.append(f"{name}: forward")

        path = work / "gpt2.onnx"
        opt = [str(build / "bin" / "fsdp-opt"), "--batch-size=2", "-o", os.devnull]
        proc = subprocess.run(opt[:1] + [str(path)] + opt[1:], capture_output=True, text=True)
        if proc.returncode == 0 or "python -m fsdp_mlir.opset" not in proc.stderr:
            failed.append(f"fsdp-opt on opset 18: exit {proc.returncode}, {proc.stderr!r}")
        else:
            print("fsdp-opt refuses opset 18 naming `python -m fsdp_mlir.opset`")
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python-frontend"))
        converted = work / "gpt2.opset17.onnx"
        proc = subprocess.run([sys.executable, "-m", "fsdp_mlir.opset", str(path),
                               str(converted)], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            failed.append(f"python -m fsdp_mlir.opset: {proc.stderr}")
        else:
            proc = subprocess.run(opt[:1] + [str(converted)] + opt[1:], capture_output=True,
                                  text=True)
            if proc.returncode != 0:
                failed.append(f"fsdp-opt on the converted model: {proc.stderr}")
            else:
                print("python -m fsdp_mlir.opset converts it; fsdp-opt imports the result")

        # A file the converter did not write is never replaced; its own
        # output is (compile() converts again on every call).
        foreign = work / "foreign.onnx"
        foreign.write_text("a user's file")
        proc = subprocess.run([sys.executable, "-m", "fsdp_mlir.opset", str(path),
                               str(foreign)], capture_output=True, text=True, env=env)
        if (proc.returncode != 1 or "refusing to overwrite" not in proc.stderr
                or foreign.read_text() != "a user's file"):
            failed.append(f"a foreign output file: exit {proc.returncode}, {proc.stderr!r}")
        else:
            print(f"a foreign output is refused: {proc.stderr.strip()}")
        proc = subprocess.run([sys.executable, "-m", "fsdp_mlir.opset", str(path),
                               str(converted)], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            failed.append(f"converting again onto its own output: {proc.stderr}")

        old = Path("/usr/bin/python3")
        check = subprocess.run([str(old), "-c", "import onnx, sys; "
                                "sys.exit(onnx.defs.onnx_opset_version() >= 18)"],
                               capture_output=True) if old.exists() else None
        if check is None or check.returncode != 0:
            print(f"skipped part 3: no {old} with an onnx that lacks opset 18")
        else:
            proc = subprocess.run([str(old), "-m", "fsdp_mlir.opset", str(path),
                                   str(work / "old.onnx")], capture_output=True, text=True,
                                  env=env)
            if proc.returncode != 1 or "does not know" not in proc.stderr:
                failed.append(f"onnx without opset 18: exit {proc.returncode}, "
                              f"{proc.stderr!r}")
            else:
                print(f"onnx without opset 18 refuses: {proc.stderr.strip()}")
    for line in failed:
        print(f"FAILED: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
