#!/usr/bin/env python3
"""One bf16 mixed-precision AdamW training step on a GPU: fsdp-run against
PyTorch eager and torch.compile, same model, batch and sequence length.

    run.py prepare BUILD OUT [--tiny]   here (torch 1.13, fsdp-opt): builds
        each model from the corpus classes (test/corpus/models.py), exports
        it without its weights' data, compiles its training step (AdamW,
        param-dtype=bf16 reduce-dtype=f32, world size 1) and writes
        OUT/<model>.plan and OUT/models.json. --tiny: small shapes, for a
        smoke run without a GPU.
    run.py run OUT FSDP_RUN [--device cuda] [--torch-device cuda]   on the
        GPU machine (torch 2.x): makes the same model from the same seed,
        saves its weights (safetensors) for fsdp-run --load-full, and times
        one training step of each side after warm-up steps; measures the
        GPU's bf16 peak with a large GEMM in the same run; prints tokens/s,
        MFU against that peak and peak memory, one row per model and side;
        then, for GPT-2, the step sharded over 2 ranks (local ranks on the
        one GPU): the cost model's step, compute, communication and exposed
        communication beside the measured ones.

Models: GPT-2 small (124M, sequence 1024) and a LLaMA-style model of about
1B parameters (d 2048, 16 layers, SwiGLU 5632, sequence 1024). MFU counts
6 * parameters * tokens plus attention's 12 * layers * d * sequence per
token, the usual estimate. Torch runs the model under autocast(bf16) with
fp32 parameters and AdamW (the same mixed precision as the plan: bf16
compute, fp32 master weights and optimizer state).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "corpus"))
sys.path.insert(0, str(ROOT / "python-frontend"))

LR = 1e-4
FULL = {
    "gpt2-124m": ("GPT2", dict(vocab=50257, d=768, n_layer=12, n_head=12, max_len=1024),
                  "GPT2Block", 4, 1024),
    "llama-1b": ("Llama", dict(vocab=32000, d=2048, n_layer=16, n_head=16, hidden=5632,
                               max_len=1024), "LlamaBlock", 2, 1024),
}
# The ops of fsdp-run's step listed by the profile.
PROFILE_TOP = 12
# Models also compiled over 2 ranks, whose measured overlap is printed
# beside the cost model's (the 1B one would double the run).
OVERLAP = ("gpt2-124m", "gpt2-tiny")
TINY = {
    "gpt2-tiny": ("GPT2", dict(vocab=256, d=64, n_layer=2, n_head=4, max_len=64),
                  "GPT2Block", 2, 64),
    "llama-tiny": ("Llama", dict(vocab=256, d=64, n_layer=2, n_head=4, hidden=128,
                                 max_len=64), "LlamaBlock", 2, 64),
}


def build(cls: str, kwargs: dict):
    import torch

    import models

    torch.manual_seed(0)
    return getattr(models, cls)(**kwargs)


def prepare(build_dir: Path, out: Path, tiny: bool) -> int:
    import torch

    import fsdp_mlir

    out.mkdir(parents=True, exist_ok=True)
    bindir = build_dir / "bin"
    table = {}
    for name, (cls, kwargs, block, batch, seq) in (TINY if tiny else FULL).items():
        model = build(cls, kwargs)
        ids = torch.zeros(batch, seq, dtype=torch.int64)
        onnx = out / f"{name}.onnx"
        start = time.time()
        fsdp_mlir.export(model, (ids,), onnx, input_names=["input_ids"],
                         external_data=True)
        mlir = out / f"{name}.mlir"
        subprocess.run([bindir / "fsdp-opt", onnx, f"--batch-size={batch}",
                        "--fsdp-train-pipeline=world-size=1 autodiff={loss=cross-entropy}"
                        f" auto-wrap={{policy=transformer layer-classes={block}"
                        " param-dtype=bf16 reduce-dtype=f32} optimizer={optimizer=adamw}"
                        " mixed-precision=true", "-o", mlir], check=True)
        subprocess.run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o",
                        out / f"{name}.plan"], check=True)
        modelled = None
        if name in OVERLAP:
            modelled = compile_two_ranks(bindir, onnx, mlir, out / f"{name}.2ranks.plan",
                                         block, batch)
        for f in out.glob(f"{name}.onnx*"):
            f.unlink()
        mlir.unlink()
        params = sum(p.numel() for p in model.parameters())
        table[name] = dict(cls=cls, kwargs=kwargs, batch=batch, seq=seq, params=params)
        if modelled:
            table[name]["modelled_2ranks"] = modelled
        print(f"  {name}: {params / 1e6:.1f}M parameters, plan in "
              f"{time.time() - start:.0f} s", flush=True)
    (out / "models.json").write_text(json.dumps(table, indent=1))
    return 0


def compile_two_ranks(bindir: Path, onnx: Path, mlir: Path, plan: Path, block: str,
                      batch: int) -> dict:
    """The step sharded over 2 ranks (FULL_SHARD, the global batch split),
    and the cost model's figures for it (ms): fsdp-opt's unit summary."""
    out = subprocess.run(
        [bindir / "fsdp-opt", onnx, f"--batch-size={batch // 2}",
         "--fsdp-train-pipeline=world-size=2 autodiff={loss=cross-entropy}"
         f" auto-wrap={{policy=transformer layer-classes={block}"
         " param-dtype=bf16 reduce-dtype=f32} optimizer={optimizer=adamw}"
         " mixed-precision=true unit-summary=true", "-o", mlir],
        check=True, capture_output=True, text=True).stdout
    found = re.search(r"modelled step (\S+) ms \(compute (\S+) ms, communication (\S+) ms, "
                      r"exposed (\S+) ms\)", out)
    if not found:
        raise RuntimeError(f"no modelled step in fsdp-opt's output:\n{out}")
    subprocess.run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan], check=True)
    return dict(zip(("step", "compute", "communication", "exposed"), map(float, found.groups())))


def fsdp_step(fsdp_run: str, out: Path, name: str, plan: str, steps: int, device: str,
              *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """fsdp-run of `plan` in OUT on model `name`'s batch and weights."""
    return subprocess.run([fsdp_run, plan, "--input", f"input_ids={name}.ids.npy",
                           "--input", f"labels={name}.labels.npy", "--lr", str(LR),
                           "--load-full", f"{name}.safetensors", "--steps", str(steps),
                           "--device", device, *extra],
                          cwd=out, capture_output=True, text=True, timeout=540, env=env)


def failure(proc: subprocess.CompletedProcess) -> str:
    """The last line of a failed run's stderr that names an error."""
    lines = [l for l in proc.stderr.splitlines() if "error" in l] or \
        proc.stderr.splitlines() or ["?"]
    return lines[-1][:200]


def overlap_rows(fsdp_run: str, out: Path, name: str, modelled: dict, device: str,
                 steps: int) -> list[str]:
    """The 2-rank step (local ranks on one device) measured beside the cost
    model's figures: step, compute, communication, exposed (ms per step)."""
    rows = [f"| {name} | modelled | {modelled['step']:.3f} | {modelled['compute']:.3f} | "
            f"{modelled['communication']:.3f} | {modelled['exposed']:.3f} | "
            f"{modelled['exposed'] / modelled['step'] if modelled['step'] else 0:.3f} |"]
    proc = fsdp_step(fsdp_run, out, name, f"{name}.2ranks.plan", steps, device,
                     "--local-ranks", "2", "--json")
    if proc.returncode != 0:
        return rows + [f"| {name} | measured | {failure(proc)} | | | | |"]
    r = json.loads(proc.stdout)
    ms = 1e3 / steps
    step = sum(r["run_seconds"]) * ms
    rows.append(f"| {name} | measured (2 local ranks, {device}) | {step:.3f} | "
                f"{r['compute_seconds'] * ms:.3f} | {r['communication_seconds'] * ms:.3f} | "
                f"{r['exposed_communication_seconds'] * ms:.3f} | {r['exposed_fraction']:.3f} |")
    return rows


def peak_tflops(torch, device: str) -> float:
    """The bf16 GEMM rate of this GPU, measured now (8192^3, 10 runs)."""
    if device == "cpu":
        n, dtype = 512, torch.float32
    else:
        n, dtype = 8192, torch.bfloat16
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync(torch, device)
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    sync(torch, device)
    return 2 * n**3 * 10 / (time.perf_counter() - start) / 1e12


def sync(torch, device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize()


def torch_step_time(torch, model, ids, labels, device: str, compiled: bool,
                    steps: int) -> tuple[float, int]:
    """Median seconds of one AdamW step under autocast(bf16), and the peak
    memory allocated (bytes; 0 on the CPU)."""
    import torch.nn.functional as F

    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), LR)
    forward = torch.compile(model) if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda" if device != "cpu" else "cpu",
                            dtype=torch.bfloat16):
            logits = forward(ids)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                               labels.reshape(-1))
        loss.backward()
        opt.step()

    for _ in range(3):  # warm-up (and compilation)
        step()
    sync(torch, device)
    if device != "cpu":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        sync(torch, device)
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() if device != "cpu" else 0
    return statistics.median(times), peak


def ours_step_time(fsdp_run: str, out: Path, name: str, device: str,
                   steps: int, graph: bool = True) -> tuple[float, int, str]:
    """Median seconds of one step of fsdp-run (after 2), the plan's bytes,
    and an error ("" when it ran)."""
    proc = fsdp_step(fsdp_run, out, name, f"{name}.plan", steps + 2, device, "--json",
                     *([] if graph else ["--no-cuda-graph"]))
    if proc.returncode != 0:
        return 0.0, 0, failure(proc)
    report = json.loads(proc.stdout)
    return statistics.median(report["run_seconds"][2:]), report["plan_bytes_per_rank"], ""


def profile_rows(fsdp_run: str, out: Path, name: str, device: str,
                 top: int = 12) -> list[str]:
    """fsdp-run's step by op (FSDPRT_PROFILE=1, --no-cuda-graph: each
    kernel's time on the device, or its wall time on the CPU), the ops
    that take the most first: op, kernels, ms per step, share."""
    steps = 2
    proc = fsdp_step(fsdp_run, out, name, f"{name}.plan", steps, device, "--no-cuda-graph",
                     env=dict(os.environ, FSDPRT_PROFILE="1"))
    if proc.returncode != 0:
        return [f"| {name} | {failure(proc)} | | | |"]
    total: dict[str, float] = {}
    count: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        found = re.match(r"fsdprt: kernel \d+ \((\S+)[^)]*\): ([\d.]+) ms", line)
        if found:
            op, ms = found.group(1), float(found.group(2))
            total[op] = total.get(op, 0.0) + ms / steps
            count[op] = count.get(op, 0) + 1
    whole = sum(total.values()) or 1.0
    ranked = sorted(total, key=total.get, reverse=True)[:top]
    return [f"| {name} | {op} | {count[op] // steps} | {total[op]:.2f} | "
            f"{100 * total[op] / whole:.1f}% |" for op in ranked]


def save_file(state: dict, path: str) -> None:
    """safetensors' save_file, or where the package is missing (Debian's
    torch 1.13 here) the format itself: a little-endian u64 header length,
    the JSON header, then each tensor's bytes."""
    try:
        from safetensors.torch import save_file as save
        return save(state, path)
    except ImportError:
        pass
    names = {"torch.float32": "F32", "torch.bfloat16": "BF16", "torch.float16": "F16",
             "torch.int64": "I64"}
    header, blobs, offset = {}, [], 0
    for fqn, t in state.items():
        data = t.cpu().contiguous().view(-1).view(dtype=t.dtype).numpy().tobytes() \
            if t.dtype != __import__("torch").bfloat16 else \
            t.cpu().contiguous().view(__import__("torch").int16).numpy().tobytes()
        header[fqn] = {"dtype": names[str(t.dtype)], "shape": list(t.shape),
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for blob in blobs:
            f.write(blob)


def run(out: Path, fsdp_run: str, device: str, torch_device: str, steps: int,
        only: list[str]) -> int:
    import numpy as np
    import torch

    table = json.loads((out / "models.json").read_text())
    if only:
        table = {name: m for name, m in table.items() if name in only}
    peak = peak_tflops(torch, torch_device)
    print(f"peak measured now: {peak:.1f} TFLOP/s "
          f"({'bf16 8192^3 GEMM' if torch_device != 'cpu' else 'fp32 512^3 GEMM'})",
          flush=True)
    # Each row is printed as it is measured, so a run cut short at its
    # time limit still reports the models it finished.
    print("\n| model | side | tokens/s | MFU | peak GiB | step ms | step time / torch eager |")
    print("|---|---|---|---|---|---|---|", flush=True)
    for name, m in table.items():
        model = build(m["cls"], m["kwargs"])
        state, seen = {}, set()
        for fqn, p in model.state_dict(keep_vars=True).items():
            if id(p) not in seen and isinstance(p, torch.nn.Parameter):
                seen.add(id(p))
                state[fqn] = p.detach().contiguous()
        save_file(state, str(out / f"{name}.safetensors"))
        g = torch.Generator().manual_seed(1)
        vocab = m["kwargs"]["vocab"]
        ids = torch.randint(0, vocab, (m["batch"], m["seq"]), generator=g)
        labels = torch.randint(0, vocab, (m["batch"], m["seq"]), generator=g)
        np.save(out / f"{name}.ids.npy", ids.numpy())
        np.save(out / f"{name}.labels.npy", labels.numpy())
        tokens = m["batch"] * m["seq"]
        k = m["kwargs"]
        flops = 6 * m["params"] * tokens + 12 * k["n_layer"] * k["d"] * m["seq"] * tokens
        results = []
        for graph in (True, False):
            seconds, plan_bytes, error = ours_step_time(fsdp_run, out, name, device, steps,
                                                        graph)
            results.append(("fsdp-run" + ("" if graph else " --no-cuda-graph"), seconds,
                            plan_bytes, error))
        on = ids.to(torch_device), labels.to(torch_device)
        for compiled in (False, True):
            label = "torch.compile" if compiled else "torch eager"
            if compiled and not hasattr(torch, "compile"):
                results.append((label, 0.0, 0, "this torch has no torch.compile"))
                continue
            try:
                s, mem = torch_step_time(torch, build(m["cls"], m["kwargs"]), *on,
                                         torch_device, compiled, steps)
                results.append((label, s, mem, ""))
            except Exception as e:  # noqa: BLE001 (reported in the table)
                results.append((label, 0.0, 0, f"{type(e).__name__}: {str(e)[:150]}"))
            if torch_device != "cpu":
                torch.cuda.empty_cache()
        eager = next(s for label, s, _, _ in results if label == "torch eager")
        for label, s, mem, error in results:
            if error:
                print(f"| {name} | {label} | {error} | | | | |", flush=True)
                continue
            print(f"| {name} | {label} | {tokens / s:,.0f} | "
                  f"{100 * flops / s / 1e12 / peak:.1f}% | {mem / 2**30:.2f} | "
                  f"{s * 1e3:.1f} | {s / eager if eager else 0:.2f} |", flush=True)
    print("\nfsdp-run's memory is its plan (arenas and workspace), torch's "
          "max_memory_allocated.")
    # Where the step's time goes, for the first model (the step run
    # directly, each kernel between two events).
    first = next(iter(table), None)
    if first:
        print("\nfsdp-run's step by op (FSDPRT_PROFILE=1, --no-cuda-graph; "
              f"the {PROFILE_TOP} ops that take longest):\n")
        print("| model | op | kernels per step | ms per step | share of the kernels |")
        print("|---|---|---|---|---|")
        print("\n".join(profile_rows(fsdp_run, out, first, device, PROFILE_TOP)), flush=True)
    overlap = []
    for name, m in table.items():
        if "modelled_2ranks" in m and (out / f"{name}.2ranks.plan").exists():
            overlap += overlap_rows(fsdp_run, out, name, m["modelled_2ranks"], device, steps)
    if overlap:
        print("\nSharded over 2 ranks (FULL_SHARD, the same global batch), modelled "
              "(fsdp-opt's unit summary) and measured (fsdp-run --local-ranks 2 --json; "
              "on a GPU the device's clock), ms per step:\n")
        print("| model | figures | step | compute | communication | exposed | exposed fraction |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(overlap))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("build", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--tiny", action="store_true")
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("fsdp_run")
    r.add_argument("--device", default="cuda")
    r.add_argument("--torch-device", default="cuda")
    r.add_argument("--steps", type=int, default=5)
    r.add_argument("--only", nargs="*", default=[], help="these models alone")
    args = ap.parse_args(argv)
    if args.mode == "prepare":
        return prepare(args.build.resolve(), args.out.resolve(), args.tiny)
    fsdp_run = str(Path(args.fsdp_run).resolve()) if "/" in args.fsdp_run else args.fsdp_run
    return run(args.out.resolve(), fsdp_run, args.device, args.torch_device, args.steps,
               args.only)


if __name__ == "__main__":
    sys.exit(main())
