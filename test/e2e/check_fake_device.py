#!/usr/bin/env python3
"""The CUDA backend's host code on the fake device equals the CPU backend.

    check_fake_device.py BUILD_DIR [--keep DIR]

`fsdp-run --device fake-cuda` runs a plan through the CUDA backend's host
code on host memory (runtime/backends/cuda/backend.cpp on fake_device.cpp):
the project's own kernel bodies where they exist, every launch through the
stream hazard checker, memory reached only by upload/download/copy/fill.
The corpus GPT-2 and LLaMA training plans (AdamW, one unit per block,
FULL_SHARD) at 1, 2 and 4 ranks must give the CPU backend's losses over 3
steps (within 1e-6 relative: the bodies accumulate in fp32 where the CPU
kernels use double), their bf16 mixed-precision plans at 1, 2 and 4 ranks
within one bf16 ulp (1e-2), each on `fake-cuda` and on `fake-cuda:strict`
(which refuses any op with no CUDA kernel, as a GPU does: so every op of
these plans has its own kernel), and a sharded checkpoint saved on the fake
device (downloaded, as from a GPU) must resume on the CPU with the
uninterrupted run's losses. Single-rank plans run through a CUDA graph
(step 1 direct, step 2 captured, then replays) give the direct steps'
losses bit for bit. A label out of range (cross-entropy) and a
token id out of range (the embedding's gather) are recorded in the
kernel's error slot and reported, naming the kernel, as the CPU backend
reports them (in the bf16 plan too, where the cross-entropy runs widened).
The corpus vision models train on `fake-cuda:strict` too (so their
convolutions and everything around them have own kernels): the ViT (patch
convolution, AdamW) at 1 and 2 ranks in fp32 (1e-6) and bf16 (1e-2), with a
graph's replays bit for bit the direct steps, and ResNet-18 (convolutions
of every kind it has, training-mode BatchNorm, max pooling; SGD) at one
rank within 1e-5, also on `fake-cuda:cudnn` (convolutions and training
batch norms through the backend's cuDNN path, on the host models of the
graphs): BatchNorm over the 8 values of layer4's 1x1 maps
amplifies the bodies' fp32 sums against the CPU's double ones (the CPU's
own 1- and 2-thread runs differ as much; AdamW or a smaller batch would
amplify them further).
Exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpt2_job  # noqa: E402

MODELS = {"gpt2": "GPT2Block", "llama": "LlamaBlock"}
# fake-cuda:strict refuses an op with no CUDA kernel (as a GPU does), so a
# plan it runs runs on the backend's own kernels alone.
DEVICES = ("fake-cuda", "fake-cuda:strict")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader")


def compile_plan(bindir: Path, corpus: Path, work: Path, model: str, world: int,
                 bf16: bool = False) -> Path:
    tag = f"{model}{world}{'-bf16' if bf16 else ''}"
    mlir, plan = work / f"{tag}.mlir", work / f"{tag}.plan"
    precision = [" param-dtype=bf16 reduce-dtype=f32"] if bf16 else [""]
    # Fused attention (fsdp-autodiff's default): the CUDA backend's own
    # attention and attention_grad kernels (kernels/attention.h).
    subprocess.run([bindir / "fsdp-opt", corpus / f"{model}.onnx", f"--batch-size={4 // world}",
                    f"--fsdp-train-pipeline=world-size={world} optimizer={{optimizer=adamw}}"
                    f" auto-wrap={{policy=transformer layer-classes={MODELS[model]}"
                    + precision[0] + "}" + (" mixed-precision=true" if bf16 else ""),
                    "-o", mlir], check=True)
    subprocess.run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan], check=True)
    return plan


# The corpus vision models: the auto-wrap class, the pipeline's autodiff option (a
# loss attached to the ViT's logits), the optimizer, the global batch, the
# ranks and the losses' relative tolerance in fp32 (module docstring).
VISION = {"vit": ("EncoderBlock", " autodiff={loss=cross-entropy}", "adamw", 4, (1, 2), 1e-6),
          "resnet18": ("BasicBlock", "", "sgd", 8, (1,), 1e-5)}


def compile_vision(bindir: Path, corpus: Path, work: Path, model: str, world: int,
                   bf16: bool = False) -> Path:
    wrap, loss, optimizer, batch, _, _ = VISION[model]
    tag = f"{model}{world}{'-bf16' if bf16 else ''}"
    mlir, plan = work / f"{tag}.mlir", work / f"{tag}.plan"
    precision = " param-dtype=bf16 reduce-dtype=f32" if bf16 else ""
    subprocess.run([bindir / "fsdp-opt", corpus / f"{model}.onnx",
                    f"--batch-size={batch // world}",
                    f"--fsdp-train-pipeline=world-size={world}"
                    f" optimizer={{optimizer={optimizer}}}{loss}"
                    f" auto-wrap={{policy=transformer layer-classes={wrap}{precision}}}"
                    + (" mixed-precision=true" if bf16 else ""), "-o", mlir],
                   check=True, capture_output=True)
    subprocess.run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan], check=True)
    return plan


def write_images(work: Path, model: str) -> dict[str, Path]:
    """The model's global batch of 32x32 images and class labels (10)."""
    batch = VISION[model][3]
    rng = np.random.default_rng(1)
    inputs = {"pixels": work / f"{model}-pixels.npy", "labels": work / f"{model}-labels.npy"}
    np.save(inputs["pixels"], rng.standard_normal((batch, 3, 32, 32)).astype(np.float32))
    np.save(inputs["labels"], rng.integers(0, 10, (batch,)).astype(np.int64))
    return inputs


def run(bindir: Path, work: Path, plan: Path, world: int, device: str, *flags,
        inputs: dict[str, Path] | None = None) -> list[float]:
    if inputs is None:  # the GPT-2/LLaMA batch (gpt2_job.write_batch)
        inputs = {"input_ids": work / "ids.npy", "labels": work / "labels.npy"}
    given = [arg for name, path in inputs.items() for arg in ("--input", f"{name}={path}")]
    cmd = ([] if world == 1 else ["mpirun", "-np", str(world), "--oversubscribe"]) + [
        str(bindir / "fsdp-run"), str(plan), *given, "--lr", "1e-3", "--threads", "1",
        "--device", device, *map(str, flags)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]


def refused(bindir: Path, work: Path, what: str, message: str, op: str,
            plan: str = "gpt21.plan") -> bool:
    """Whether one GPT-2 step is refused on every device with `message`,
    naming kernel `op`."""
    lines = {}
    for device in ("cpu",) + DEVICES:
        try:
            run(bindir, work, work / plan, 1, device, "--steps", 1)
            lines[device] = "NOT REFUSED"
        except RuntimeError as e:
            line = [l for l in str(e).splitlines() if "error:" in l]
            lines[device] = line[0] if line else str(e)[-300:]
    good = all(message in l and op in l for l in lines.values())
    for device in DEVICES:
        print(f"  {what} ({plan}): {device}: {lines[device]} "
              f"{'(as the CPU)' if good else 'MISMATCH: cpu: ' + lines['cpu']}")
    return good


def check_vision(bindir: Path, corpus: Path, work: Path) -> int:
    """The corpus ViT and ResNet-18 training on the strict fake device (and
    the ViT on the other) give the CPU's losses; the failures."""
    failures = 0
    for model, (_, _, _, _, worlds, rtol) in VISION.items():
        inputs = write_images(work, model)
        # ResNet-18 also on fake-cuda:cudnn: its convolutions and training
        # batch norms through the backend's cuDNN path (the host models).
        devices = DEVICES if model == "vit" else ("fake-cuda:strict",
                                                  "fake-cuda:cudnn")
        # bf16 ResNet-18 strays from the CPU beyond one bf16 ulp within
        # two steps (BatchNorm over 8 values, above): fp32 only.
        for bf16, tol in ((False, rtol), (True, 1e-2)) if model == "vit" else ((False, rtol),):
            for world in worlds:
                plan = compile_vision(bindir, corpus, work, model, world, bf16)
                cpu = run(bindir, work, plan, world, "cpu", "--steps", 3, inputs=inputs)
                for device in devices:
                    fake = run(bindir, work, plan, world, device, "--steps", 3, inputs=inputs)
                    same = len(cpu) == 3 and np.allclose(fake, cpu, rtol=tol, atol=0)
                    print(f"  {model}{' bf16' if bf16 else ''} at {world} rank(s): "
                          f"{device} {fake}, cpu {cpu} {'equal' if same else 'DIFFERENT'}")
                    failures += not same
    # A graph's replays issue the direct steps' work: the same losses.
    plan, inputs = work / "vit1.plan", write_images(work, "vit")
    graphs = run(bindir, work, plan, 1, "fake-cuda:strict", "--steps", 4, inputs=inputs)
    direct = run(bindir, work, plan, 1, "fake-cuda:strict", "--steps", 4, "--no-cuda-graph",
                 inputs=inputs)
    same = len(direct) == 4 and graphs == direct
    print(f"  vit: 4 steps through a graph {graphs}, directly {direct} "
          f"{'identical' if same else 'DIFFERENT'}")
    return failures + (not same)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args(argv)
    bindir = args.build.resolve() / "bin"
    corpus = args.build.resolve() / "test" / "corpus"
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        gpt2_job.write_batch(work)
        for model in MODELS:
            # fp32, then mixed precision (bf16 parameters and compute, fp32
            # masters and reductions: the casts run their bodies bit for
            # bit, the other kernels widened as on the CPU).
            for bf16, rtol in ((False, 1e-6), (True, 1e-2)):
                for world in (1, 2, 4):
                    plan = compile_plan(bindir, corpus, work, model, world, bf16)
                    cpu = run(bindir, work, plan, world, "cpu", "--steps", 3)
                    for device in DEVICES:
                        fake = run(bindir, work, plan, world, device, "--steps", 3)
                        same = len(cpu) == 3 and np.allclose(fake, cpu, rtol=rtol, atol=0)
                        print(f"  {model}{' bf16' if bf16 else ''} at {world} rank(s): "
                              f"{device} {fake}, cpu {cpu} {'equal' if same else 'DIFFERENT'}")
                        failures += not same
            # CUDA graphs (single rank): step 1 direct, step 2 captured and
            # replayed, steps 3-4 replayed; the fake device fails a replay
            # that issues other work, or in another order, than the direct
            # step. Bit for bit the losses of every step run directly.
            plan = work / f"{model}1.plan"
            graphs = run(bindir, work, plan, 1, "fake-cuda:strict", "--steps", 4)
            direct = run(bindir, work, plan, 1, "fake-cuda:strict", "--steps", 4,
                         "--no-cuda-graph")
            same = len(direct) == 4 and graphs == direct
            print(f"  {model}: 4 steps through a graph {graphs}, directly {direct} "
                  f"{'identical' if same else 'DIFFERENT'}")
            failures += not same
            # Saved on the fake device, resumed on the CPU.
            plan = work / f"{model}2.plan"
            ck = work / f"{model}.ck"
            first = run(bindir, work, plan, 2, "fake-cuda", "--steps", 2,
                        "--save-checkpoint", ck)
            resumed = run(bindir, work, plan, 2, "cpu", "--steps", 1, "--resume", ck)
            whole = run(bindir, work, plan, 2, "cpu", "--steps", 3)
            same = np.allclose(first + resumed, whole, rtol=1e-6, atol=0)
            print(f"  {model}: 2 steps on fake-cuda, saved, 1 resumed on cpu: "
                  f"{first + resumed} (uninterrupted {whole}) {'equal' if same else 'DIFFERENT'}")
            failures += not same
        failures += check_vision(bindir, corpus, work)
        # A label out of range (cross-entropy) and a token id out of range
        # (the embedding's gather): recorded in the kernel's error slot,
        # reported after it ran with the kernel's op and location, as on
        # the CPU.
        bad = np.load(work / "labels.npy")
        bad[1, 3] = 70
        np.save(work / "labels.npy", bad)
        # In the bf16 plan the cross-entropy runs widened: its error slot
        # is the one it was given when prepared.
        for plan in ("gpt21.plan", "gpt21-bf16.plan"):
            failures += not refused(bindir, work, "a label out of range",
                                    "label 70 is outside [0, 64)",
                                    "softmax_cross_entropy", plan)
        np.save(work / "labels.npy", np.zeros((4, 16), np.int64))
        ids = np.load(work / "ids.npy")
        ids[2, 5] = 99
        np.save(work / "ids.npy", ids)
        failures += not refused(bindir, work, "a token id out of range",
                                "index 99 is out of range for a dimension of size 64",
                                "gather")
    print(f"{'all' if not failures else failures} fake-device check(s) "
          f"{'passed' if not failures else 'FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
