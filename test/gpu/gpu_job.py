#!/usr/bin/env python3
"""The training job gpu-check runs on a lent GPU, and what it must give.

    gpu_job.py make BUILD_DIR JOB_DIR     here (Debian's torch 1.13): writes
        the job: the corpus GPT-2, LLaMA and ViT compiled into AdamW training
        steps at world size 1 (fp32, and bf16 mixed precision), a batch,
        and expected.json with each plan's 3 losses on the CPU backend and,
        for fp32, in torch (AdamW on the same weights and batch).
    gpu_job.py compare JOB_DIR FSDP_RUN   on the GPU machine (any Python 3,
        no packages): runs each plan with --device cuda and compares its
        losses with the CPU's and torch's (the bf16 plans also with
        FSDPRT_CUDNN=off: attention on the backend's own kernel instead of
        cuDNN's); prints one line per plan and exits 1 on a mismatch.

The plans name their weights by file: a copy of each corpus ONNX file
(the models are small) goes in JOB_DIR/weights, which every run names as
its --model-dir; nothing else is needed there. Tolerances: fp32 kernels
and cuBLASLt sum in another order than the CPU (1e-4 relative over 3
steps); bf16 plans round every activation (1e-2 relative, a few bf16
ulps).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

STEPS = 3
LR = 0.01
# The ViT: its patch convolution and weight gradient run on the backend's
# own convolutions (im2col and cuBLASLt) on the GPU.
MODELS = {"gpt2": "GPT2Block", "llama": "LlamaBlock", "vit": "EncoderBlock"}
RTOL = {"fp32": 1e-4, "bf16": 1e-2}


def losses(out: str) -> list[float]:
    return [float(line.split()[3]) for line in out.splitlines()
            if line.startswith("step ") and " loss " in line]


def make(build: Path, job: Path) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
    import copy

    import numpy as np
    import torch

    import check_grads
    import check_optim

    check_grads.ROOT_BUILD = build
    bindir = build / "bin"
    job.mkdir(parents=True, exist_ok=True)
    expected = {}
    for model_name, block in MODELS.items():
        model, inputs, labels, loss_fn, onnx_path, names, label_name, autodiff = \
            check_grads.prepare(model_name, job, 4)  # 12 samples: 1, 2 and 4 ranks divide it
        # The plans name their weights by file (the corpus ONNX file, whose
        # folder the plan records): a copy travels with the job, found
        # through --model-dir wherever the job is unpacked.
        (job / "weights").mkdir(exist_ok=True)
        shutil.copyfile(onnx_path, job / "weights" / Path(onnx_path).name)
        flags = ["--model-dir", "weights"]
        for name, value in zip(names + [label_name], inputs + [labels]):
            np.save(job / f"{model_name}.{name}.npy", value.numpy())
            flags += ["--input", f"{name}={model_name}.{name}.npy"]
        torch_losses, _ = check_optim.torch_steps(
            copy.deepcopy(model), inputs, labels, loss_fn,
            lambda p, lr: torch.optim.AdamW(p, lr), LR, 0, 1)
        for precision, ranks in (("fp32", 1), ("bf16", 1), ("fp32", 2), ("fp32", 4)):
            tag = f"{model_name}-{precision}" + (f"-{ranks}ranks" if ranks > 1 else "")
            wrap = f"policy=transformer layer-classes={block}"
            mixed = ""
            if precision == "bf16":
                wrap += " param-dtype=bf16 reduce-dtype=f32"
                mixed = " mixed-precision=true"
            mlir = job / f"{tag}.mlir"
            check_grads.run([bindir / "fsdp-opt", onnx_path,
                             f"--batch-size={inputs[0].shape[0] // ranks}",
                             f"--fsdp-train-pipeline=world-size={ranks} auto-wrap={{{wrap}}}"
                             f" optimizer={{optimizer=adamw}}"
                             f" autodiff={{{autodiff.removeprefix('=')}}}{mixed}", "-o", mlir])
            check_grads.run([bindir / "fsdp-translate", "--mlir-to-plan", mlir,
                             "-o", job / f"{tag}.plan"])
            mlir.unlink()
            # Several ranks: one process, a local group (on the GPU machine,
            # every rank on its one GPU); the CPU's the same way, which
            # equals mpirun (e2e.local-ranks).
            local = ["--local-ranks", str(ranks)] if ranks > 1 else []
            cpu = losses(subprocess.run(
                [str(bindir / "fsdp-run"), f"{tag}.plan", *flags, *local, "--lr", str(LR),
                 "--steps", str(STEPS)], cwd=job, check=True, capture_output=True,
                text=True).stdout)
            expected[tag] = {"plan": f"{tag}.plan", "flags": flags + local, "cpu": cpu,
                             "torch": torch_losses if precision == "fp32" else None,
                             "rtol": RTOL[precision]}
            print(f"  {tag}: cpu {cpu}" + (f", torch {torch_losses}"
                                           if precision == "fp32" else ""))
            if precision == "bf16" and ranks == 1:
                # Attention on the backend's own kernel instead of cuDNN's:
                # both must give the CPU's losses.
                expected[f"{tag}-no-cudnn"] = dict(expected[tag], gpu_only=True,
                                                   env={"FSDPRT_CUDNN": "off"})
            if precision == "fp32" and ranks == 1:
                # NCCL with a real communicator at world size 1 (one GPU),
                # its id through a file store: on a GPU only.
                expected[f"{tag}-nccl"] = dict(
                    expected[tag], gpu_only=True,
                    flags=flags + ["--nccl", f"file:{model_name}.ncclid", "--rank", "0",
                                   "--world-size", "1"])
    for f in job.glob("*.onnx*"):
        f.unlink()
    (job / "expected.json").write_text(json.dumps(expected, indent=1))
    return 0


def close(got: list[float], want: list[float], rtol: float) -> bool:
    return len(got) == len(want) and all(
        abs(g - w) <= rtol * abs(w) for g, w in zip(got, want))


def compare(job: Path, fsdp_run: str, device: str) -> int:
    expected = json.loads((job / "expected.json").read_text())
    failures = 0
    for tag, case in expected.items():
        if case.get("gpu_only") and not device.startswith("cuda"):
            print(f"{tag}: skipped on {device} (it needs a GPU)")
            continue
        proc = subprocess.run([fsdp_run, case["plan"], *case["flags"], "--lr", str(LR),
                               "--steps", str(STEPS), "--device", device],
                              cwd=job, capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, **case.get("env", {})))
        got = losses(proc.stdout)
        if proc.returncode != 0:
            error = [l for l in proc.stderr.splitlines() if "error" in l]
            print(f"{tag}: FAILED (exit {proc.returncode}): "
                  f"{(error or proc.stderr.splitlines() or [''])[-1][:300]}")
            failures += 1
            continue
        verdicts = []
        ok = close(got, case["cpu"], case["rtol"])
        verdicts.append(f"cpu {'equal' if ok else 'DIFFERENT'}")
        if case["torch"]:
            same = close(got, case["torch"], case["rtol"])
            verdicts.append(f"torch {'equal' if same else 'DIFFERENT'}")
            ok &= same
        print(f"{tag}: {device} {['%.6f' % v for v in got]} vs cpu "
              f"{['%.6f' % v for v in case['cpu']]}: {', '.join(verdicts)}")
        failures += not ok
    return 1 if failures else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("make")
    m.add_argument("build", type=Path)
    m.add_argument("job", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("job", type=Path)
    c.add_argument("fsdp_run")
    c.add_argument("--device", default="cuda")
    args = ap.parse_args(argv)
    if args.mode == "make":
        return make(args.build.resolve(), args.job.resolve())
    fsdp_run = str(Path(args.fsdp_run).resolve()) if "/" in args.fsdp_run else args.fsdp_run
    return compare(args.job.resolve(), fsdp_run, args.device)


if __name__ == "__main__":
    sys.exit(main())
